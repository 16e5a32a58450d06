package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox/input"
)

// Accounts is what the sandbox service needs to know about organisations,
// projects, users and guardrails.
type Accounts interface {
	Organisation(ctx context.Context, p account.Principal, ref string) (account.Organisation, error)
	DefaultProject(ctx context.Context, org string) (account.Project, error)
	Project(ctx context.Context, org, ref string) (account.Project, error)
	User(ctx context.Context, id string) (account.User, error)
	EffectiveGuardrail(ctx context.Context, org, project string) (guardrail.Guardrail, error)
}

// Config is the deployment's sandbox settings (SPEC S16), read once by the
// composition root.
type Config struct {
	// Driver names the driver for messages; "" means the deployment runs no
	// sandboxes.
	Driver string
	// Runtimes maps each tier the deployment offers to a runtime name ("" is
	// the driver's default). A tier missing from the map is unavailable.
	Runtimes map[Tier]string
	// Repositories is how sandboxes reach their repositories (package
	// repository); nil means sandboxes cannot have one.
	Repositories Repositories
	// PublicURL is the gateway as a sandbox reaches it (BERTH_BASE_URL).
	PublicURL string
	// GatewayKey is an authorized_keys line the gateway adds for an
	// engineer sandbox besides its owner's keys (the panel's terminal:
	// package terminal); nil adds none.
	GatewayKey func(id ID) string
	// MinTTL is the shortest lifetime a sandbox may ask for; 5m unless a
	// test lowers it.
	MinTTL time.Duration
	// IdleSuspend suspends an engineer sandbox with no connection open
	// through the gateway for this long (BERTH_SANDBOX_IDLE_SUSPEND); 0 is
	// never.
	IdleSuspend time.Duration
	// Audit records every state change, key minted or revoked, class
	// change, repository credential and push (SPEC S17); nil records
	// nothing.
	Audit audit.Recorder
	// Retention is how long an ended sandbox is kept, with its running
	// segments and keys, before the sweep deletes it
	// (BERTH_USAGE_RETENTION, SPEC S8); 0 keeps them for ever.
	Retention time.Duration
	// Metrics receives creates, failures, readiness and sweep times; nil
	// reports nothing.
	Metrics Metrics
	// AgentRunner is the runner an agent sandbox's class is chosen for
	// when its create names none (BERTH_AGENT_RUNNER, SPEC S13).
	AgentRunner string
}

// Service drives sandboxes through their lifecycle. Its Run method owns the
// background work: starting machines and sweeping.
type Service struct {
	store    Store
	driver   Driver // nil when the deployment runs no sandboxes
	accounts Accounts
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	audit    audit.Recorder
	metrics  Metrics

	starts   chan startJob
	mu       sync.Mutex
	inflight map[ID]func() // sandboxes whose start is queued or running, with their holds' release
	stages   stages        // how far each of those has got (stage.go)
	settled  chan struct{} // closed, and replaced, whenever a start ends (under mu)
	activity Activity      // nil: no connection is counted (SetActivity)
	warm     Warm          // nil: no sandbox is a pool's (SetWarm)
	stopOnce sync.Once
	stopping chan struct{} // closed by Shutdown: Run takes no new work

	runs     Runs      // nil: agent sandboxes run no runner (SetRuns)
	follows  chan ID   // agent runs to follow again (after a restart)
	modelEnv ModelEnv  // nil: sandboxes are told no model
	secrets  SecretEnv // nil: sandboxes get no secret's placeholder
	replicas Replicas  // alone unless WithReplicas
}

type startJob struct {
	spec Spec
}

// Option sets an optional dependency of a Service.
type Option func(*Service)

