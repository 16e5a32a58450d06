package entrypoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner"
)

// The in-machine run (BERTH_RUN_REPORT=gateway; see the package comment).
// On Kubernetes there is no host directory to clone into, and the gateway
// cannot read a pod's log or wait on its exit code: the machine clones and
// runs itself, and tells the gateway everything over HTTP with the
// sandbox's own key (runreport.go). It never pushes: the key may only
// fetch. After a clean exit the agent's work goes to the gateway as a git
// bundle with the exit report, and the gateway makes it berth/<name> once
// it has concluded the run clean.

// runReportGateway is the one value BERTH_RUN_REPORT takes.
const runReportGateway = "gateway"

// contractKelos is the one value BERTH_RUN_CONTRACT takes: the image is a
// kelos image (SPEC S13.6), which berth-init wraps without changing it.
// Its own entrypoint (kelos.Entrypoint) is the agent, run with the task as
// its one argument, $1, in its checkout at kelos.WorkDir, with nothing on
// its stdin and the environment the pod gives it; no prompt file and no
// runner files are written, and the runner's binary is not looked for
// (the entrypoint starts it). The pod runs berth-init from a directory of
// its own, beside git-credential-berth, as the interface's uid: the clone,
// the output, the report and the bundle are as for berth's contract.
const contractKelos = "kelos"

// stopGrace is how long the agent's output may stay open after it exited
// (a process it left behind holds it), and how long the agent has to end
// after a forwarded SIGTERM before it is killed: the pod's own grace period
// (30 s by default) must leave time to report the end.
const stopGrace = 10 * time.Second

// loadInMachine checks BERTH_RUN_REPORT and, when it asks for the
// in-machine run, what that run needs.
func loadInMachine(c config) []error {
	switch {
	case c.contract != "" && c.contract != contractKelos:
		return []error{fmt.Errorf("BERTH_RUN_CONTRACT is %q, want kelos (a kelos image's own entrypoint, the task its $1) or unset (berth's contract)", c.contract)}
	case c.contract != "" && c.runReport != runReportGateway:
		return []error{errors.New("BERTH_RUN_CONTRACT=kelos is for an in-machine run (BERTH_RUN_REPORT=gateway): elsewhere the host runs a kelos image's entrypoint itself")}
	}
	switch c.runReport {
	case "":
		return nil
	case runReportGateway:
	default:
		return []error{fmt.Errorf("BERTH_RUN_REPORT is %q, want gateway (the machine runs the task and reports to the gateway) or unset (the host does)", c.runReport)}
	}
	var errs []error
	if c.purpose != purposeAgent || c.runner == "" {
		errs = append(errs, errors.New("BERTH_RUN_REPORT=gateway is for an agent run: set BERTH_SANDBOX_PURPOSE=agent and BERTH_RUNNER, or unset BERTH_RUN_REPORT"))
	}
	if c.imageCheck {
		errs = append(errs, errors.New("BERTH_IMAGE_CHECK=1 checks a host-prepared run: unset BERTH_RUN_REPORT for it"))
	}
	for _, v := range []struct {
		name string
		set  bool
	}{
		{"BERTH_REPO", c.repo != ""}, {"BERTH_BASE_URL", c.baseURL != ""},
		{"BERTH_API_KEY", !c.apiKey.IsZero()}, {"BERTH_SANDBOX_NAME", c.name != ""},
	} {
		if !v.set {
			errs = append(errs, fmt.Errorf("%s is not set (required with BERTH_RUN_REPORT=gateway)", v.name))
		}
	}
	if _, ok := credentialURL(c.repo); c.repo != "" && !ok {
		// git-credential-berth answers for http(s) addresses only.
		errs = append(errs, fmt.Errorf("BERTH_REPO is %q, want the repository's http(s) address at the gateway", redactURL(c.repo)))
	}
	if u, err := url.Parse(c.baseURL); c.baseURL != "" && (err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https")) {
		errs = append(errs, fmt.Errorf("BERTH_BASE_URL is %q, want the gateway's http(s) address", c.baseURL))
	}
	return errs
}

// inMachineRun is the in-machine run. Whatever happens once the
// configuration is accepted, the gateway hears of the end: nobody else
// would tell it.
func (r *starter) inMachineRun(args []string) int {
	ctx := context.Background()
	if err := undumpable(); err != nil {
		r.logf("keep the agent out of berth-init's memory (PR_SET_DUMPABLE): %v", err)
	}
	gw := newRunGateway(r.cfg, r.env, r.retryDelay, r.logf)
	rep, code := r.runInMachine(ctx, gw, args)
	if err := gw.reportExit(ctx, rep); err != nil {
		r.logf("report the run's end to the gateway: %v", err)
		return exitFailure
	}
	return code
}

