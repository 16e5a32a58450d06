// Package entrypoint is berth-init, the first program of every sandbox
// (SPEC S13, S15). It runs in one of three modes.
//
// The agent-run mode (SPEC S13: BERTH_SANDBOX_PURPOSE=agent and BERTH_RUNNER
// set) is one task in an agent image, the host having cloned the checkout
// to /work and written the task to the prompt file. berth-init
//
//  1. refuses to start (exit 64, a line on stderr) when the prompt file is
//     missing, empty or not a regular file;
//  2. writes BERTH_RUNNER_FILES, the runner's config files, into HOME
//     (directories 0700, files 0600);
//  3. bootstraps git for the agent without writing anything: safe.directory
//     /work and a container-local identity travel as GIT_CONFIG_COUNT
//     entries in the agent's environment (HOME is fresh every run but a
//     session's, which keeps the CLI's state across its tasks, and the
//     command-line scope wins over anything in the checkout);
//  4. execs the runner's binary, found on PATH, with its own arguments ("$@",
//     the runner's ContainerArgs) unmodified and the prompt file as its
//     standard input, read to the end and then at EOF, never an open pipe.
//     exec, not a child: the container ends with the agent's exit code.
//
// It never clones and never pushes in this mode (unless BERTH_RUN_REPORT
// says otherwise, below): the host does both. With
// BERTH_IMAGE_CHECK=1 it does all of the above except the exec and prints a
// CheckReport as JSON on stdout instead (`berth image check`).
//
// With BERTH_RUN_REPORT=gateway the agent run is in-machine (Kubernetes: no
// host directory, and the gateway cannot read the pod's log): berth-init
// does the host's part itself, at BERTH_BASE_URL with the sandbox's own key
// (inmachine.go). It configures git as the start below does, with
// git-credential-berth for the repository's address, clones BERTH_REPO
// shallow into the empty /work, writes the task (GET /sandbox/v1/run/task) to the prompt
// file, kept out of git by .git/info/exclude, and runs the runner's binary
// as its child, with the same arguments, files, git settings and stdin as
// above. Each line of the agent's output goes unchanged to berth-init's own
// stdout or stderr, and marked "o " or "e " to the gateway in one streaming
// POST /sandbox/v1/run/output (sent whole again if that breaks). SIGTERM
// and SIGINT are handed to the agent, which cannot read berth-init's memory
// (PR_SET_DUMPABLE 0). It never pushes (the sandbox's key may only fetch):
// after a clean exit a moved HEAD becomes a git bundle of the commits since
// the clone (at most 64 MiB), and POST /sandbox/v1/run/exit reports, once,
// the exit code, that bundle and its commit, or why it could not be made,
// as it reports any failure after the configuration was accepted; the
// gateway makes the bundle berth/<name> once it has concluded the run
// clean. berth-init exits with the agent's code, or 1 when the bundle or
// the report failed.
//
// With BERTH_RUN_CONTRACT=kelos as well, the image is a kelos image (SPEC
// S13.6), which berth-init wraps unchanged: its pod runs berth-init from a
// directory of its own (git-credential-berth beside it, named by that path
// in git's configuration), as the interface's uid, in /workspace/repo,
// where it clones. The agent is the image's /kelos_entrypoint.sh with the
// task as its one argument, $1 (no prompt file, no runner files, nothing
// on stdin, no arguments of the pod's), in the pod's environment with only
// safe.directory added for git (and the CA's variables, below); its output,
// exit and work go to the gateway as above, which reads the interface's
// markers and banners from the output.
//
// In all three, when BERTH_CA_CERTS holds the deployment's certificate
// authority (the gateway terminates TLS for some hosts with it), berth-init
// refuses to start unless it is one or more PEM CERTIFICATE blocks in at
// most 64 KiB, and before the agent starts writes, in a new directory
// berth-ca-* under XDG_RUNTIME_DIR or /tmp, bundle.pem (the trust store
// SSL_CERT_FILE names, else the system's, then the CA) and extra.pem (an
// existing NODE_EXTRA_CA_CERTS file's certificates, then the CA). The agent's
// environment names bundle.pem in SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
// CURL_CA_BUNDLE, GIT_SSL_CAINFO and PIP_CERT, and extra.pem in
// NODE_EXTRA_CA_CERTS, and lacks BERTH_CA_CERTS (ca.go).
//
// Otherwise, at each start of the container (a resumed sandbox starts it
// again on the same HOME volume) it:
//
//  1. prepares HOME: ~/.ssh/authorized_keys from BERTH_AUTHORIZED_KEYS, and
//     the container's environment in ~/.ssh/environment (ssh sessions) and
//     ~/.berth/env.sh, which ~/.profile and ~/.bashrc source;
//  2. sets git's global author, when given;
//  3. checks out BERTH_REPO (shallow, at BERTH_BRANCH) into ~/<name> unless
//     that directory exists;
//  4. engineer: makes a host key in ~/.sshd once and execs sshd on port 2222
//     as the sandbox user; agent without a runner: runs its arguments as a
//     child and pushes the checkout to berth/<name>, or waits for its end.
//
// It logs plain lines on stderr and never a secret's value; stdout is left to
// the agent (S13). Called as git-credential-berth (a symlink to berth-init),
// it is git's credential helper (S9).
//
// Environment, as the gateway hands it over (S15):
//
//	BERTH_SANDBOX_ID          required: the sandbox's id (sbx_…)
//	BERTH_SANDBOX_PURPOSE     required: engineer or agent
//	BERTH_AUTHORIZED_KEYS     required for engineer: ssh public keys, one a line;
//	                          rewritten into ~/.ssh/authorized_keys at every start
//	HOME                      required (podman sets it from the image's passwd)
//	BERTH_SANDBOX_NAME, BERTH_SANDBOX_CLASS, BERTH_SANDBOX_EXPIRES (RFC 3339)
//	BERTH_API_KEY, BERTH_BASE_URL, BERTH_MODEL, OPENAI_BASE_URL,
//	ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
//	BERTH_SESSION, ANTHROPIC_CUSTOM_HEADERS, GEMINI_CLI_CUSTOM_HEADERS
//	                          agent sandboxes (S14): the session header
//	BERTH_REPO                repository to clone (any address git accepts)
//	BERTH_BRANCH              branch to check out (default: the remote's HEAD)
//	BERTH_GIT_AUTHOR_NAME, BERTH_GIT_AUTHOR_EMAIL   git's user.name/email
//	BERTH_GIT_USERNAME, BERTH_GIT_TOKEN_EXPIRES, BERTH_GIT_CREDENTIAL_URL (S9)
//	BERTH_RUNNER              the agent's runner (S13); selects the agent-run mode
//	BERTH_PROMPT_FILE         agent-run: the task (default /work/.berth-prompt.txt)
//	BERTH_RUNNER_FILES        agent-run: JSON [{"path": "<relative to HOME>",
//	                          "content": "…"}, …], the runner's config files
//	BERTH_SKILLS_FROM, BERTH_SKILLS_DIR   agent-run: a directory of the checkout
//	                          whose subdirectories are skills, and where under HOME
//	                          the runner's CLI reads them (skills.go)
//	BERTH_IMAGE_CHECK=1       agent-run: report instead of exec (berth image check)
//	BERTH_RUN_PUSH=no         in-machine run: hand over no work (a reviewer's run;
//	                          its verdict file goes to the gateway with the exit report)
//	BERTH_RUN_CONTRACT=kelos  in-machine run: the image is a kelos image, whose own
//	                          entrypoint runs with the task as $1
//	BERTH_CA_CERTS            agent-run: the deployment's CA as PEM CERTIFICATE
//	                          blocks (at most 64 KiB), for the agent to trust
//	BERTH_RUN_REPORT          agent-run: "gateway" for the in-machine run, which
//	                          needs BERTH_REPO (http or https), BERTH_BASE_URL,
//	                          BERTH_API_KEY and BERTH_SANDBOX_NAME; unset: the
//	                          host clones, reads the output and pushes
//	BERTH_BOOTSTRAP_FILE      warm pool (SPEC S12), without BERTH_SANDBOX_ID: the
//	                          downward-API file of the pod's annotations; berth-init
//	                          waits there for the berth.dev/bootstrap-token a claim
//	                          adds, trades it once at BERTH_BASE_URL for the sandbox's
//	                          environment (POST /sandbox/v1/bootstrap), then starts;
//	                          on podman a file the driver writes, removed once read
//	BERTH_READY_FILE          warm pool on podman: sshd starts before the claim, as
//	                          berth-init's child; once claimed and HOME is written,
//	                          berth-init creates this file and stays sshd's parent
//
// Start-only, never written to HOME: BERTH_AUTHORIZED_KEYS,
// BERTH_GIT_TOKEN, BERTH_PI_CONFIG, BERTH_PI_SETTINGS, and BERTH_TASK, which
// the gateway no longer sets (the task is the prompt file's, S13.2; an
// engineer sandbox has none) but an older one did. Every other variable,
// including PATH and those the caller added, reaches ssh sessions and shells,
// except TERM, HOSTNAME, HOME, the shell's own (PWD, OLDPWD, SHLVL, _),
// names that are not shell identifiers and values with a line break. PATH
// starts with ~/.local/bin (where users install without root) in both files;
// in env.sh it is merged rather than set: a shell keeps its own entries and
// gains ~/.local/bin first and the sandbox's missing ones last.
package entrypoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/devcontainer"
	"berth.dev/berth/internal/handoff"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/secret"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 64 // missing or invalid configuration (sysexits EX_USAGE)
	exitNotFound = 127
	exitStopped  = 143 // ended by SIGTERM, as a shell reports it
)

