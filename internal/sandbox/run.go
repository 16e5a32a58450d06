package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner"
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
	Sandbox ID
	Runner  string
	Model   string // the model the run was started on
	State   RunState
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
	Ended       State
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
	// (SPEC S13.6), and Results those of them of the form "key: value".
	Outputs []string
	Results map[string]string
}

// Workspaces makes the host-side checkout an agent run works on (SPEC
// S13.1: the only mount, at /work) and takes its work back.
type Workspaces interface {
	// Prepare clones sb's repository (shallow, at its branch) into a
	// directory of its own that the agent's user owns (the user of the
	// image's contract: kelos.UID for a kelos image), and returns it.
	Prepare(ctx context.Context, sb Sandbox) (string, error)
	// Push pushes the checkout's HEAD to the sandbox's branch,
	// refs/heads/berth/<name>, and returns the branch and the commit.
	// Nothing to push (no commit since the clone) is not an error: the
	// commit is then "". The checkout is the agent's: no git is run in it.
	Push(ctx context.Context, sb Sandbox, dir string) (branch, commit string, err error)
	// PushBundle makes the one ref of bundle, a git bundle of an
	// in-machine run's commits on its clone (at most MaxBundle bytes,
	// untrusted), the sandbox's branch, and returns the branch and the
	// commit, which must be commit.
	PushBundle(ctx context.Context, sb Sandbox, bundle []byte, commit string) (branch, commitOut string, err error)
	// BranchFree refuses a run whose branch berth/<name> exists already:
	// what Prepare checks first, for a run that has no host checkout.
	BranchFree(ctx context.Context, sb Sandbox) error
	// Dir is where sb's checkout is (or would be).
	Dir(sb Sandbox) string
	// Remove deletes the checkout.
	Remove(sb Sandbox) error
}

// Follower is an optional driver capability: stream a machine's output
// until it exits.
type Follower interface {
	// Follow calls line for every line the machine writes, stdout true for
	// its standard output, until the machine exits or ctx is done.
	Follow(ctx context.Context, id ID, line func(stdout bool, b []byte)) error
}

// RunSpec is what a driver needs to run an agent (SPEC S13).
type RunSpec struct {
	// Contract is the interface the image implements; it decides where
	// the checkout is mounted, who runs, and what the image is given.
	// "" is berth's.
	Contract Contract
	// Work is the host directory mounted at /work (at /workspace/repo for
	// a kelos image), also the working directory: the only mount.
	Work string
	// Args fill the "$@" slot: the runner's ContainerArgs, or for a kelos
	// image the prompt alone, its $1.
	Args []string
	// Network is "allowlist" (the default: a network that reaches only the
	// gateway) or "open".
	Network string
	// InMachine says the machine does the whole run itself, on a driver
	// with InMachineRuns: Work is "", and berth-init (BERTH_RUN_REPORT=
	// gateway in the environment) clones the repository through the
	// gateway into /work, fetches the task, streams its output to the
	// gateway, and reports the agent's exit there with its work as a git
	// bundle (it pushes nothing).
	InMachine bool
}

// InMachineRuns is the capability of a driver that can neither mount a
// host directory nor follow a machine's output (Kubernetes, which the
// gateway reaches only through the API server, without pods/log): its
// agent runs run whole in the machine (RunSpec.InMachine), and the machine
// reports to the gateway.
type InMachineRuns interface {
	RunsInMachine()
}

// promptFile is where the host puts a run's task (SPEC S13.2).
const promptFile = ".berth-prompt.txt"

// MaxBundle bounds the work an in-machine run hands the gateway with its
// exit report, a git bundle: 64 MiB.
const MaxBundle = 64 << 20

// AgentPushRefused is why an agent run's key may not push (SPEC S13.1):
// the container never pushes; the host takes its work after a clean exit.
const AgentPushRefused = "the host pushes an agent's work after a clean exit: an agent run's key may fetch, never push"

// AgentConfig is how the deployment runs agents (SPEC S13).
type AgentConfig struct {
	// Images maps each runner to its image; a runner without one is
	// refused before any container starts.
	Images map[string]string
	// Runner is the runner an agent sandbox gets when it names none.
	Runner string
	// Model is the model a run starts on when nothing routes another.
	Model string
	// Network is "allowlist" (default) or "open".
	Network string
	// Logs keeps runs' logs; nil: files in LogDir.
	Logs RunLogs
	// LogDir keeps each run's log.
	LogDir string
	// Prices prices a run whose CLI reports no cost; nil: runner.ListPrices.
	Prices runner.Prices
}