// runInMachine does the run's steps and returns what to report and the
// code berth-init exits with.
func (r *starter) runInMachine(ctx context.Context, gw *runGateway, args []string) (api.RunExit, int) {
	path, code, err := r.agentPath(args)
	if err != nil {
		return r.failed(code, err)
	}
	ca, err := r.writeCAFiles()
	if err != nil {
		return r.failed(exitFailure, fmt.Errorf("trust the deployment's CA: %w", err))
	}
	defer func() {
		if err := ca.remove(); err != nil {
			r.logf("remove the CA's files: %v", err)
		}
	}()
	if err := r.configureGit(); err != nil {
		return r.failed(exitFailure, fmt.Errorf("configure git: %w", err))
	}
	// berth-init's own git (the clone, the bundle) keeps the environment's
	// trust; the agent is handed the CA's.
	envv := gitConfigEnv(r.env.Environ(), r.gitSettings())
	base, err := r.cloneWork(envv)
	if err != nil {
		return r.failed(exitFailure, fmt.Errorf("check out %s: %w", redactURL(r.cfg.repo), err))
	}
	task, err := gw.task(ctx)
	if err != nil {
		return r.failed(exitFailure, fmt.Errorf("fetch the task: %w", err))
	}
	if len(bytes.TrimSpace(task)) == 0 {
		// As openPrompt refuses an empty prompt file (SPEC S13.2).
		return r.failed(exitUsage, errors.New("the gateway's task is empty: refusing to start the agent without a task"))
	}
	var agent child
	if r.cfg.contract == contractKelos {
		if err := kelos.CheckPrompt(string(task)); err != nil {
			return r.failed(exitUsage, fmt.Errorf("the gateway's task cannot be a kelos image's $1: %w", err))
		}
		// The image's own terms: its environment as the pod gives it,
		// the task its one argument, nothing on stdin. Only git is told
		// that the checkout is safe: berth-init cloned it into a
		// directory the pod's volume owns (root, on Kubernetes), which
		// git refuses to a uid other than its owner's. The deployment's
		// CA, when there is one, is trusted as in berth's contract.
		kenv := ca.env(gitConfigEnv(r.env.Environ(), [][2]string{{"safe.directory", r.cfg.work}}))
		if kenv, err = r.kelosPlugins(kenv); err != nil {
			return r.failed(exitFailure, fmt.Errorf("kelos plugins: %w", err))
		}
		agent = child{path: path, argv: []string{path, string(task)}, env: kenv,
			how: fmt.Sprintf("the task (%d bytes) its $1", len(task))}
	} else {
		if err := r.writePrompt(task); err != nil {
			return r.failed(exitFailure, fmt.Errorf("write the prompt file: %w", err))
		}
		if err := r.writeRunnerFiles(); err != nil {
			return r.failed(exitFailure, fmt.Errorf("write the runner's config files: %w", err))
		}
		rn, _ := runner.Get(r.cfg.runner) // agentPath found it
		agent = child{path: path, argv: append([]string{rn.Binary()}, args...), env: ca.env(envv), stdin: r.cfg.promptFile,
			how: fmt.Sprintf("the task (%d bytes) on stdin", len(task))}
	}
	code, err = r.runChild(ctx, gw, agent)
	if agent.stdin != "" {
		// The task is not part of the work, and the checkout may outlive
		// the run (a kept volume).
		if rmErr := os.Remove(agent.stdin); rmErr != nil {
			r.logf("remove the prompt file: %v", rmErr)
		}
	}
	if err != nil {
		return r.failed(code, fmt.Errorf("run %s: %w", path, err))
	}
	rep := r.takeVerdict()
	switch {
	case code != 0:
		r.logf("not handing over the work: the agent did not exit 0")
		rep.ExitCode = code
		return rep, code
	case r.cfg.noPush:
		r.logf("not handing over the work: this run's work is its verdict (BERTH_RUN_PUSH=no)")
		return rep, 0
	}
	bundle, commit, err := r.bundleWork(envv, base)
	if err != nil {
		r.logf("hand over the work: %v", err)
		rep.Error = err.Error()
		return rep, exitFailure
	}
	rep.Commit, rep.Bundle = commit, bundle
	return rep, 0
}

