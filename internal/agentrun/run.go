package agentrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/transcript"
)

// RunState is where an agent run is.
type RunState string

// The states of a run.
const (
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
)

// Run is one agent execution in an agent sandbox (SPEC S2, S13): the runner,
// its telemetry as the agent reported it, and what came out.
type Run struct {
	Sandbox sandbox.ID
	// Seq numbers a sandbox's runs from 1: a session's tasks are its runs
	// 1, 2, …; every other agent sandbox has run 1 alone.
	Seq int
	// Task is the task this run was given ("" for a run recorded before
	// sessions: its sandbox's Task). Onto is the commit the sandbox's
	// branch was at when the run started, the session's last push ("" for
	// a first run): its push moves the branch only from there.
	Task   string
	Onto   string
	Runner string
	Model  string // the model the run was started on
	State  RunState
	// Exited says the run's machine exited, with ExitCode. A run that did
	// not has no exit code: its sandbox was ended under it (Ended), or its
	// machine never started or vanished.
	Exited   bool
	ExitCode int
	// Ended is how a run ended that did not exit: the state its sandbox
	// was moved to under it (terminated: by a user, or by the sweep at its
	// expiry; failed: its machine never started or vanished); "" for a
	// run that exited or still goes. EndedBy is the user who ended it, ""
	// for berth itself (the sweep), and EndedByName their name, read with
	// the run.
	Ended       sandbox.State
	EndedBy     string
	EndedByName string
	Error       string // why it failed, when it did
	Branch      string // the branch its work was pushed to
	Commit      string // and the commit
	Telemetry   runner.Telemetry
	Lines       int // stdout lines of the agent's stream read (a kelos image's markers and outputs are not)
	Ignored     int // of them, not in the runner's vocabulary
	// Metered is what the gateway metered of the run's model calls; nil
	// without inference. Difference says how Telemetry differs from it
	// once the run is over, and why (nil when they agree). Neither is
	// stored: both are worked out when the run is read.
	Metered    *Metered
	Difference *Difference
	StartedAt  time.Time
	EndedAt    time.Time

	// Review is a reviewer run's outcome (SPEC S13.5): held from its start
	// until a clean run's verdict is digested. Its Outcome is "" for an
	// author's run.
	Review review.Result
	// Outputs are the lines a kelos run printed between its output markers
	// (SPEC S13.6), and Results those of them of the form "key: value";
	// Setup how far its setup command got, as its banners said. Read from
	// its output, wherever that came from: the container's log the host
	// follows, or the stream an in-machine run's berth-init sends, which
	// is kept here until its exit report concludes the run.
	Outputs []string
	Results map[string]string
	Setup   kelos.Setup
}

// Workspaces makes the host-side checkout an agent run works on (SPEC
// S13.1: the only mount, at /work) and takes its work back.
type Workspaces interface {
	// Prepare checks out sb's repository (its branch's commit alone, a
	// shallow repository) into a directory of its own that the agent's
	// user owns (the user of the image's contract: kelos.UID for a kelos
	// image), and returns it.
	Prepare(ctx context.Context, sb sandbox.Sandbox) (string, error)
	// Push pushes the checkout's HEAD to the sandbox's branch,
	// refs/heads/berth/<name>, and returns the branch and the commit.
	// Nothing to push (no commit since the clone, or since onto) is not an
	// error: the commit is then "". The checkout is the agent's: no git is
	// run in it. onto is where a session's earlier run left the branch
	// ("" for a first run, which creates it): the branch moves only from
	// there.
	Push(ctx context.Context, sb sandbox.Sandbox, dir, onto string) (branch, commit string, err error)
	// Home makes (or keeps) the directory a session's agent has as its
	// HOME, beside its checkout and owned as it is, and returns it: the
	// CLI's own state outlives each task's machine.
	Home(sb sandbox.Sandbox) (string, error)
	// PushBundle makes the one ref of bundle, a git bundle of an
	// in-machine run's commits on its clone (at most MaxBundle bytes,
	// untrusted), the sandbox's branch, and returns the branch and the
	// commit, which must be commit.
	PushBundle(ctx context.Context, sb sandbox.Sandbox, bundle []byte, commit string) (branch, commitOut string, err error)
	// BranchFree refuses a run whose branch berth/<name> exists already:
	// what Prepare checks first, for a run that has no host checkout.
	BranchFree(ctx context.Context, sb sandbox.Sandbox) error
	// Dir is where sb's checkout is (or would be).
	Dir(sb sandbox.Sandbox) string
	// Copy makes dst's checkout, and its session home when src has one,
	// copies of src's as they are; on error dst has neither.
	Copy(src, dst sandbox.Sandbox) error
	// Remove deletes the checkout.
	Remove(sb sandbox.Sandbox) error
	// Diff is what commit, sb's pushed work, changed against where it
	// started (its merge base with sb's branch, or the repository's
	// default): git's stat and patch, at most MaxDiff bytes (cut says
	// so).
	Diff(ctx context.Context, sb sandbox.Sandbox, commit string) (diff string, cut bool, err error)
}