// Purposes of a sandbox (S3).
const (
	purposeEngineer = "engineer"
	purposeAgent    = "agent"
)

// Env is everything berth-init takes from the process: its environment, its
// output streams, and how it runs and execs other programs. Tests replace the
// functions to record argv without running sshd or an agent.
type Env struct {
	Getenv  func(string) string
	Environ func() []string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// HTTP reaches the gateway (git-credential-berth); nil means a default
	// client.
	HTTP *http.Client
	// Run runs a prepared setup command (git, ssh-keygen) to completion.
	Run func(*exec.Cmd) error
	// Start starts a command berth-init does not wait for (the
	// postCreateCommand, beside sshd); nil is (*exec.Cmd).Start.
	Start func(*exec.Cmd) error
	// Exec replaces the process with path (sshd, the agent). It returns
	// only when that fails.
	Exec func(path string, argv, envv []string) error
	// SetStdin makes f the process's standard input (file descriptor 0),
	// which the program Exec starts next inherits. f itself may be closed
	// afterwards.
	SetStdin func(f *os.File) error
	// WaitForStop blocks until the container is asked to stop (SIGTERM or
	// SIGINT).
	WaitForStop func()
	// Supervise stays the parent of sshd, which Start started, until it
	// ends, and returns its exit code (the warm pool's and the handoff's
	// mode, where berth-init stays PID 1); it tells reaped (when not nil)
	// of every other child it reaps. nil waits for sshd alone.
	Supervise func(sshd *exec.Cmd, reaped func(pid int)) int
}