// agentPath finds what the run starts before anything is done: the
// runner's binary on PATH, or a kelos image's entrypoint, which takes no
// arguments but the task. A failure comes with the code to exit with.
func (r *starter) agentPath(args []string) (string, int, error) {
	if r.cfg.contract == contractKelos {
		if len(args) > 0 {
			return "", exitUsage, fmt.Errorf("a kelos image's run takes no arguments (it was given %d): the task is its entrypoint's one argument", len(args))
		}
		path, err := lookPath(r.kelosEntrypoint, "")
		if err != nil {
			return "", exitNotFound, fmt.Errorf("the kelos image's entrypoint: %w", err)
		}
		return path, 0, nil
	}
	rn, err := runner.Get(r.cfg.runner)
	if err != nil { // loadConfig refused it already
		return "", exitUsage, err
	}
	path, err := lookPath(rn.Binary(), r.env.Getenv("PATH"))
	if err != nil {
		return "", exitNotFound, fmt.Errorf("runner %s: %w", rn.Name(), err)
	}
	return path, 0, nil
}

// takeVerdict reads the verdict a reviewer left in the checkout, with the
// same care the host takes on podman (no link followed, a regular file of
// one name, at most 64 KiB): an author's run has none, and the gateway
// looks at it only for a reviewer's.
func (r *starter) takeVerdict() api.RunExit {
	b, rel, err := review.Fetch(r.cfg.work)
	if err != nil {
		return api.RunExit{VerdictFile: rel, VerdictError: err.Error()}
	}
	r.logf("found the review verdict %s (%d bytes)", rel, len(b))
	return api.RunExit{Verdict: b, VerdictFile: rel}
}

// failed logs why the run cannot go on and makes it the run's report.
func (r *starter) failed(code int, err error) (api.RunExit, int) {
	r.logf("%v", err)
	return api.RunExit{ExitCode: code, Error: err.Error()}, code
}

// cloneWork clones BERTH_REPO, shallow, at BERTH_BRANCH, into the work
// directory (an empty directory the pod mounts) and returns the commit it
// checked out, against which the agent's work is told apart.
func (r *starter) cloneWork(envv []string) (string, error) {
	if err := os.MkdirAll(r.cfg.work, 0o755); err != nil {
		return "", err
	}
	args := []string{"clone", "--depth", "1"}
	if r.cfg.branch != "" {
		args = append(args, "--branch", r.cfg.branch)
	}
	args = append(args, "--", r.cfg.repo, r.cfg.work)
	r.logf("cloning %s into %s", redactURL(r.cfg.repo), r.cfg.work)
	if _, err := r.git(r.cfg.home, envv, args...); err != nil {
		return "", err
	}
	return r.git(r.cfg.work, envv, "rev-parse", "HEAD")
}

// writePrompt puts the task in the prompt file, the agent's stdin, and
// keeps git from ever committing it: the agent commits what it finds in
// the checkout, and the task is not part of its work.
func (r *starter) writePrompt(task []byte) error {
	if err := writeFile(r.cfg.promptFile, task, 0o644); err != nil {
		return err
	}
	rel, err := filepath.Rel(r.cfg.work, r.cfg.promptFile)
	if err != nil || !filepath.IsLocal(rel) {
		return nil // outside the checkout: nothing to keep out of it
	}
	exclude := filepath.Join(r.cfg.work, ".git", "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return err
	}
	return appendLineOnce(exclude, "/"+ignorePattern(filepath.ToSlash(rel)))
}

// ignorePattern escapes what a gitignore pattern would take as a wildcard
// in a path.
func ignorePattern(path string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(path)
}