// MaxDiff bounds the diff of a run's work the gateway answers.
const MaxDiff = 8 << 20

// Change is what a run changed: its pushed branch and commit against the
// branch it started from, as git's stat and patch. Empty when it pushed
// nothing (yet).
type Change struct {
	Branch, Commit string
	Diff           string
	Cut            bool // Diff stops at MaxDiff
}

// Diff is what the run of a sandbox the caller may see changed.
func (s *Service) Diff(ctx context.Context, p account.Principal, ref string) (Change, sandbox.Sandbox, error) {
	sb, err := s.sandboxes.Get(ctx, p, ref)
	if err != nil {
		return Change{}, sandbox.Sandbox{}, err
	}
	run, err := s.store.GetRun(ctx, sb.ID)
	if errors.Is(err, fault.NotFound) {
		return Change{}, sb, fault.Errorf(fault.NotFound, "sandbox %s has no run", sb.Name)
	}
	if err != nil {
		return Change{}, sb, err
	}
	c := Change{Branch: run.Branch, Commit: run.Commit}
	if run.Commit == "" || s.work == nil {
		return c, sb, nil
	}
	c.Diff, c.Cut, err = s.work.Diff(ctx, sb, run.Commit)
	return c, sb, err
}

// Follower is an optional driver capability: stream a machine's output
// until it exits.
type Follower interface {
	// Follow calls line for every line the machine writes, stdout true for
	// its standard output, until the machine exits or ctx is done.
	Follow(ctx context.Context, id sandbox.ID, line func(stdout bool, b []byte)) error
}

// promptFile is where the host puts a run's task (SPEC S13.2).
const promptFile = ".berth-prompt.txt"

// MaxBundle bounds the work an in-machine run hands the gateway with its
// exit report, a git bundle: the wire's limit, which berth-init keeps too.
const MaxBundle = api.MaxBundle

// Choose fills in an agent sandbox's runner and image (SPEC S13: images
// per runner, fail-closed on an unmapped one) and the model its run starts
// on, at create: a run its driver cannot run, or no model fits, is refused
// before anything starts.
func (s *Service) Choose(ctx context.Context, sb *sandbox.Sandbox, class class.Class, prj account.Project, model string) error {
	name, image, err := s.chooseRunner(sb.Runner, class)
	if err != nil {
		return err
	}
	if name != "" {
		if !s.runsAgents() {
			return fault.Errorf(fault.Unavailable, "this deployment's driver (%s) can run no agents: it neither follows a run's output nor lets the machine run it whole, so runner %s cannot run here",
				s.cfg.Driver, name)
		}
		// SPEC S13: the runner's image, chosen per runner (a kelos
		// class's own image, S13.6).
		sb.Runner, sb.Image = name, image
	}
	run := ""
	if s.agentRun(*sb) {
		run = sb.Runner
	}
	if sb.Model, err = s.chooseModel(ctx, sb.Org, prj, run, model); err != nil {
		return err
	}
	return s.checkCompare(ctx, *sb)
}

// chooseRunner is an agent sandbox's runner and image. A kelos class
// brings its own image, built for the interface (S13.6): the runner names
// its agent type and reads its stream.
func (s *Service) chooseRunner(req string, class class.Class) (string, string, error) {
	// The creator's choice, else the class's, else the deployment's.
	name := cmp.Or(req, class.Runner, s.cfg.Runner)
	if name == "" {
		if class.Contract == sandbox.ContractKelos {
			return "", "", fault.Field("runner", "class %s runs a kelos image, which needs a runner: it names the agent type (KELOS_AGENT_TYPE)", class.Name)
		}
		return "", "", nil // an agent sandbox without a runner: it waits for its end
	}
	if err := runner.Runnable(name); err != nil {
		return "", "", fault.Field("runner", "%v", err)
	}
	if class.Contract == sandbox.ContractKelos {
		return name, class.Image, nil
	}
	image := s.cfg.Images[name]
	if image == "" {
		return "", "", fault.Errorf(fault.Unavailable, "runner %s has no image on this deployment (BERTH_RUNNER_IMAGES)", name)
	}
	return name, image, nil
}