// OSEnv is the Env of the running process.
func OSEnv() Env {
	return Env{
		Getenv:    os.Getenv,
		Environ:   os.Environ,
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		Run:       (*exec.Cmd).Run,
		Start:     (*exec.Cmd).Start,
		Exec:      syscall.Exec,
		SetStdin:  setStdin,
		Supervise: supervise,
		WaitForStop: func() {
			// As PID 1 a signal without a handler is ignored: ask for them.
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
			<-ch
		},
	}
}

// Main runs berth-init with args (the whole argv: args[0] is the name it was
// called by; the rest is an agent's command) and returns the exit code. It
// returns only when it does not exec sshd or the agent.
func Main(args []string, env Env) int {
	return start(args, env, options{workDir: workDir, kelosWorkDir: kelos.WorkDir, kelosEntrypoint: kelos.Entrypoint,
		postCreateFile: devcontainer.PostCreateFile, retryDelay: time.Second})
}

// options are the fixed values Main starts with; tests change them (see
// export_test.go), since a test cannot own /work or wait seconds between
// attempts.
type options struct {
	workDir         string        // the agent-run modes' checkout
	kelosWorkDir    string        // and a kelos image's in-machine run's
	kelosEntrypoint string        // the kelos image's entrypoint
	postCreateFile  string        // the image's postCreateCommand
	retryDelay      time.Duration // between attempts at a gateway route
}