// bundleWork makes the agent's work, when HEAD moved from the cloned
// commit base, a git bundle of the commits since base with HEAD its one
// ref, and returns it and HEAD: nothing when there was no commit. The
// gateway verifies it and makes it berth/<name> after a clean run; the
// machine holds no right to push.
func (r *starter) bundleWork(envv []string, base string) ([]byte, string, error) {
	head, err := r.git(r.cfg.work, envv, "rev-parse", "HEAD")
	if err != nil {
		return nil, "", err
	}
	if head == base {
		r.logf("HEAD is still at the cloned %s: no work to hand over", base)
		return nil, "", nil
	}
	dir, err := os.MkdirTemp("", "berth-work-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "work.bundle")
	if _, err := r.git(r.cfg.work, envv, "bundle", "create", "--quiet", file, "HEAD", "^"+base); err != nil {
		return nil, "", err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, api.MaxBundle+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > api.MaxBundle {
		return nil, "", fmt.Errorf("the agent's work (its commits since %.12s) is a bundle of more than %d MiB, the most an in-machine run may hand the gateway", base, api.MaxBundle>>20)
	}
	r.logf("handing the gateway berth/%s at %s: a bundle of %d bytes", r.cfg.name, head, len(b))
	return b, head, nil
}

// git runs git in dir with envv (the agent's git settings) and returns its
// output, trimmed. Nobody could answer a prompt: git fails instead. Its
// stderr goes to berth-init's, and its last lines into the error, which
// the gateway hears of: it sees no log.
func (r *starter) git(dir string, envv []string, args ...string) (string, error) {
	cmd := r.command("git", args...)
	cmd.Dir = dir
	cmd.Env = slices.Concat(envv, []string{"GIT_TERMINAL_PROMPT=0"})
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(r.env.Stderr, &errb)
	if err := r.env.Run(cmd); err != nil {
		msg := fmt.Sprintf("git %s: %v", args[0], err)
		if tail := lastLines(errb.String(), 4); tail != "" {
			msg += ": " + tail
		}
		return "", errors.New(msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// lastLines is the last n non-blank lines of s, joined by "; ", each cut
// to a length a status line can show.
func lastLines(s string, n int) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 300 {
				line = line[:300] + "…"
			}
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "; ")
}

// child is the agent's process in an in-machine run.
type child struct {
	path string
	argv []string
	env  []string
	// stdin is the prompt file the agent reads; "" gives it none (an
	// empty stdin, as a detached container's).
	stdin string
	how   string // how the task reaches it, for the log
}

// runChild runs the agent as berth-init's child (not exec: the push and
// the report come after it) in the work directory, and streams its output
// to the gateway as it comes. It returns the agent's exit code, as a shell
// reports it; an error when the agent could not be started.
func (r *starter) runChild(ctx context.Context, gw *runGateway, agent child) (int, error) {
	cmd, stop := agentCommand(agent.path, agent.argv)
	cmd.Env, cmd.Dir = agent.env, r.cfg.work
	if agent.stdin != "" {
		stdin, err := os.Open(agent.stdin)
		if err != nil {
			return exitFailure, err
		}
		defer stdin.Close()
		cmd.Stdin = stdin
	}
	sp, err := newSpool()
	if err != nil {
		r.logf("keeping the agent's output in memory (at most %d MiB) for a resend: %v", spoolMemoryLimit>>20, err)
	}
	defer sp.close()
	r.logf("in-machine run of sandbox %s: running %s with %d arguments, %s", r.cfg.id, agent.path, len(agent.argv)-1, agent.how)

	out := gw.openOutput(ctx, sp)
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	cmd.Stdout, cmd.Stderr = outW, errW
	var wg sync.WaitGroup
	wg.Go(func() { out.copyLines(outR, r.env.Stdout, "o ") })
	wg.Go(func() { out.copyLines(errR, r.env.Stderr, "e ") })
	runErr := r.env.Run(cmd)
	asked := stop()
	outW.Close()
	errW.Close()
	wg.Wait()

	if asked != nil {
		r.logf("%v: handed it to the agent", asked)
	}
	if errors.Is(runErr, exec.ErrWaitDelay) {
		r.logf("the agent's output was still open %s after it exited (a process it started holds it): stopped reading it", stopGrace)
	}
	code, err := exitStatus(cmd.ProcessState, runErr)
	if err == nil {
		r.logf("%s exited %d", agent.argv[0], code)
	}
	out.end(ctx)
	return code, err
}

// stopSignal is why the agent's context ended: berth-init was signalled.
type stopSignal struct{ os.Signal }

func (s stopSignal) Error() string { return "asked to stop (" + s.String() + ")" }

// agentCommand prepares the agent's command so that a SIGTERM or SIGINT
// berth-init receives (the kubelet stops a pod by signalling its first
// process) reaches the agent, which may then end cleanly. stop ends the
// forwarding and returns the stopSignal that came, if one did.
func agentCommand(path string, argv []string) (cmd *exec.Cmd, stop func() error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			cancel(stopSignal{s})
		case <-ctx.Done():
		}
	}()
	cmd = exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Args = argv
	// exec calls Cancel once the process started, so cmd.Process is set.
	cmd.Cancel = func() error {
		var sig os.Signal = syscall.SIGTERM
		if s, ok := errors.AsType[stopSignal](context.Cause(ctx)); ok {
			sig = s.Signal
		}
		return cmd.Process.Signal(sig)
	}
	cmd.WaitDelay = stopGrace
	return cmd, func() error {
		signal.Stop(sigs)
		cancel(nil)
		<-done
		if s, ok := errors.AsType[stopSignal](context.Cause(ctx)); ok {
			return s
		}
		return nil
	}
}

// exitStatus is the agent's exit code as a shell reports it: 128+n when
// signal n ended it. An agent that never started is an error, 126.
func exitStatus(ps *os.ProcessState, runErr error) (int, error) {
	if ps == nil {
		if runErr == nil {
			runErr = errors.New("the agent did not start")
		}
		return exitCannotExec, runErr
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}