// runEnv is what an agent run's container gets on top of the sandbox's
// environment: the runner, its config files, its credentials (by name, the
// sandbox's key as their value: every model call goes through the gateway),
// its non-secret settings, and what its contract adds. It returns the
// model the run starts on (the one chosen at create, in BERTH_MODEL) and
// the "$@" slot.
// The configs list every model the key may reach, each in the API its
// provider speaks.
func (s *Service) runEnv(ctx context.Context, sb sandbox.Sandbox, env map[string]string, resume bool) (model string, args []string, err error) {
	r, err := runner.Get(sb.Runner)
	if err != nil {
		return "", nil, err
	}
	model = env["BERTH_MODEL"]
	reach, err := s.reachable(ctx, sb.Org, sb.Project)
	if err != nil {
		return "", nil, err
	}
	i := slices.IndexFunc(reach, func(m runner.Model) bool { return m.ID == model })
	if model == "" || i < 0 {
		return "", nil, fmt.Errorf("model %q is not one the sandbox's key may reach now (it may reach %s)", model, listModels(reach))
	}
	if _, ok := runner.Speaks(r, reach[i]); !ok {
		return "", nil, fmt.Errorf("model %s is served in %s, which %s does not speak", model, joinAPIs(reach[i].APIs), sb.Runner)
	}
	g := runner.Gateway{BaseURL: strings.TrimSuffix(s.cfg.PublicURL, "/"), Models: reach}
	env["BERTH_RUNNER"] = sb.Runner
	env["BERTH_MODEL"], env["ANTHROPIC_MODEL"] = model, model
	for _, name := range r.Credentials() {
		env[name] = env["BERTH_API_KEY"]
	}
	vars, err := r.Env(g)
	if err != nil {
		return "", nil, err
	}
	for _, v := range vars {
		env[v.Name] = v.Value
	}
	var cfg agentconfig.Config
	if s.agentCfg != nil {
		if cfg, err = s.agentCfg.ForRun(ctx, sb.Org, sb.Project); err != nil {
			return "", nil, err
		}
	}
	if sb.Contract == sandbox.ContractKelos {
		args, err := kelosEnv(sb, env, cfg)
		if err != nil || !sb.Session {
			return model, args, err
		}
		// A session (Kelos's Session mode): at every start the entrypoint
		// only prepares, and berth runs the agent's own CLI with the task
		// on its standard input, continuing its conversation, whose state
		// is on the session's volume.
		maps.Copy(env, kelos.SessionState(sb.Runner, kelos.Home))
		env["BERTH_PROMPT_FILE"] = kelos.WorkDir + "/" + promptFile
		cli, err := r.ContainerArgs(runner.Options{Model: model, Effort: cfg.Effort, Resume: resume})
		if err != nil {
			return "", nil, err
		}
		return model, kelos.SessionArgs("BERTH_PROMPT_FILE", append([]string{r.Binary()}, cli...)), nil
	}
	opts := runner.Options{Model: model, Effort: cfg.Effort, Instructions: cfg.Instructions, Skills: cfg.Skills, MCP: cfg.MCP, Resume: resume}
	if _, ok := r.(runner.MCPConfigured); !ok && len(opts.MCP) > 0 {
		// An organisation's servers do not stop its runs of a CLI that
		// has no MCP (Pi): they are left out, and the log says so.
		s.log.InfoContext(ctx, "the runner takes no MCP server: the configuration's are left out", "sandbox", sb.ID, "runner", sb.Runner, "servers", len(opts.MCP))
		opts.MCP = nil
	}
	if cfg.SkillsPath != "" {
		// berth-init copies the repository's skills from the checkout.
		sk, ok := r.(runner.Skilled)
		if !ok {
			return "", nil, fault.Field("skills_path", "%s reads no skills", sb.Runner)
		}
		env["BERTH_SKILLS_FROM"], env["BERTH_SKILLS_DIR"] = cfg.SkillsPath, sk.SkillsDir()
	}
	if args, err = r.ContainerArgs(opts); err != nil {
		return "", nil, err
	}
	files, err := runner.RunFiles(r, g, opts)
	if err != nil {
		return "", nil, err
	}
	for i, f := range files {
		// Inference renders Pi's files with every model the key may reach
		// and their prices (Pi's own cost comes from them): those win.
		if v := env[piRendered[f.Path]]; v != "" && sb.Runner == "pi" {
			files[i].Content = []byte(v)
		}
	}
	if env["BERTH_RUNNER_FILES"], err = runner.FilesJSON(files); err != nil {
		return "", nil, err
	}
	env["BERTH_PROMPT_FILE"] = "/work/" + promptFile
	return model, args, nil
}