// start is Main with its fixed values in opts.
func start(args []string, env Env, opts options) int {
	if len(args) > 0 && filepath.Base(args[0]) == credentialHelperName {
		return credentialMain(args[1:], env)
	}
	if len(args) > 1 && args[1] == postCreateArg {
		return runPostCreate(args[2:], env)
	}
	if len(args) > 1 && args[1] == RefreshHomeArg {
		return refreshHome(env, opts.workDir)
	}
	if env.Start == nil {
		env.Start = (*exec.Cmd).Start
	}
	var early *earlySSHD
	if pooled(env.Getenv) {
		var err error
		if ready := env.Getenv(envReadyFile); ready != "" {
			if early, err = startEarlySSHD(env, ready); err != nil {
				fmt.Fprintf(env.Stderr, "berth-init: warm pool: %v\n", err)
				return exitFailure
			}
			// A start that fails from here on takes sshd with it.
			defer early.stop()
		}
		if env, err = bootstrap(context.Background(), env, 500*time.Millisecond); err != nil {
			fmt.Fprintf(env.Stderr, "berth-init: warm pool: %v\n", err)
			return exitFailure
		}
	}
	work := opts.workDir
	if env.Getenv("BERTH_RUN_CONTRACT") == contractKelos {
		work = opts.kelosWorkDir
	}
	cfg, err := loadConfig(env.Getenv, work)
	if err != nil {
		for line := range strings.Lines(err.Error()) {
			fmt.Fprintf(env.Stderr, "berth-init: %s", line)
		}
		fmt.Fprintln(env.Stderr)
		return exitUsage
	}
	r := &starter{cfg: cfg, env: env, retryDelay: opts.retryDelay, kelosEntrypoint: opts.kelosEntrypoint, postCreateFile: opts.postCreateFile}
	if len(args) > 0 {
		r.self = args[0]
	}
	var cmd []string
	if len(args) > 1 {
		cmd = args[1:]
	}
	if cfg.agentRun() && cfg.runReport == runReportGateway {
		return r.inMachineRun(cmd)
	}
	if cfg.agentRun() {
		return r.agentRun(cmd)
	}
	r.logf("starting sandbox %s %q (%s)", cfg.id, cfg.name, cfg.purpose)
	if err := r.prepareHome(); err != nil {
		r.logf("prepare HOME: %v", err)
		return exitFailure
	}
	if err := r.configureGit(); err != nil {
		r.logf("configure git: %v", err)
		return exitFailure
	}
	if err := r.checkout(); err != nil {
		r.logf("check out %s: %v", redactURL(cfg.repo), err)
		return exitFailure
	}
	if cfg.purpose == purposeAgent {
		if early != nil {
			r.logf("a warm pool's machine is an engineer's, not sandbox %s's (%s)", cfg.id, cfg.purpose)
			return exitFailure
		}
		return r.runAgent(cmd)
	}
	if len(cmd) > 0 {
		r.logf("ignoring %d arguments: an engineer sandbox runs sshd", len(cmd))
	}
	if cfg.purpose == purposeEngineer {
		// A setup that fails is the engineer's to look into, over ssh:
		// the sandbox starts all the same.
		if err := r.startPostCreate(); err != nil {
			r.logf("postCreateCommand: %v", err)
		}
	}
	if early == nil && env.Getenv(handoff.EnvSocket) != "" {
		// berth-init stays, to take the tunnels' connections over.
		var err error
		if early, err = startEarlySSHD(env, ""); err != nil {
			r.logf("%v", err)
			return exitFailure
		}
	}
	if early != nil {
		return r.serve(early)
	}
	return r.startSSHD()
}