// agentRun reports whether sb is an agent run: an agent sandbox with a
// runner, on a deployment that can run it.
func (s *Service) agentRun(sb Sandbox) bool {
	return sb.Purpose == PurposeAgent && sb.Runner != "" && s.work != nil
}

// chooseRunner fills in an agent sandbox's runner and image (SPEC S13:
// images per runner, fail-closed on an unmapped one). A kelos class brings
// its own image, built for the interface (S13.6): the runner names its
// agent type and reads its stream.
func (s *Service) chooseRunner(req string, class class.Class) (string, string, error) {
	// The creator's choice, else the class's, else the deployment's.
	name := cmp.Or(req, class.Runner, s.cfg.Agents.Runner)
	if name == "" {
		if class.Contract == ContractKelos {
			return "", "", invalid("runner", "class %s runs a kelos image, which needs a runner: it names the agent type (KELOS_AGENT_TYPE)", class.Name)
		}
		return "", "", nil // an agent sandbox without a runner: it waits for its end
	}
	if err := checkRunner(name); err != nil {
		return "", "", err
	}
	if class.Contract == ContractKelos {
		return name, class.Image, nil
	}
	image := s.cfg.Agents.Images[name]
	if image == "" {
		return "", "", fmt.Errorf("runner %s has no image on this deployment (BERTH_RUNNER_IMAGES): %w", name, ErrUnavailable)
	}
	return name, image, nil
}

// checkRunner refuses a name that is no runner berth runs.
func checkRunner(name string) error {
	r, err := runner.Get(name)
	if err != nil {
		return invalid("runner", "%q is not a runner (one of %v)", name, runner.Names())
	}
	if _, direct := r.(runner.VendorDirect); direct {
		return invalid("runner", "%s talks to its vendor itself, not through the gateway, so berth does not run it", name)
	}
	return nil
}

// runEnv is what an agent run's container gets on top of the sandbox's
// environment: the runner, its config files, its credentials (by name, the
// sandbox's key as their value: every model call goes through the gateway),
// its non-secret settings, and what its contract adds. It returns the
// model the run starts on (the one chosen at create, in BERTH_MODEL) and
// the "$@" slot.
// The configs list every model the key may reach, each in the API its
// provider speaks.
func (s *Service) runEnv(ctx context.Context, sb Sandbox, env map[string]string) (model string, args []string, err error) {
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
	if sb.Contract == ContractKelos {
		args, err := s.kelosEnv(sb, env)
		return model, args, err
	}
	opts := runner.Options{Model: model}
	if args, err = r.ContainerArgs(opts); err != nil {
		return "", nil, err
	}
	files, err := r.Files(g, opts)
	if err != nil {
		return "", nil, err
	}
	type file struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	fs := make([]file, len(files))
	for i, f := range files {
		fs[i] = file{Path: f.Path, Content: string(f.Content)}
		// Inference renders Pi's files with every model the key may reach
		// and their prices (Pi's own cost comes from them): those win.
		if v := env[piRendered[f.Path]]; v != "" && sb.Runner == "pi" {
			fs[i].Content = v
		}
	}
	b, err := json.Marshal(fs)
	if err != nil {
		return "", nil, err
	}
	env["BERTH_RUNNER_FILES"] = string(b)
	env["BERTH_PROMPT_FILE"] = "/work/" + promptFile
	return model, args, nil
}

// prices are the deployment's model prices: the inference catalog's over
// the vendors' list prices.
func (s *Service) prices() runner.Prices {
	if s.cfg.Agents.Prices != nil {
		return s.cfg.Agents.Prices
	}
	return runner.ListPrices()
}

// piRendered names the variables inference renders Pi's files into.
var piRendered = map[string]string{".pi/agent/models.json": "BERTH_PI_CONFIG", ".pi/agent/settings.json": "BERTH_PI_SETTINGS"}