// prices are the deployment's model prices: the inference catalog's over
// the vendors' list prices.
func (s *Service) prices() runner.Prices {
	if s.cfg.Prices != nil {
		return s.cfg.Prices
	}
	return runner.ListPrices()
}

// piRendered names the variables inference renders Pi's files into.
var piRendered = map[string]string{".pi/agent/models.json": "BERTH_PI_CONFIG", ".pi/agent/settings.json": "BERTH_PI_SETTINGS"}

// Prepare makes the checkout, puts the task in it, turns spec into an
// agent run's and records the run. On error nothing is left behind.
func (s *Service) Prepare(ctx context.Context, spec *sandbox.Spec) error {
	sb := spec.Sandbox
	run, err := s.runToStart(ctx, sb)
	if err != nil {
		return err
	}
	model, args, err := s.runEnv(ctx, sb, spec.Env, goesOn(sb, run.Seq))
	if err != nil {
		return fmt.Errorf("runner %s: %w", sb.Runner, err)
	}
	network := s.cfg.Network
	if network == "" {
		network = "allowlist"
	}
	if s.inMachine() {
		// No checkout here: the machine clones through the gateway, asks
		// it for the task, and reports to it (inmachine.go).
		if err := s.work.BranchFree(ctx, sb); err != nil {
			return fmt.Errorf("check out %s: %w", sb.Repo, err)
		}
		spec.Env[runReportVar] = runReportGateway
		if sb.Role == sandbox.RoleReviewer {
			spec.Env[runPushVar] = "no" // a reviewer's work is its verdict
		}
		if sb.Contract == sandbox.ContractKelos {
			// berth-init runs the image's entrypoint with the task it
			// fetched as $1: the pod's arguments hold no task.
			spec.Env[runContractVar] = string(sandbox.ContractKelos)
			args = nil
		}
		// The machine asks for its task: it is not in the machine's spec
		// (no environment holds it), which whoever may read the cluster's
		// objects can read.
		spec.Run = &sandbox.RunSpec{Contract: sb.Contract, Args: args, Network: network, InMachine: true}
	} else {
		dir, err := s.checkout(ctx, sb, run.Seq)
		if err != nil {
			return err
		}
		task := sb.Task
		if len(sb.Compare) > 0 {
			note, err := s.putAttempts(ctx, sb, dir)
			if err != nil {
				s.dropCheckout(sb, run.Seq)
				return fmt.Errorf("the attempts to compare: %w", err)
			}
			task += note
		}
		if takesPromptFile(sb) {
			if err := writePrompt(dir, task); err != nil {
				s.dropCheckout(sb, run.Seq)
				return err
			}
		}
		spec.Run = &sandbox.RunSpec{Contract: sb.Contract, Work: dir, Args: args, Network: network, KelosSession: sb.Session && sb.Contract == sandbox.ContractKelos}
		if sb.Session {
			// The agent's own state (its conversation) outlives the
			// machine: the next task's CLI continues it.
			if spec.Run.Home, err = s.work.Home(sb); err != nil {
				s.dropCheckout(sb, run.Seq)
				return fmt.Errorf("the session's home: %w", err)
			}
		}
		if spec.Env["KELOS_PLUGIN_DIR"] != "" {
			// A kelos run's skills: a plugin the host writes beside the
			// checkout, which the driver mounts read-only.
			plugins := dir + ".plugins"
			if err := writeKelosPlugins(spec.Env, dir, plugins); err != nil {
				_ = os.RemoveAll(plugins)
				s.dropCheckout(sb, run.Seq)
				return fmt.Errorf("kelos plugins: %w", err)
			}
			spec.Run.Plugins = plugins
		}
	}
	run.Runner, run.Model, run.State, run.StartedAt = sb.Runner, model, RunRunning, s.now()
	run.Telemetry.Model = run.Model
	if sb.Role == sandbox.RoleReviewer {
		run.Review = review.Pending()
	}
	return s.store.PutRun(ctx, run)
}