// config is what berth-init needs from its environment; loadConfig checks it.
type config struct {
	id, name, purpose string
	home              string
	authorizedKeys    string
	repo, branch      string
	authorName        string
	authorEmail       string
	// The agent-run mode (run.go).
	runner      string
	promptFile  string
	runnerFiles []api.RunnerFile
	imageCheck  bool
	// caCerts are BERTH_CA_CERTS's certificates as PEM, the deployment's
	// CA the agent's programs are to trust (ca.go); nil without one.
	caCerts []byte
	// work is the agent-run modes' checkout, /work (workDir).
	work string
	// The in-machine run (inmachine.go).
	runReport string
	contract  string // BERTH_RUN_CONTRACT: "" (berth's) or kelos
	baseURL   string
	apiKey    secret.Secret // the sandbox's key, BERTH_API_KEY
	noPush    bool          // BERTH_RUN_PUSH=no: a reviewer's run pushes nothing
}

// agentRun reports whether the sandbox runs one agent task in an agent
// image (SPEC S13) rather than starting as an engineer or agent sandbox
// with a HOME volume.
func (c config) agentRun() bool {
	return c.purpose == purposeAgent && (c.runner != "" || c.imageCheck)
}

// loadConfig reads and validates the environment: the one place that knows
// which variables are required. Its error names every problem, one a line.
// work is where the agent-run modes' checkout is.
func loadConfig(getenv func(string) string, work string) (config, error) {
	c := config{
		id:             getenv("BERTH_SANDBOX_ID"),
		name:           getenv("BERTH_SANDBOX_NAME"),
		purpose:        getenv("BERTH_SANDBOX_PURPOSE"),
		home:           getenv("HOME"),
		authorizedKeys: getenv("BERTH_AUTHORIZED_KEYS"),
		repo:           getenv("BERTH_REPO"),
		branch:         getenv("BERTH_BRANCH"),
		authorName:     getenv("BERTH_GIT_AUTHOR_NAME"),
		authorEmail:    getenv("BERTH_GIT_AUTHOR_EMAIL"),
		runner:         getenv("BERTH_RUNNER"),
		promptFile:     getenv("BERTH_PROMPT_FILE"),
		imageCheck:     getenv("BERTH_IMAGE_CHECK") == "1",
		work:           work,
		runReport:      getenv("BERTH_RUN_REPORT"),
		contract:       getenv("BERTH_RUN_CONTRACT"),
		baseURL:        getenv("BERTH_BASE_URL"),
		apiKey:         secret.New(getenv("BERTH_API_KEY")),
		noPush:         getenv("BERTH_RUN_PUSH") == "no",
	}
	if c.promptFile == "" {
		c.promptFile = filepath.Join(work, promptName)
	}
	var errs []error
	if c.id == "" {
		errs = append(errs, errors.New("BERTH_SANDBOX_ID is not set"))
	}
	switch c.purpose {
	case purposeEngineer:
		if strings.TrimSpace(c.authorizedKeys) == "" {
			errs = append(errs, errors.New("BERTH_AUTHORIZED_KEYS is not set (required for an engineer sandbox)"))
		}
	case purposeAgent:
	case "":
		errs = append(errs, errors.New("BERTH_SANDBOX_PURPOSE is not set (engineer or agent)"))
	default:
		errs = append(errs, fmt.Errorf("BERTH_SANDBOX_PURPOSE is %q, want engineer or agent", c.purpose))
	}
	if !filepath.IsAbs(c.home) {
		errs = append(errs, fmt.Errorf("HOME is %q, want an absolute path", c.home))
	}
	errs = append(errs, loadInMachine(c)...)
	if c.agentRun() {
		errs = append(errs, loadAgentRun(&c, getenv)...)
	} else if c.repo != "" {
		if _, err := repoDir(c.repo); err != nil {
			errs = append(errs, fmt.Errorf("BERTH_REPO: %v", err))
		}
	}
	return c, errors.Join(errs...)
}