// prepareRun makes the checkout, puts the task in it, and turns spec into
// an agent run's. On error nothing is left behind.
func (s *Service) prepareRun(ctx context.Context, spec *Spec) error {
	sb := spec.Sandbox
	model, args, err := s.runEnv(ctx, sb, spec.Env)
	if err != nil {
		return fmt.Errorf("runner %s: %w", sb.Runner, err)
	}
	network := s.cfg.Agents.Network
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
		if sb.Role == RoleReviewer {
			spec.Env[runPushVar] = "no" // a reviewer's work is its verdict
		}
		// The machine asks for its task: it is not in the machine's spec
		// (no environment holds it), which whoever may read the cluster's
		// objects can read.
		spec.Run = &RunSpec{Contract: sb.Contract, Args: args, Network: network, InMachine: true}
	} else {
		dir, err := s.work.Prepare(ctx, sb)
		if err != nil {
			return fmt.Errorf("check out %s: %w", sb.Repo, err)
		}
		if sb.Contract != ContractKelos { // a kelos image takes its prompt as $1
			if err := writePrompt(dir, sb.Task); err != nil {
				_ = s.work.Remove(sb)
				return err
			}
		}
		spec.Run = &RunSpec{Contract: sb.Contract, Work: dir, Args: args, Network: network}
	}
	now := s.now()
	run := Run{Sandbox: sb.ID, Runner: sb.Runner, Model: model, State: RunRunning, StartedAt: now}
	run.Telemetry.Model = run.Model
	if sb.Role == RoleReviewer {
		run.Review = review.Pending()
	}
	return s.store.PutRun(ctx, run)
}