// runToStart is the run a start of sb records: run 1, or for a session
// whose last run is over, the next one, on top of what the session has
// pushed. A start made again (a restart interrupted it) is the same run
// again.
func (s *Service) runToStart(ctx context.Context, sb sandbox.Sandbox) (Run, error) {
	run := Run{Sandbox: sb.ID, Seq: 1, Task: sb.Task}
	if !sb.Session {
		return run, nil
	}
	last, err := s.store.GetRun(ctx, sb.ID)
	switch {
	case errors.Is(err, fault.NotFound):
		return run, nil
	case err != nil:
		return Run{}, fmt.Errorf("the session's last run: %w", err)
	case last.State == RunRunning:
		run.Seq, run.Onto = max(last.Seq, 1), last.Onto
	default:
		run.Seq, run.Onto = max(last.Seq, 1)+1, cmp.Or(last.Commit, last.Onto)
	}
	return run, nil
}

// goesOn reports whether run seq of sb goes on from work done before:
// a session's later run, or a fork's first, which continues its
// source's.
func goesOn(sb sandbox.Sandbox, seq int) bool { return seq > 1 || sb.ForkedFrom != "" }

// checkout is the checkout run seq of sb works on: made fresh for a first
// run, the session's own, as its last run (or its fork's source) left
// it, for one that goes on.
func (s *Service) checkout(ctx context.Context, sb sandbox.Sandbox, seq int) (string, error) {
	if !goesOn(sb, seq) {
		dir, err := s.work.Prepare(ctx, sb)
		if err != nil {
			return "", fmt.Errorf("check out %s: %w", sb.Repo, err)
		}
		return dir, nil
	}
	dir := s.work.Dir(sb)
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the session's checkout of %s is gone: end the session and start another", sb.Repo)
	}
	return dir, nil
}

// dropCheckout removes what a start that failed made: a first run's
// checkout. A run that goes on leaves the session's as it was.
func (s *Service) dropCheckout(sb sandbox.Sandbox, seq int) {
	if !goesOn(sb, seq) {
		_ = s.work.Remove(sb)
	}
}

// Fork copies the session src's checkout and its agent's home into each
// of forks (sandbox.Runs): each fork's first run goes on from them.
func (s *Service) Fork(ctx context.Context, src sandbox.Sandbox, forks []sandbox.Sandbox) error {
	if s.work == nil || s.inMachine() {
		return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: its runs keep no checkout on this host", src.Name)
	}
	dir := s.work.Dir(src)
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err != nil || !fi.IsDir() {
		return fault.Errorf(fault.Conflict, "sandbox %s cannot be forked: its checkout of %s is gone", src.Name, src.Repo)
	}
	for _, f := range forks {
		if err := s.work.BranchFree(ctx, f); err != nil {
			return fault.Errorf(fault.Conflict, "%v", err)
		}
	}
	for i, f := range forks {
		if err := s.work.Copy(src, f); err != nil {
			for _, made := range forks[:i] {
				_ = s.work.Remove(made)
			}
			return fmt.Errorf("copy the work of %s into %s: %w", src.Name, f.Name, err)
		}
	}
	return nil
}

// writePrompt puts the task where the image reads it, readable by the
// sandbox's user only through the mount, and keeps it out of every commit.
func writePrompt(dir, task string) error {
	if err := os.WriteFile(filepath.Join(dir, promptFile), []byte(task), 0o644); err != nil {
		return fmt.Errorf("write the prompt file: %w", err)
	}
	return exclude(dir, "/"+promptFile) // once: a session's earlier run may have excluded it
}

// takesPromptFile says whether sb's runs read their task from the prompt
// file: berth's contract, and a kelos session, whose CLI berth runs; a
// kelos image's own entrypoint takes it as $1.
func takesPromptFile(sb sandbox.Sandbox) bool {
	return sb.Contract != sandbox.ContractKelos || sb.Session
}