// NewService returns a Service. driver may be nil: then every create is
// refused as unavailable.
func NewService(store Store, driver Driver, accounts Accounts, cfg Config, log *slog.Logger, now func() time.Time, opts ...Option) *Service {
	if cfg.MinTTL == 0 {
		cfg.MinTTL = class.MinTTL
	}
	rec := cfg.Audit
	if rec == nil {
		rec = audit.Discard{}
	}
	var m Metrics = noMetrics{}
	if cfg.Metrics != nil {
		m = cfg.Metrics
	}
	s := &Service{
		store: store, driver: driver, accounts: accounts, cfg: cfg, log: log, now: now, audit: rec, metrics: m,
		starts:   make(chan startJob, 1024),
		inflight: map[ID]func(){},
		settled:  make(chan struct{}),
		stopping: make(chan struct{}),
		follows:  make(chan ID, 1024),
		replicas: alone{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// CreateRequest is what a caller asks for. Strings are as typed; Create
// checks them all.
type CreateRequest struct {
	Name    string
	Class   string
	Purpose string
	Project string
	TTL     string
	Repo    string
	Branch  string
	Task    string
	Runner  string
	Model   string // the model an agent's run starts on; "": chosen for its runner
	Role    string // author (the default) or reviewer; agent sandboxes only
	SSHKeys []string
	Env     map[string]string
	// Egress narrows an agent sandbox's egress, restrict-only, as its
	// guardrails do: none, learn (within an open class), or hosts.
	Egress []string
	// Session keeps an agent sandbox after each task, suspended, for the
	// next (NextTask).
	Session bool
	// Compare names the agent sandboxes whose pushed work a reviewer
	// compares (2 to MaxForks, of its repository): its verdict names
	// the best.
	Compare []string
}

// Create admits a new sandbox and queues its start. It returns the sandbox
// in state starting; Run moves it on.
func (s *Service) Create(ctx context.Context, p account.Principal, req CreateRequest) (Sandbox, error) {
	sb, err := s.create(ctx, p, req)
	if err != nil {
		s.metrics.CreateFailed(StageAdmission)
		return Sandbox{}, fmt.Errorf("create sandbox %s: %w", req.Name, err)
	}
	s.metrics.Created(sb.Purpose)
	return sb, nil
}

func (s *Service) create(ctx context.Context, p account.Principal, req CreateRequest) (Sandbox, error) {
	if p.Sandbox != "" {
		return Sandbox{}, fault.Errorf(fault.Forbidden, "a sandbox's key cannot create sandboxes")
	}
	if err := CheckName("name", req.Name); err != nil {
		return Sandbox{}, err
	}
	purpose, err := ParsePurpose(req.Purpose)
	if err != nil {
		return Sandbox{}, err
	}
	if err := s.checkRequestShape(purpose, req); err != nil {
		return Sandbox{}, err
	}
	role, err := ParseRole(req.Role, purpose)
	if err != nil {
		return Sandbox{}, err
	}
	if s.driver == nil {
		return Sandbox{}, fault.Errorf(fault.Unavailable, "this deployment runs no sandboxes (BERTH_SANDBOX_DRIVER is unset)")
	}
	org := p.User.Org
	prj, err := s.chooseProject(ctx, p, org, req.Project)
	if err != nil {
		return Sandbox{}, err
	}
	classRunner := ""
	if purpose == PurposeAgent {
		classRunner = cmp.Or(req.Runner, s.cfg.AgentRunner)
	}
	class, err := s.chooseClass(ctx, org, req.Class, purpose, classRunner)
	if err != nil {
		return Sandbox{}, err
	}
	if purpose == PurposeAgent {
		// The class says the image's contract, which bounds the task.
		if err := checkTask(class.Contract, req.Task); err != nil {
			return Sandbox{}, err
		}
	}
	runtime, err := s.runtime(class)
	if err != nil {
		return Sandbox{}, err
	}
	g, err := s.accounts.EffectiveGuardrail(ctx, org, prj.ID)
	if err != nil {
		return Sandbox{}, err
	}
	if err := g.CheckSize(class.CPU, class.Memory); err != nil {
		return Sandbox{}, fmt.Errorf("class %s: %w", class.Name, err)
	}
	ttl, cut, err := s.lifetime(req.TTL, class.DefaultTTL, class.MaxTTL, g)
	if err != nil {
		return Sandbox{}, err
	}
	var repo forge.Repo
	if req.Repo != "" {
		if repo, err = s.cfg.Repositories.Resolve(ctx, org, prj.ID, req.Repo); err != nil {
			return Sandbox{}, err
		}
	}
	now := s.now()
	sb := Sandbox{
		ID: NewID(), Name: req.Name, Org: org, Project: prj.ID, Owner: p.User.ID,
		Purpose: purpose, Class: class.Name, Image: class.Image, Isolation: class.Isolation, Runtime: runtime,
		CPU: class.CPU, Memory: class.Memory, Disk: class.Disk,
		State: StateStarting, Branch: req.Branch, Task: req.Task, Runner: req.Runner, Role: role,
		Contract: class.Contract, SetupCommand: class.SetupCommand, SSHKeys: req.SSHKeys, Env: req.Env, CreatedAt: now, ExpiresAt: now.Add(ttl),
		LifetimeCut: cut, Egress: sandboxEgress(class, purpose, g, req.Egress), Session: req.Session,
	}
	if req.Repo != "" {
		sb.Repo, sb.GitMode = repo.String(), class.Git
	}
	if sb.Compare, err = s.compared(ctx, p, sb, req.Compare); err != nil {
		return Sandbox{}, err
	}
	sb.FromPool = s.pooled(class, purpose)
	if purpose == PurposeAgent && s.runs != nil {
		// The runner, its image and the model its run starts on (one its
		// runner can call), or the create is refused here, before
		// anything starts.
		if err := s.runs.Choose(ctx, &sb, class, prj, req.Model); err != nil {
			return Sandbox{}, err
		}
	} else if req.Model != "" {
		return Sandbox{}, fault.Field("model", "this deployment runs no agent's task, so no run starts on a model")
	}
	key, secret := account.NewSandboxKey(p.User.ID, string(sb.ID), prj.ID, sb.ExpiresAt, now)
	sb.KeyID = key.ID
	// The organisation's own max_sandboxes counts the whole organisation;
	// the combined one counts the project. Read both before the store's
	// transaction: admit runs inside it and must not touch the database.
	og, err := s.accounts.EffectiveGuardrail(ctx, org, "")
	if err != nil {
		return Sandbox{}, err
	}
	admit := func(live Live) error {
		// The organisation first: when its limit is the one that binds, the
		// message names it.
		if err := guardrail.CheckCount(og.MaxSandboxes, live.Org, "the organisation"); err != nil {
			return err
		}
		return guardrail.CheckCount(g.MaxSandboxes, live.Project, "project "+prj.Name)
	}
	// Claimed before the row exists: a sweep that reads the row before its
	// start is queued must not take it for a start a restart interrupted.
	s.claim(ctx, sb.ID)
	if err := s.store.CreateSandbox(ctx, sb, key, admit, s.createEvents(p.User.ID, sb, prj.Name)...); err != nil {
		s.done(sb.ID)
		return Sandbox{}, err
	}
	s.log.InfoContext(ctx, "sandbox created", "sandbox", sb.ID, "name", sb.Name, "user", p.User.ID,
		"purpose", sb.Purpose, "class", sb.Class, "expires", sb.ExpiresAt)
	if sb.FromPool {
		// Nothing of the sandbox's own goes to the pool's machine but a
		// token; its environment, key and repository token are made when
		// it asks (Bootstrap). The key made above is replaced then.
		bt, err := s.issueBootstrap(ctx, sb)
		if err != nil {
			s.done(sb.ID)
			s.fail(ctx, sb.ID, err.Error())
			return Sandbox{}, err
		}
		s.enqueue(ctx, Spec{Sandbox: sb, Bootstrap: bt})
		return sb, nil
	}
	var token forge.Token
	if sb.GitMode == GitToken {
		if token, err = s.cfg.Repositories.Mint(ctx, sb, p.User.ID); err != nil {
			s.done(sb.ID)
			s.fail(ctx, sb.ID, "no repository credential: "+err.Error())
			return Sandbox{}, fmt.Errorf("repository %s: %w", sb.Repo, err)
		}
	}
	env, err := s.environment(ctx, sb, secret, token)
	if err != nil {
		s.done(sb.ID)
		s.fail(ctx, sb.ID, err.Error())
		return Sandbox{}, err
	}
	s.enqueue(ctx, Spec{Sandbox: sb, Env: env})
	return sb, nil
}

// checkRequestShape checks what needs no lookup: what each purpose needs,
// the caller's environment and the runner.
func (s *Service) checkRequestShape(purpose Purpose, req CreateRequest) error {
	switch purpose {
	case PurposeEngineer:
		// What the caller meant first: a task says an agent sandbox was
		// meant, which needs no ssh key.
		if req.Task != "" || req.Runner != "" {
			return fault.Field("task", "a task or a runner needs an agent sandbox: add --purpose agent (an engineer sandbox takes neither)")
		}
		if len(req.SSHKeys) == 0 {
			return fault.Field("ssh_keys", "an engineer sandbox needs an ssh public key (berth sandbox create sends ~/.ssh/*.pub, or --ssh-key FILE)")
		}
		if len(req.Egress) > 0 {
			return fault.Field("egress", "an engineer sandbox goes out on its own network: only an agent sandbox takes egress (--purpose agent)")
		}
		if req.Session {
			return fault.Field("session", "only an agent sandbox is a session (--purpose agent); an engineer sandbox stays until it is ended anyway")
		}
		if req.Model != "" {
			return fault.Field("model", "only an agent sandbox takes a model (--purpose agent); an engineer sandbox's BERTH_MODEL is the first model its project may reach")
		}
	case PurposeAgent:
		if req.Repo == "" || req.Task == "" {
			return fault.Field("repo", "an agent sandbox needs both a repository and a task (--repo and --task)")
		}
		if len(req.SSHKeys) > 0 {
			return fault.Field("ssh_keys", "nothing attaches to an agent sandbox, so it takes no ssh key")
		}
		if req.Session && s.inMachine() {
			return fault.Field("session", "sessions run on podman; this deployment's driver runs each agent task whole in its machine")
		}
		if _, err := runner.Get(req.Runner); req.Runner != "" && err != nil {
			return fault.Field("runner", "%q is not a runner (one of %v)", req.Runner, runner.Names())
		}
	}
	if field, err := input.SSHKeys(req.SSHKeys); err != nil {
		return fault.Field(field, "%v", err)
	}
	if len(req.Egress) > 0 {
		if _, err := egress.ParseWords(req.Egress); err != nil {
			return fault.Field("egress", "%v", err)
		}
	}
	if req.Branch != "" {
		if req.Repo == "" {
			return fault.Field("branch", "a branch needs a repository (--repo)")
		}
		if err := forge.CheckBranch(req.Branch); err != nil {
			return fault.Field("branch", "%v", err)
		}
	}
	if req.Repo != "" && s.cfg.Repositories == nil {
		return fault.Errorf(fault.Unavailable, "repository %s asked for, but this deployment has no git forge (BERTH_SANDBOX_GIT_FORGE is unset)", req.Repo)
	}
	if field, err := input.Env(req.Env); err != nil {
		return fault.Field(field, "%v", err)
	}
	return s.checkWithheld(req.Env)
}

// chooseProject returns the project a sandbox goes in: the caller's own
// (the one an administrator set for them, else the organisation's oldest),
// or the one an administrator names. The project must belong to the
// caller's organisation: the owner is checked, not just that the row exists.
func (s *Service) chooseProject(ctx context.Context, p account.Principal, org, ref string) (account.Project, error) {
	def, err := s.accounts.DefaultProject(ctx, org)
	if err != nil {
		return account.Project{}, err
	}
	if p.User.Project != "" && p.User.Org == org {
		if def, err = s.accounts.Project(ctx, org, p.User.Project); err != nil {
			return account.Project{}, err
		}
	}
	if ref == "" || ref == def.ID || ref == def.Name {
		return def, nil
	}
	if !p.IsAdminOf(org) {
		return account.Project{}, fault.Errorf(fault.Forbidden, "only an administrator may choose a project; a member's sandbox goes in %s", def.Name)
	}
	prj, err := s.accounts.Project(ctx, org, ref)
	if err != nil {
		if errors.Is(err, fault.NotFound) {
			return account.Project{}, fault.Field("project", "no project %q in your organisation", ref)
		}
		return account.Project{}, err
	}
	return prj, nil
}

// chooseClass returns the named class or, when none is named, the class a
// user expects of the organisation's classes that allow the purpose: the
// only one; else, for an agent sandbox, the one whose runner is the run's
// (runnerName: the creator's, else the deployment's); else the one for that
// purpose alone in berth's contract (its default: a kelos class is for one
// agent's image, so it is named or found by its runner). Anything else is
// refused listing the candidates.
func (s *Service) chooseClass(ctx context.Context, org, name string, purpose Purpose, runnerName string) (class.Class, error) {
	if name != "" {
		c, err := s.store.GetClass(ctx, org, name)
		if errors.Is(err, fault.NotFound) {
			return class.Class{}, fault.Field("class", "no class %q in your organisation (berth sandbox classes lists them)", name)
		}
		if err != nil {
			return class.Class{}, err
		}
		if !c.Allows(purpose) {
			return class.Class{}, fault.Field("class", "class %s is not for %s sandboxes", c.Name, purpose)
		}
		return c, nil
	}
	all, _, err := s.store.ListClasses(ctx, org, paging.Request{})
	if err != nil {
		return class.Class{}, err
	}
	fit := slices.DeleteFunc(all, func(c class.Class) bool { return !c.Allows(purpose) })
	one := func(keep func(class.Class) bool) (class.Class, bool) {
		var found []class.Class
		for _, c := range fit {
			if keep(c) {
				found = append(found, c)
			}
		}
		if len(found) == 1 {
			return found[0], true
		}
		return class.Class{}, false
	}
	switch len(fit) {
	case 0:
		return class.Class{}, fault.Field("class", "your organisation has no class for %s sandboxes (an administrator adds one with berth sandbox apply)", purpose)
	case 1:
		return fit[0], nil
	}
	if purpose == PurposeAgent && runnerName != "" {
		if c, ok := one(func(c class.Class) bool { return c.Runner == runnerName }); ok {
			return c, nil
		}
	}
	if c, ok := one(func(c class.Class) bool { return c.Only(purpose) && c.Contract != ContractKelos }); ok {
		return c, nil
	}
	names := make([]string, len(fit))
	for i, c := range fit {
		names[i] = c.Name
	}
	return class.Class{}, fault.Field("class", "is required: this organisation has %d %s classes (%s); name one with --class", len(fit), purpose, strings.Join(names, ", "))
}

// runtime maps a class's tier to the deployment's runtime, refusing a tier
// it has not mapped: never run at a weaker tier (SPEC S4, S5).
func (s *Service) runtime(c class.Class) (string, error) {
	rt, ok := s.cfg.Runtimes[c.Isolation]
	if !ok {
		return "", fault.Errorf(fault.Unavailable, "class %s asks for the %s tier, which this deployment has not mapped to a runtime: an operator sets %s",
			c.Name, c.Isolation, c.Isolation.Setting())
	}
	return rt, nil
}

// lifetime reads a requested TTL (empty: def) and cuts it to the class's
// maximum and the guardrail's (SPEC S3: cut, not refused).
func (s *Service) lifetime(req string, def, max time.Duration, g guardrail.Guardrail) (time.Duration, string, error) {
	ttl, asked := def, "the class's default_ttl "+quantity.FormatDuration(def)
	if req != "" {
		d, err := parseDuration(req)
		if err != nil {
			return 0, "", fault.Field("ttl", "%v", err)
		}
		if d <= 0 {
			return 0, "", fault.Field("ttl", "%s must be more than 0", req)
		}
		if d < s.cfg.MinTTL {
			return 0, "", fault.Field("ttl", "%s is under the %s minimum", req, quantity.FormatDuration(s.cfg.MinTTL))
		}
		ttl, asked = d, "ttl "+req
	}
	var cut string
	if ttl > max {
		ttl = max
		cut = fmt.Sprintf("%s is cut to %s, the class's max_ttl", asked, quantity.FormatDuration(max))
	}
	if g2 := g.CutTTL(ttl); g2 < ttl {
		ttl = g2
		cut = fmt.Sprintf("%s is cut to %s, the guardrail's max_sandbox_ttl", asked, quantity.FormatDuration(ttl))
	}
	return ttl, cut, nil
}

// Get finds a sandbox the caller may see, by id or name (SPEC S6).
func (s *Service) Get(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	sb, err := s.resolve(ctx, p, ref)
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", ref, err)
	}
	return sb, nil
}

// Own returns the sandbox whose own key p holds (the egress proxy's
// caller); fault.NotFound for any other key.
func (s *Service) Own(ctx context.Context, p account.Principal) (Sandbox, error) {
	if p.Sandbox == "" {
		return Sandbox{}, fault.Errorf(fault.NotFound, "not a sandbox's own key")
	}
	sb, err := s.store.GetSandbox(ctx, ID(p.Sandbox))
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", p.Sandbox, err)
	}
	return sb, nil
}

// resolve finds ref: an id, or a name that resolves to the caller's own
// sandbox first, then to the one other sandbox of that name they may see.
// Sandboxes the caller may not see are not found, never forbidden.
func (s *Service) resolve(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	if p.Sandbox != "" {
		return Sandbox{}, fault.NotFound
	}
	if len(ref) > 4 && ref[:4] == "sbx_" {
		sb, err := s.store.GetSandbox(ctx, ID(ref))
		if errors.Is(err, fault.NotFound) {
			return Sandbox{}, fault.NotFound // the caller names the sandbox
		}
		if err != nil {
			return Sandbox{}, err
		}
		if !p.CanSee(sb.Org, sb.Owner) {
			return Sandbox{}, fault.NotFound
		}
		return sb, nil
	}
	if CheckName("name", ref) != nil {
		return Sandbox{}, fault.NotFound
	}
	for _, ended := range []bool{false, true} {
		f := Filter{Name: ref, Ended: ended}
		if !p.IsOperator() {
			f.Org = p.User.Org
		}
		found, err := s.store.ListSandboxes(ctx, f)
		if err != nil {
			return Sandbox{}, err
		}
		var visible []Sandbox
		for _, sb := range found {
			if ended && sb.Live() {
				continue // already considered in the first pass
			}
			if sb.Owner == p.User.ID {
				return sb, nil // the newest of the caller's own
			}
			if p.CanSee(sb.Org, sb.Owner) {
				visible = append(visible, sb)
			}
		}
		switch {
		case len(visible) == 1:
			return visible[0], nil
		case len(visible) > 1 && !ended:
			ids := make([]string, len(visible))
			for i, sb := range visible {
				ids[i] = string(sb.ID)
			}
			// SPEC S6: 409 listing the ids.
			return Sandbox{}, &fault.Error{Kind: fault.Ambiguous, IDs: ids,
				Message: fmt.Sprintf("%d sandboxes are named %s; name one by its id", len(ids), ref)}
		case len(visible) > 1:
			return visible[0], nil // several ended ones: the newest
		}
	}
	return Sandbox{}, fault.NotFound
}

// ListOptions narrows List.
type ListOptions struct {
	Class   string
	Purpose string
	State   State  // "" is any; a state that has ended shows even without All
	Owner   string // a user id; "" is anybody's the caller sees
	Search  string // in names and repositories, case-insensitive
	All     bool   // include ended sandboxes
	// Page is the page to read: at most Page.Limit (0: every one) after
	// Page.After, newest first.
	Page paging.Request
}

// List returns a page of the sandboxes the caller may see, newest first
// (their own, their organisation's for an administrator, every one for an
// operator), and the key of its last one when more follow.
func (s *Service) List(ctx context.Context, p account.Principal, opt ListOptions) ([]Sandbox, *paging.Key, error) {
	if p.Sandbox != "" {
		return nil, nil, nil
	}
	f := Filter{Class: opt.Class, Ended: opt.All || opt.State != "", State: opt.State, Search: opt.Search, Owner: opt.Owner}
	if opt.Purpose != "" {
		pp, err := ParsePurpose(opt.Purpose)
		if err != nil {
			return nil, nil, err
		}
		f.Purpose = pp
	}
	switch {
	case p.IsOperator():
	case p.IsAdminOf(p.User.Org):
		f.Org = p.User.Org
	default:
		if opt.Owner != "" && opt.Owner != p.User.ID {
			return nil, nil, nil // a member sees no one else's
		}
		f.Org, f.Owner = p.User.Org, p.User.ID
	}
	return s.store.PageSandboxes(ctx, f, opt.Page)
}

// RunningTime is the sandbox's running time now.
func (s *Service) RunningTime(sb Sandbox) time.Duration { return sb.RunningTime(s.now()) }

// Read reads a sandbox by id for berth's own work (a run's report to its
// forge), with no caller to check: never for a caller's request.
func (s *Service) Read(ctx context.Context, id ID) (Sandbox, error) {
	return s.store.GetSandbox(ctx, id)
}

// Owner returns the user who owns sb, for display.
func (s *Service) Owner(ctx context.Context, sb Sandbox) (account.User, error) {
	return s.accounts.User(ctx, sb.Owner)
}

// sandboxEgress is the egress a sandbox is made with, as written: an
// agent's class's narrowed by the guardrails in force and by the create's
// own (asked, checked already), restrict-only; an engineer's open
// network.
func sandboxEgress(c class.Class, purpose Purpose, g guardrail.Guardrail, asked []string) string {
	p := c.EgressFor(purpose)
	if purpose == PurposeAgent {
		p = g.NarrowEgress(p)
		if len(asked) > 0 {
			if q, err := egress.ParseWords(asked); err == nil {
				p = p.Narrow(q)
			}
		}
	}
	return p.String()
}
