package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/quantity"
)

// Fork (SPEC S3, the isolated tier): a running engineer sandbox is copied
// into new sandboxes that go on from its memory and a copy of its volume.
// Each fork is a sandbox of its own from then on: its own name, key,
// repository credential, volume, expiry and place in the quota. Its rows
// are written first, starting and claimed, as a create's; the driver then
// saves the source and makes the forks' machines (Forker), and each
// fork's start is a restore of that save (startMachine), as a resume
// from memory is. A gateway stopped in between leaves starting rows the
// start-up sweep finishes: restored when the save was recorded on them,
// else made afresh from their copied volumes.
//
// An agent's session forks too (SPEC S13, best of N): waiting between
// tasks, its checkout and its agent's home (the conversation) are copied
// into each fork (Runs.Fork), and each runs one task, the same for all,
// as the next task of the source's conversation on the source's work,
// pushing to its own branch berth/<name>. Each is a session of its own
// from then on.

// MaxForks is how many forks one fork makes at most.
const MaxForks = 8

// ForkRequest is what a fork asks for.
type ForkRequest struct {
	Name  string // the fork's name; with Count > 1, each is Name-1 … Name-Count
	Count int    // 0 is 1
	// Task is what each fork of an agent's session does first, going on
	// from the source's conversation; an engineer sandbox's takes none.
	Task string
}

// ForkNames are the names a fork of req makes.
func ForkNames(req ForkRequest) []string {
	if req.Count <= 1 {
		return []string{req.Name}
	}
	names := make([]string, req.Count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", req.Name, i+1)
	}
	return names
}

// ForkKind says whether sb can be forked on this deployment: "" when it
// can, else why not.
func (s *Service) ForkKind(sb Sandbox) string {
	if sb.Purpose == PurposeAgent {
		return s.sessionForkKind(sb)
	}
	f, ok := s.driver.(Forker)
	if !ok {
		return "this deployment's machines cannot save their memory"
	}
	return f.Checkpoints(sb)
}

// Fork copies the running sandbox ref into req's new sandboxes, as p, and
// returns them, starting. Only the owner (or an operator) may: the forks
// hold what ran inside it, where an administrator never goes (SPEC S6).
func (s *Service) Fork(ctx context.Context, p account.Principal, ref string, req ForkRequest) ([]Sandbox, error) {
	forks, err := s.fork(ctx, p, ref, req)
	if err != nil {
		return nil, fmt.Errorf("fork sandbox %s: %w", ref, err)
	}
	return forks, nil
}