// removePrompt deletes the task from the checkout: on every exit path
// (SPEC S13.2). A kelos run was given none, and the host deletes nothing
// it did not write.
func removePrompt(sb sandbox.Sandbox, dir string) {
	if dir != "" && takesPromptFile(sb) {
		_ = os.Remove(filepath.Join(dir, promptFile))
	}
}

// Forget removes what a run kept (its log and its verdict copy), once its
// sandbox's row is deleted.
func (s *Service) Forget(ctx context.Context, id sandbox.ID) {
	if s.cfg.LogDir == "" && s.cfg.Logs == nil {
		return
	}
	if err := s.logs().Remove(ctx, id); err != nil {
		s.log.WarnContext(ctx, "run log not removed", "sandbox", id, "err", err)
	}
	if s.cfg.LogDir == "" {
		return
	}
	if err := os.Remove(s.verdictPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.WarnContext(ctx, "run verdict not removed", "sandbox", id, "err", err)
	}
}

func (s *Service) saveRun(ctx context.Context, run Run) {
	if err := s.store.PutRun(ctx, run); err != nil {
		s.log.ErrorContext(ctx, "could not save a run", "sandbox", run.Sandbox, "err", err)
	}
}

// Of returns an agent sandbox's run; fault.NotFound when it has
// none.
func (s *Service) Of(ctx context.Context, sb sandbox.Sandbox) (Run, error) {
	run, err := s.store.GetRun(ctx, sb.ID)
	if err != nil {
		return Run{}, err
	}
	if err := s.addMetered(ctx, &run, sb.Session); err != nil {
		s.log.WarnContext(ctx, "could not read what the gateway metered of a run", "sandbox", sb.ID, "err", err)
	}
	s.withNames(ctx, &run)
	return run, nil
}

// withNames names the user who ended run.
func (s *Service) withNames(ctx context.Context, run *Run) {
	if run.EndedBy != "" {
		if u, err := s.users.User(ctx, run.EndedBy); err == nil {
			run.EndedByName = u.Name
		}
	}
}

// Log opens the log of the latest run of a sandbox the caller may see:
// read to its end it says io.EOF, and read again what was written since.
func (s *Service) Log(ctx context.Context, p account.Principal, ref string) (io.ReadCloser, sandbox.Sandbox, error) {
	return s.RunLog(ctx, p, ref, 0)
}

// RunLog is Log of the sandbox's run seq (a session's task; 0: the
// latest).
func (s *Service) RunLog(ctx context.Context, p account.Principal, ref string, seq int) (io.ReadCloser, sandbox.Sandbox, error) {
	sb, err := s.sandboxes.Get(ctx, p, ref)
	if err != nil {
		return nil, sandbox.Sandbox{}, err
	}
	if seq == 0 {
		seq = s.LatestSeq(ctx, sb.ID)
	}
	r, err := s.logs().Read(ctx, logOf(sb.ID, seq))
	if errors.Is(err, fault.NotFound) {
		if seq > 1 {
			return nil, sandbox.Sandbox{}, fault.Errorf(fault.NotFound, "sandbox %s has no log of a run %d", sb.Name, seq)
		}
		return nil, sandbox.Sandbox{}, fault.Errorf(fault.NotFound, "sandbox %s has no run log", sb.Name)
	}
	return r, sb, err
}

// LatestSeq is the number of a sandbox's latest run: 1 when it has none
// (yet). A session's next task is run LatestSeq+1.
func (s *Service) LatestSeq(ctx context.Context, id sandbox.ID) int {
	run, err := s.store.GetRun(ctx, id)
	if err != nil {
		return 1
	}
	return max(run.Seq, 1)
}

// logOf names the log of a sandbox's run seq: the sandbox's id for its
// first run, the id and the run's number for a session's later ones.
func logOf(id sandbox.ID, seq int) sandbox.ID {
	if seq <= 1 {
		return id
	}
	return sandbox.ID(fmt.Sprintf("%s.%d", id, seq))
}