// writePrompt puts the task where the image reads it, readable by the
// sandbox's user only through the mount, and keeps it out of every commit.
func writePrompt(dir, task string) error {
	if err := os.WriteFile(filepath.Join(dir, promptFile), []byte(task), 0o644); err != nil {
		return fmt.Errorf("write the prompt file: %w", err)
	}
	exclude := filepath.Join(dir, ".git", "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(exclude, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("\n/" + promptFile + "\n")
	return err
}

// removePrompt deletes the task from the checkout: on every exit path
// (SPEC S13.2). A kelos run was given none, and the host deletes nothing
// it did not write.
func removePrompt(sb Sandbox, dir string) {
	if dir != "" && sb.Contract != ContractKelos {
		_ = os.Remove(filepath.Join(dir, promptFile))
	}
}

// forgetRunFiles removes what a run kept (its log and its verdict copy),
// once its sandbox's row is deleted.
func (s *Service) forgetRunFiles(ctx context.Context, id ID) {
	if s.cfg.Agents.LogDir == "" && s.cfg.Agents.Logs == nil {
		return
	}
	if err := s.logs().Remove(ctx, id); err != nil {
		s.log.WarnContext(ctx, "run log not removed", "sandbox", id, "err", err)
	}
	if s.cfg.Agents.LogDir == "" {
		return
	}
	if err := os.Remove(s.verdictPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.WarnContext(ctx, "run verdict not removed", "sandbox", id, "err", err)
	}
}

// follow reads an agent run's output until its machine exits, then
// finishes the run. It belongs to Run's goroutines.
func (s *Service) follow(ctx context.Context, sb Sandbox, work string) {
	f, ok := s.driver.(Follower)
	if !ok {
		return
	}
	s.mu.Lock()
	if s.following[sb.ID] > 0 {
		s.mu.Unlock()
		return
	}
	s.following[sb.ID] = 1
	s.mu.Unlock()
	release := s.hold(ctx, sb.ID)
	defer func() {
		release()
		s.mu.Lock()
		delete(s.following, sb.ID)
		s.mu.Unlock()
	}()
	run, err := s.store.GetRun(ctx, sb.ID)
	if err != nil {
		s.log.ErrorContext(ctx, "agent run without its record", "sandbox", sb.ID, "err", err)
		return
	}
	r, err := runner.Get(run.Runner)
	if err != nil {
		return
	}
	rr := s.readRun(ctx, sb, run, r)
	err = f.Follow(ctx, sb.ID, func(stdout bool, b []byte) { rr.line(ctx, stdout, b) })
	rr.close()
	if ctx.Err() != nil {
		return // the gateway is stopping; the start-up sweep follows again
	}
	if err != nil {
		s.log.WarnContext(ctx, "following a run ended with an error", "sandbox", sb.ID, "err", err)
	}
	run, setup := rr.result()
	s.finishRun(ctx, run, work, setup)
}

// maxRunLog caps what a run's log keeps: a machine that prints without end
// (or streams it, in-machine) fills neither the disk nor the database.
const maxRunLog = 256 << 20

// runReader reads one run's output, from its first line: every line to
// the run log, a kelos image's markers to its capture, the agent's stream
// to the runner's ParseLine; the telemetry saved every couple of seconds.
// A run's output read again (after a restart, or streamed again by its
// machine) is read from its start: the log is rewritten.
type runReader struct {
	s       *Service
	sb      Sandbox
	run     Run
	r       runner.Runner
	tel     runner.Telemetry
	lines   int
	ignored int
	saved   time.Time
	logw    io.WriteCloser
	logged  int64          // bytes written to the log
	limit   int64          // and the most it keeps (maxRunLog)
	capture *kelos.Capture // what a kelos image says beside its agent's stream
}

func (s *Service) readRun(ctx context.Context, sb Sandbox, run Run, r runner.Runner) *runReader {
	logw, err := s.logs().Write(ctx, sb.ID)
	if err != nil {
		s.log.ErrorContext(ctx, "run log", "sandbox", sb.ID, "err", err)
	}
	rr := &runReader{s: s, sb: sb, run: run, r: r, tel: runner.Telemetry{Model: run.Model}, saved: s.now(), logw: logw, limit: maxRunLog}
	if sb.Contract == ContractKelos {
		rr.capture = &kelos.Capture{}
	}
	return rr
}

// line takes one line of the machine's output, stdout or stderr.
func (rr *runReader) line(ctx context.Context, stdout bool, b []byte) {
	if rr.logw != nil && rr.logged <= rr.limit {
		prefix := ""
		if !stdout {
			prefix = "stderr: "
		}
		if rr.logged += int64(len(prefix) + len(b) + 1); rr.logged > rr.limit {
			// The telemetry still reads every line: a run's totals come last.
			_, _ = fmt.Fprintf(rr.logw, "berth: the run log stops here, at %d bytes; the run's telemetry still counts what follows\n", rr.limit)
		} else {
			_, _ = fmt.Fprintf(rr.logw, "%s%s\n", prefix, b)
		}
	}
	if rr.capture != nil && rr.capture.Line(stdout, b) {
		return
	}
	if !stdout {
		return
	}
	rr.lines++
	if rr.r.ParseLine(&rr.tel, b).Ignored() {
		rr.ignored++
		rr.s.log.DebugContext(ctx, "run output line not understood", "sandbox", rr.sb.ID, "runner", rr.run.Runner)
	}
	if now := rr.s.now(); now.Sub(rr.saved) > 2*time.Second {
		rr.saved = now
		rr.save(ctx)
	}
}

// save writes the telemetry read so far to the run's record, and nothing
// else of it: the run may have been ended meanwhile (its sandbox
// terminated), and that record stands.
func (rr *runReader) save(ctx context.Context) {
	rr.run.Telemetry, rr.run.Lines, rr.run.Ignored = rr.tel, rr.lines, rr.ignored
	if err := rr.s.store.PutRunTelemetry(ctx, rr.run); err != nil {
		rr.s.log.WarnContext(ctx, "could not save a run's telemetry", "sandbox", rr.sb.ID, "err", err)
	}
}

func (rr *runReader) close() {
	if rr.logw != nil {
		if err := rr.logw.Close(); err != nil {
			rr.s.log.Warn("run log not written whole", "sandbox", rr.sb.ID, "err", err)
		}
	}
}

// result is the run with what its output said, and how far a kelos
// image's setup command got.
func (rr *runReader) result() (Run, kelos.Setup) {
	run, tel := rr.run, rr.tel
	setup := kelos.SetupNone
	if rr.capture != nil {
		run.Outputs, run.Results, setup = rr.capture.Outputs(), rr.capture.Results(), rr.capture.Setup()
		// Totals from the markers count where the stream said nothing.
		t := kelos.TotalsOf(run.Results)
		if t.Tokens {
			tel.FillUsage(runner.Usage{Input: t.InputTokens, Output: t.OutputTokens})
		}
		if t.Cost {
			tel.FillCost(t.CostUSD)
		}
	}
	run.Telemetry, run.Lines, run.Ignored = tel, rr.lines, rr.ignored
	return run, setup
}

// finishRun records how a run ended, pushes its work after a clean exit,
// and ends the sandbox: terminated after a clean run, failed otherwise.
// setup is how far a kelos image's setup command got: when it failed, the
// run failed before its agent ran, and the reason says so.
func (s *Service) finishRun(ctx context.Context, run Run, work string, setup kelos.Setup) {
	sb, err := s.store.GetSandbox(ctx, run.Sandbox)
	if err != nil {
		return
	}
	if work == "" {
		work = s.work.Dir(sb) // followed again after a restart
	}
	removePrompt(sb, work)
	run.Telemetry.Settle(s.prices())
	run.EndedAt = s.now()
	if sb.State != StateRunning && sb.State != StateStarting {
		// Terminated or expired meanwhile: nothing to push, and no exit
		// of its own.
		run.State, run.Error, run.Ended = RunFailed, "the sandbox ended ("+string(sb.State)+") before the run did", sb.State
		if saved, err := s.store.GetRun(ctx, sb.ID); err == nil && saved.State != RunRunning {
			// What end said, with the telemetry read since.
			run.Error, run.EndedAt, run.Ended, run.EndedBy = saved.Error, saved.EndedAt, saved.Ended, saved.EndedBy
		}
		run.holdReview(run.Error)
		s.removeCheckout(ctx, sb)
		s.saveRun(ctx, run)
		return
	}
	m, err := s.driver.Inspect(ctx, sb.ID)
	var exited time.Time
	switch {
	case err != nil:
		run.State, run.Error, run.Ended = RunFailed, "its machine is gone", StateFailed
	case m.Status == MachineRunning:
		return // not over yet: the next sweep follows again
	default:
		run.Exited, run.ExitCode = true, m.ExitCode
		// Followed again after a restart, it may have exited long ago:
		// the run ended, and its sandbox's clock stops, when it did.
		exited = s.stoppedAt(sb, m.FinishedAt)
		run.EndedAt = exited
	}
	s.concludeRun(ctx, sb, run, setup, s.hostPush(work), func(dest string) review.Result { return review.Collect(work, dest) }, exited)
}

// pushFunc takes a clean run's work to berth/<name> and says where it
// went: the host pushes its checkout, or the gateway lands the bundle an
// in-machine run sent. commit is "" when there was nothing.
type pushFunc func(ctx context.Context, sb Sandbox) (branch, commit string, err error)

// hostPush pushes the host's checkout in work.
func (s *Service) hostPush(work string) pushFunc {
	return s.audited(func(ctx context.Context, sb Sandbox) (string, string, error) {
		return s.work.Push(ctx, sb, work)
	})
}

// errEnded says a run's sandbox ended (terminated, expired) before its
// work was taken: the work is discarded, and the end recorded the run.
var errEnded = errors.New("the sandbox ended before its run's work was taken")

// audited is push, audited like any push, and only while the run's
// sandbox still runs: one terminated meanwhile leaves no branch.
func (s *Service) audited(push pushFunc) pushFunc {
	return func(ctx context.Context, sb Sandbox) (string, string, error) {
		if cur, err := s.store.GetSandbox(ctx, sb.ID); err != nil || (cur.State != StateRunning && cur.State != StateStarting) {
			return "", "", errEnded
		}
		branch, commit, err := push(ctx, sb)
		if err != nil {
			s.cfg.Repositories.Refused(ctx, sb, map[string]string{forge.AgentBranch(sb.Name): err.Error()})
			return "", "", err
		}
		if commit != "" {
			s.cfg.Repositories.Pushed(ctx, sb, []forge.RefUpdate{{Old: strings.Repeat("0", len(commit)), New: commit, Ref: "refs/heads/" + branch}})
		}
		return branch, commit, nil
	}
}

// concludeRun decides how a run whose agent exited (run.ExitCode, or
// run.State already failed) ended, takes its work with push after a clean
// run, records it, and ends the sandbox: terminated after a clean run,
// failed otherwise. exited is when its machine stopped, as its runtime
// says (zero: it has not, or it is not known): the sandbox's running time
// ends there.
func (s *Service) concludeRun(ctx context.Context, sb Sandbox, run Run, setup kelos.Setup, push pushFunc, verdict verdictFunc, exited time.Time) {
	if run.State != RunFailed {
		switch {
		case setup == kelos.SetupError:
			run.State, run.Error = RunFailed, "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run"
			if run.ExitCode != 0 {
				run.Error += fmt.Sprintf(" (exit %d)", run.ExitCode)
			}
		case setup == kelos.SetupStarted && run.ExitCode != 0:
			run.State, run.Error = RunFailed, fmt.Sprintf("the setup command (KELOS_SETUP_COMMAND) did not finish (exit %d), so the agent did not run", run.ExitCode)
		case run.ExitCode != 0:
			run.State, run.Error = RunFailed, fmt.Sprintf("the agent exited %d", run.ExitCode)
			if run.Telemetry.Error != "" {
				run.Error += ": " + run.Telemetry.Error
			}
		case run.Telemetry.Error != "":
			// Recognised even when the CLI exits 0 (pi does).
			run.State, run.Error = RunFailed, "the agent reported an error: "+run.Telemetry.Error
		case sb.Role == RoleReviewer:
			run.State = RunSucceeded // a reviewer pushes nothing: its verdict is its work
		default:
			branch, commit, err := push(ctx, sb)
			switch {
			case errors.Is(err, errEnded):
				// Ended meanwhile: its end recorded the run and removed
				// what it had.
				return
			case err != nil:
				run.State, run.Error = RunFailed, "push: "+err.Error()
			default:
				run.State, run.Branch, run.Commit = RunSucceeded, branch, commit
			}
		}
	}
	if sb.Role == RoleReviewer {
		s.digestVerdict(ctx, &run, verdict)
	}
	// Gone before the sandbox says it ended: nothing of the run outlives it.
	s.removeCheckout(ctx, sb)
	s.saveRun(ctx, run)
	to, reason := StateTerminated, "its task finished"
	if run.State == RunFailed {
		to, reason = StateFailed, run.Error
	}
	if _, err := retryMoved(func() (Sandbox, error) {
		cur, err := s.store.GetSandbox(ctx, sb.ID)
		if err != nil {
			return Sandbox{}, err
		}
		if !CanMove(cur.State, to) {
			return cur, nil
		}
		return s.endAt(ctx, "", cur, to, reason, exited)
	}); err != nil && !errors.Is(err, ErrConflict) {
		s.log.ErrorContext(ctx, "could not end a finished run's sandbox", "sandbox", sb.ID, "err", err)
	}
}

func (s *Service) saveRun(ctx context.Context, run Run) {
	if err := s.store.PutRun(ctx, run); err != nil {
		s.log.ErrorContext(ctx, "could not save a run", "sandbox", run.Sandbox, "err", err)
	}
}

// RunOf returns an agent sandbox's run; ErrNotFound when it has none.
func (s *Service) RunOf(ctx context.Context, sb Sandbox) (Run, error) {
	run, err := s.store.GetRun(ctx, sb.ID)
	if err != nil {
		return Run{}, err
	}
	if err := s.addMetered(ctx, &run); err != nil {
		s.log.WarnContext(ctx, "could not read what the gateway metered of a run", "sandbox", sb.ID, "err", err)
	}
	if run.EndedBy != "" {
		if u, err := s.accounts.User(ctx, run.EndedBy); err == nil {
			run.EndedByName = u.Name
		}
	}
	return run, nil
}

// RunLog opens the run log of a sandbox the caller may see: read to its
// end it says io.EOF, and read again what was written since.
func (s *Service) RunLog(ctx context.Context, p account.Principal, ref string) (io.ReadCloser, Sandbox, error) {
	sb, err := s.Get(ctx, p, ref)
	if err != nil {
		return nil, Sandbox{}, err
	}
	r, err := s.logs().Read(ctx, sb.ID)
	if errors.Is(err, ErrNotFound) {
		return nil, Sandbox{}, fmt.Errorf("sandbox %s has no run log: %w", sb.Name, ErrNotFound)
	}
	return r, sb, err
}

// openRunFile opens a file the host keeps of the run of a sandbox the
// caller may see (its path by the sandbox's id); what names it when the
// sandbox has none.
func (s *Service) openRunFile(ctx context.Context, p account.Principal, ref string, path func(ID) string, what string) (*os.File, Sandbox, error) {
	sb, err := s.Get(ctx, p, ref)
	if err != nil {
		return nil, Sandbox{}, err
	}
	f, err := os.Open(path(sb.ID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, Sandbox{}, fmt.Errorf("sandbox %s has no %s: %w", sb.Name, what, ErrNotFound)
	}
	return f, sb, err
}

// finishUnstarted records a run whose machine never started and removes
// its checkout.
func (s *Service) finishUnstarted(ctx context.Context, sb Sandbox, reason string) {
	if run, err := s.store.GetRun(ctx, sb.ID); err == nil {
		run.State, run.Error, run.EndedAt, run.Ended = RunFailed, reason, s.now(), StateFailed
		run.holdReview(reason)
		s.saveRun(ctx, run)
	}
	s.removeCheckout(ctx, sb)
}

// runEnded closes the record of a run whose sandbox ended under it
// (terminated, expired, failed) by actor ("" for berth itself): no push,
// no exit code (its agent did not exit), and the reason says why.
func (s *Service) runEnded(ctx context.Context, sb Sandbox, to State, actor, reason string) {
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

func (s *Service) removeCheckout(ctx context.Context, sb Sandbox) {
	if err := s.work.Remove(sb); err != nil {
		s.log.WarnContext(ctx, "could not remove a run's checkout", "sandbox", sb.ID, "err", err)
	}
}