func (s *Service) fork(ctx context.Context, p account.Principal, ref string, req ForkRequest) ([]Sandbox, error) {
	if p.Sandbox != "" {
		return nil, fault.Errorf(fault.Forbidden, "a sandbox's key cannot fork sandboxes")
	}
	if req.Count < 0 || req.Count > MaxForks {
		return nil, fault.Field("count", "%d forks asked for; a fork makes 1 to %d", req.Count, MaxForks)
	}
	names := ForkNames(req)
	for _, name := range names {
		if err := CheckName("name", name); err != nil {
			return nil, err
		}
	}
	src, err := s.manageable(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	if !p.CanShell(src.Owner) {
		return nil, fault.Errorf(fault.Forbidden, "only the owner of sandbox %s forks it: a fork holds what runs inside it, where an administrator does not go", src.Name)
	}
	if err := s.forkable(src, req); err != nil {
		return nil, err
	}
	if s.pastExpiry(src) {
		return nil, expiredError(src)
	}
	g, err := s.accounts.EffectiveGuardrail(ctx, src.Org, src.Project)
	if err != nil {
		return nil, err
	}
	if err := g.CheckSize(src.CPU, src.Memory); err != nil {
		return nil, fmt.Errorf("class %s: %w", src.Class, err)
	}
	if src.Repo != "" {
		if err := s.cfg.Repositories.Allowed(ctx, src); err != nil {
			return nil, err
		}
	}
	og, err := s.accounts.EffectiveGuardrail(ctx, src.Org, "")
	if err != nil {
		return nil, err
	}
	prj, err := s.accounts.Project(ctx, src.Org, src.Project)
	if err != nil {
		return nil, err
	}
	def, max := s.classLifetimes(ctx, src)
	// A fork's lifetime is its class's default from now, under the
	// guardrail as at a create.
	ttl, cut, err := s.lifetime("", def, max, g)
	if err != nil {
		return nil, err
	}
	forks, specs, err := s.forkRows(ctx, p, src, req.Task, names, life{ttl, cut}, og, g, prj.Name)
	if err != nil {
		return nil, err
	}
	if src.Purpose == PurposeAgent {
		return s.forkWork(ctx, p, src, forks, specs)
	}
	return s.forkMachine(ctx, p, src, forks, specs)
}

// forkable refuses a fork of src that cannot be made: an engineer
// sandbox's that is not running or whose machine cannot be saved
// running, an agent's that is not a session waiting for its next task.
func (s *Service) forkable(src Sandbox, req ForkRequest) error {
	if src.Purpose == PurposeAgent {
		if why := s.sessionForkKind(src); why != "" {
			return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: %s", src.Name, why)
		}
		if src.State != StateSuspended {
			return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: it is %s, and a session forks between tasks (when its task is over)", src.Name, src.State)
		}
		if strings.TrimSpace(req.Task) == "" {
			return fault.Field("task", "a session's forks each run a task: give the one they all try")
		}
		return checkTask(src.Contract, req.Task)
	}
	if req.Task != "" {
		return fault.Field("task", "an engineer sandbox's fork runs no task: its processes go on from the source's")
	}
	forker, ok := s.driver.(Forker)
	switch {
	case !ok:
		return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: this deployment's machines cannot save their memory", src.Name)
	case src.State != StateRunning:
		return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: it is %s, and only a running sandbox is (resume it first)", src.Name, src.State)
	}
	if why := forker.Checkpoints(src); why != "" {
		return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: %s", src.Name, why)
	}
	return nil
}

// sessionForkKind says whether the agent sandbox sb can be forked on this
// deployment: "" when it can, else why not.
func (s *Service) sessionForkKind(sb Sandbox) string {
	switch {
	case !s.agentRun(sb) || !sb.Session:
		return "an agent sandbox forks only as a session (created with --session), between its tasks"
	case s.inMachine():
		return "this deployment's agent runs work on a clone inside their machines, which ends with each task: there is no checkout to copy"
	}
	return ""
}

// forkMachine saves the running engineer sandbox src into the machines
// of forks, whose rows are written, and queues their starts: restores of
// that save.
func (s *Service) forkMachine(ctx context.Context, p account.Principal, src Sandbox, forks []Sandbox, specs []Spec) ([]Sandbox, error) {
	forker := s.driver.(Forker) // forkable checked
	began := s.now()
	size, err := forker.Fork(ctx, src.ID, specs)
	if err != nil {
		s.log.WarnContext(ctx, "fork failed", "sandbox", src.ID, "err", err)
		for _, sb := range forks {
			s.done(sb.ID)
			s.fail(ctx, sb.ID, "its source could not be saved: "+err.Error())
		}
		return nil, fault.Errorf(fault.Unavailable, "sandbox %s was not forked: %v", src.Name, err)
	}
	s.record(ctx, audit.Event{At: s.now(), Org: src.Org, Actor: p.User.ID, Sandbox: string(src.ID), Action: audit.SandboxFork, Target: src.Name,
		Detail: fmt.Sprintf("forked into %s: %s of memory saved in %s", strings.Join(forkNames(forks), ", "), quantity.FormatMiB(size.MiB()), s.now().Sub(began).Round(time.Millisecond))})
	for i, sb := range forks {
		next := sb
		next.Checkpoint = size
		out, err := s.write(ctx, p.User.ID, sb, Update{Sandbox: next, From: StateStarting, At: s.now()})
		if err != nil {
			// Terminated meanwhile: whoever ended it removes its machine.
			s.done(sb.ID)
			continue
		}
		out.LifetimeCut = sb.LifetimeCut // the answer's alone, as a create's
		forks[i] = out
		s.enqueue(ctx, Spec{Sandbox: out})
	}
	return forks, nil
}

// forkWork copies the session src's checkout and agent home into forks,
// whose rows are written, and queues their starts: each a first task
// that goes on from src's conversation.
func (s *Service) forkWork(ctx context.Context, p account.Principal, src Sandbox, forks []Sandbox, specs []Spec) ([]Sandbox, error) {
	if err := s.runs.Fork(ctx, src, forks); err != nil {
		s.log.WarnContext(ctx, "session fork failed", "sandbox", src.ID, "err", err)
		for _, sb := range forks {
			s.done(sb.ID)
			s.fail(ctx, sb.ID, "its source's work could not be copied: "+err.Error())
		}
		if errors.Is(err, fault.Conflict) {
			return nil, err
		}
		return nil, fault.Errorf(fault.Unavailable, "sandbox %s was not forked: %v", src.Name, err)
	}
	s.record(ctx, audit.Event{At: s.now(), Org: src.Org, Actor: p.User.ID, Sandbox: string(src.ID), Action: audit.SandboxFork, Target: src.Name,
		Detail: fmt.Sprintf("forked into %s: its checkout and its agent's conversation copied, for a task of %d bytes", strings.Join(forkNames(forks), ", "), len(forks[0].Task))})
	for _, spec := range specs {
		s.enqueue(ctx, spec)
	}
	return forks, nil
}

// forkNames are the names of forks.
func forkNames(forks []Sandbox) []string {
	names := make([]string, len(forks))
	for i, sb := range forks {
		names[i] = sb.Name
	}
	return names
}

// life is a new sandbox's lifetime, and why it was cut ("" when it was
// not).
type life struct {
	ttl time.Duration
	cut string
}

// forkRows writes the forks' rows, starting and claimed, and returns them
// with the specs their machines are made of (task is each agent fork's). A fork that does not fit
// whole makes none: the first row is admitted only with room for all.
func (s *Service) forkRows(ctx context.Context, p account.Principal, src Sandbox, task string, names []string, l life, og, g guardrail.Guardrail, project string) ([]Sandbox, []Spec, error) {
	var forks []Sandbox
	var specs []Spec
	undo := func(reason string) {
		for _, sb := range forks {
			s.done(sb.ID)
			s.fail(ctx, sb.ID, reason)
		}
	}
	now := s.now()
	for i, name := range names {
		sb := Sandbox{
			ID: NewID(), Name: name, Org: src.Org, Project: src.Project, Owner: src.Owner,
			Purpose: src.Purpose, Class: src.Class, Image: src.Image, Isolation: src.Isolation, Runtime: src.Runtime,
			CPU: src.CPU, Memory: src.Memory, Disk: src.Disk, State: StateStarting,
			Repo: src.Repo, GitMode: src.GitMode, Branch: src.Branch, Role: src.Role,
			Contract: src.Contract, SetupCommand: slices.Clone(src.SetupCommand), SSHKeys: slices.Clone(src.SSHKeys), Env: maps.Clone(src.Env),
			Egress: src.Egress, CreatedAt: now, ExpiresAt: now.Add(l.ttl), LifetimeCut: l.cut, ForkedFrom: src.ID,
			// A session's: its runner and model, and the task each fork tries.
			Runner: src.Runner, Model: src.Model, Session: src.Session, Task: task,
		}
		key, secret := account.NewSandboxKey(sb.Owner, string(sb.ID), sb.Project, sb.ExpiresAt, now)
		sb.KeyID = key.ID
		// This row and the ones after it must all fit.
		rest := len(names) - i - 1
		admit := func(live Live) error {
			if err := guardrail.CheckCount(og.MaxSandboxes, live.Org+rest, "the organisation"); err != nil {
				return err
			}
			return guardrail.CheckCount(g.MaxSandboxes, live.Project+rest, "project "+project)
		}
		events := append(s.createEvents(p.User.ID, sb, project), audit.Event{At: now, Org: sb.Org, Actor: p.User.ID, Sandbox: string(sb.ID),
			Action: audit.SandboxFork, Target: sb.Name, Detail: fmt.Sprintf("a fork of sandbox %s (%s)", src.Name, src.ID)})
		s.claim(ctx, sb.ID)
		if err := s.store.CreateSandbox(ctx, sb, key, admit, events...); err != nil {
			s.done(sb.ID)
			undo("its fork was refused: " + err.Error())
			if errors.Is(err, fault.Exceeded) && rest > 0 {
				err = fmt.Errorf("%d forks do not fit: %w", len(names), err)
			}
			return nil, nil, err
		}
		forks = append(forks, sb)
		var token forge.Token
		if sb.GitMode == GitToken {
			t, err := s.cfg.Repositories.Mint(ctx, sb, p.User.ID)
			if err != nil {
				undo("no repository credential: " + err.Error())
				return nil, nil, fmt.Errorf("repository %s: %w", sb.Repo, err)
			}
			token = t
		}
		env, err := s.environment(ctx, sb, secret, token)
		if err != nil {
			undo(err.Error())
			return nil, nil, err
		}
		specs = append(specs, Spec{Sandbox: sb, Env: env})
	}
	return forks, specs, nil
}