// Runs lists the runs of a sandbox the caller may see, oldest first: a
// session's tasks, one run each.
func (s *Service) Runs(ctx context.Context, p account.Principal, ref string) ([]Run, sandbox.Sandbox, error) {
	sb, err := s.sandboxes.Get(ctx, p, ref)
	if err != nil {
		return nil, sandbox.Sandbox{}, err
	}
	runs, err := s.store.ListRuns(ctx, sb.ID)
	if err != nil {
		return nil, sandbox.Sandbox{}, err
	}
	for i := range runs {
		if err := s.addMetered(ctx, &runs[i], sb.Session); err != nil {
			s.log.WarnContext(ctx, "could not read what the gateway metered of a run", "sandbox", sb.ID, "err", err)
		}
		s.withNames(ctx, &runs[i])
	}
	return runs, sb, nil
}

// openRunFile opens a file the host keeps of the run of a sandbox the
// caller may see (its path by the sandbox's id); what names it when the
// sandbox has none.
func (s *Service) openRunFile(ctx context.Context, p account.Principal, ref string, path func(sandbox.ID) string, what string) (*os.File, sandbox.Sandbox, error) {
	sb, err := s.sandboxes.Get(ctx, p, ref)
	if err != nil {
		return nil, sandbox.Sandbox{}, err
	}
	f, err := os.Open(path(sb.ID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, sandbox.Sandbox{}, fault.Errorf(fault.NotFound, "sandbox %s has no %s", sb.Name, what)
	}
	return f, sb, err
}

// Unstarted records a run whose machine never started and removes its
// task and checkout.
func (s *Service) Unstarted(ctx context.Context, spec sandbox.Spec, reason string) {
	sb := spec.Sandbox
	if spec.Run != nil {
		removePrompt(sb, spec.Run.Work)
	}
	if run, err := s.store.GetRun(ctx, sb.ID); err == nil {
		run.State, run.Error, run.EndedAt, run.Ended = RunFailed, reason, s.now(), sandbox.StateFailed
		run.holdReview(reason)
		s.saveRun(ctx, run)
	}
	s.removeCheckout(ctx, sb)
}

// Ended closes the record of a run whose sandbox ended under it
// (terminated, expired, failed) by actor ("" for berth itself): no push,
// no exit code (its agent did not exit), and the reason says why.
func (s *Service) Ended(ctx context.Context, sb sandbox.Sandbox, to sandbox.State, actor, reason string) {
	run, err := s.store.GetRun(ctx, sb.ID)
	if err != nil || run.State != RunRunning {
		return
	}
	run.State, run.EndedAt, run.Ended, run.EndedBy = RunFailed, s.now(), to, actor
	run.Error = "the sandbox ended (" + string(to) + ") before the run did"
	if reason != "" {
		run.Error += ": " + reason
	}
	run.holdReview(run.Error)
	s.saveRun(ctx, run)
}

// Removed deletes the task and the checkout of a run whose sandbox ended,
// once its machine is gone: the task never outlives its sandbox, nor does
// its checkout.
func (s *Service) Removed(ctx context.Context, sb sandbox.Sandbox) {
	removePrompt(sb, s.work.Dir(sb))
	s.removeCheckout(ctx, sb)
}

func (s *Service) removeCheckout(ctx context.Context, sb sandbox.Sandbox) {
	if dir := s.work.Dir(sb); dir != "" {
		if err := os.RemoveAll(dir + ".plugins"); err != nil {
			s.log.WarnContext(ctx, "could not remove a kelos run's plugins", "sandbox", sb.ID, "err", err)
		}
	}
	if err := s.work.Remove(sb); err != nil {
		s.log.WarnContext(ctx, "could not remove a run's checkout", "sandbox", sb.ID, "err", err)
	}
}

// maxSummary bounds a run's summary.
const maxSummary = 8 << 10

// Summary is what the agent said last in its run's log (its final
// message, as the transcript reads it), at most maxSummary bytes; "" when
// it said nothing or the log is gone.
func (s *Service) Summary(ctx context.Context, sb sandbox.Sandbox) string {
	r, err := s.logs().Read(ctx, logOf(sb.ID, s.LatestSeq(ctx, sb.ID)))
	if err != nil {
		return ""
	}
	defer r.Close()
	last := ""
	_ = transcript.Read(r, sb.Runner, func(e transcript.Event) error {
		if e.Kind == transcript.KindText && strings.TrimSpace(e.Text) != "" {
			last = e.Text
		}
		return nil
	})
	last = strings.TrimSpace(last)
	if len(last) > maxSummary {
		cut := maxSummary
		for cut > 0 && !utf8.RuneStart(last[cut]) {
			cut--
		}
		last = last[:cut] + "…"
	}
	return last
}