// starter carries one start of the sandbox.
type starter struct {
	cfg config
	env Env
	// retryDelay is the pause between attempts at a gateway route.
	retryDelay time.Duration
	// self is the name berth-init was called by (argv[0]), and
	// kelosEntrypoint what a kelos image's in-machine run starts.
	self            string
	kelosEntrypoint string
	// postCreateFile is where the image keeps its postCreateCommand.
	postCreateFile string
}

func (r *starter) logf(format string, args ...any) {
	fmt.Fprintf(r.env.Stderr, "berth-init: "+format+"\n", args...)
}

// command prepares a setup command. Its output goes to stderr: setup output
// is diagnostics, and stdout belongs to the agent (S13).
func (r *starter) command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Env = r.env.Environ()
	c.Dir = r.cfg.home
	c.Stdout = r.env.Stderr
	c.Stderr = r.env.Stderr
	return c
}

// runAgent runs the command line of an agent sandbox started without a
// runner, the engineer-style agent sandbox with a HOME volume (an agent
// run with a runner is agentRun's). Without a command it has nothing to
// run: it says so and waits for its end (terminate or expiry), so its
// lifecycle still works end to end. With a command, the agent runs as a
// child with the sandbox's environment; a clean exit pushes the checkout's
// HEAD to berth/<name> (SPEC S9: an agent's work leaves as a branch).
func (r *starter) runAgent(cmd []string) int {
	if len(cmd) == 0 {
		r.logf("no runner is configured for agent sandboxes yet: waiting for the sandbox to end")
		r.env.WaitForStop()
		r.logf("asked to stop")
		return exitStopped
	}
	path, err := lookPath(cmd[0], r.env.Getenv("PATH"))
	if err != nil {
		r.logf("run %s: %v", cmd[0], err)
		return exitNotFound
	}
	r.logf("running %s", cmd[0])
	c := exec.Command(path, cmd[1:]...)
	c.Env = r.env.Environ()
	c.Dir = r.workDir()
	c.Stdin, c.Stdout, c.Stderr = r.env.Stdin, r.env.Stdout, r.env.Stderr
	if err := r.env.Run(c); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			r.logf("%s exited %d", cmd[0], ee.ExitCode())
			return ee.ExitCode()
		}
		r.logf("run %s: %v", cmd[0], err)
		return exitFailure
	}
	if err := r.pushWork(); err != nil {
		r.logf("push: %v", err)
		return exitFailure
	}
	return 0
}

// workDir is where the agent works: the checkout when there is one.
func (r *starter) workDir() string {
	if name, err := repoDir(r.cfg.repo); err == nil && cloneable(r.cfg.repo) {
		if fi, err := os.Stat(filepath.Join(r.cfg.home, name)); err == nil && fi.IsDir() {
			return filepath.Join(r.cfg.home, name)
		}
	}
	return r.cfg.home
}

// pushWork pushes the checkout's HEAD to refs/heads/berth/<name>, the one
// branch an agent sandbox may write, and says which commit it pushed.
func (r *starter) pushWork() error {
	dir := r.workDir()
	if dir == r.cfg.home || r.cfg.name == "" {
		return nil // no checkout: nothing to push
	}
	branch := "berth/" + r.cfg.name
	push := r.command("git", "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	push.Dir = dir
	push.Env = append(push.Env, "GIT_TERMINAL_PROMPT=0")
	if err := r.env.Run(push); err != nil {
		return fmt.Errorf("git push to %s: %w", branch, err)
	}
	head := r.command("git", "rev-parse", "HEAD")
	head.Dir = dir
	var out strings.Builder
	head.Stdout = &out
	if err := r.env.Run(head); err != nil {
		return err
	}
	r.logf("pushed %s at %s", branch, strings.TrimSpace(out.String()))
	return nil
}

// lookPath finds an executable as the shell would, in the given PATH (the
// environment handed over, not necessarily this process's).
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		if isExecutable(file) {
			return file, nil
		}
		return "", fmt.Errorf("%s is not an executable file", file)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if p := filepath.Join(dir, file); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", file)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
