package entrypoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/runner"
)

// The agent-run mode's fixed places (SPEC S13.1, S13.2): the checkout is
// mounted at /work, which is also the working directory, and the task is
// in the prompt file there unless BERTH_PROMPT_FILE says otherwise.
const (
	workDir    = "/work"
	promptName = ".berth-prompt.txt"
)

// The identity an agent commits with when the host names none. The domain
// is reserved (RFC 2606): the address is never mistaken for a real one.
const (
	defaultAuthorName  = "berth agent"
	defaultAuthorEmail = "agent@berth.invalid"
)

// exitCannotExec is the shell's code for a command found but not run.
const exitCannotExec = 126

// loadAgentRun checks the agent-run modes' settings: a runner berth-init
// knows (or none, in check mode), well-formed config files and, when
// given, the deployment's CA.
func loadAgentRun(c *config, getenv func(string) string) []error {
	var errs []error
	if c.runner != "" {
		if _, err := runner.Get(c.runner); err != nil {
			errs = append(errs, fmt.Errorf("BERTH_RUNNER: %v", err))
		}
	}
	files, err := parseRunnerFiles(getenv("BERTH_RUNNER_FILES"))
	if err != nil {
		errs = append(errs, fmt.Errorf("BERTH_RUNNER_FILES: %v", err))
	}
	c.runnerFiles = files
	if s := getenv(envCACerts); s != "" {
		certs, err := parseCACerts(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", envCACerts, err))
		}
		c.caCerts = certs
	}
	return errs
}

// parseRunnerFiles reads BERTH_RUNNER_FILES. Every path must stay inside
// HOME: relative, without "..", named once.
func parseRunnerFiles(s string) ([]api.RunnerFile, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var files []api.RunnerFile
	if err := dec.Decode(&files); err != nil {
		return nil, fmt.Errorf("want a JSON array of {\"path\", \"content\"}: %v", err)
	}
	if dec.More() {
		return nil, errors.New("data after the JSON array")
	}
	seen := map[string]bool{}
	for _, f := range files {
		p := filepath.FromSlash(f.Path)
		switch {
		case !filepath.IsLocal(p) || filepath.Clean(p) != p:
			return nil, fmt.Errorf("path %q: want a clean path relative to HOME", f.Path)
		case seen[p]:
			return nil, fmt.Errorf("path %q is given twice", f.Path)
		}
		seen[p] = true
	}
	return files, nil
}

// agentRun is the agent-run mode (see the package comment). args are the
// runner's own arguments, the "$@" slot.
func (r *starter) agentRun(args []string) int {
	prompt, size, err := openPrompt(r.cfg.promptFile)
	if err != nil {
		r.logf("%v", err)
		return exitUsage
	}
	defer prompt.Close()
	if err := r.writeRunnerFiles(); err != nil {
		r.logf("write the runner's config files: %v", err)
		return exitFailure
	}
	ca, err := r.writeCAFiles()
	if err != nil {
		r.logf("trust the deployment's CA: %v", err)
		return exitFailure
	}
	envv := ca.env(gitConfigEnv(r.env.Environ(), r.gitSettings()))
	if r.cfg.imageCheck {
		defer ca.remove() // no agent will read them
		return r.check(args, prompt, envv)
	}
	rn, err := runner.Get(r.cfg.runner)
	if err != nil { // loadConfig refused it already
		r.logf("%v", err)
		return exitUsage
	}
	path, err := lookPath(rn.Binary(), r.env.Getenv("PATH"))
	if err != nil {
		r.logf("runner %s: %v", rn.Name(), err)
		return exitNotFound
	}
	if err := r.env.SetStdin(prompt); err != nil {
		r.logf("hand over the prompt file: %v", err)
		return exitFailure
	}
	prompt.Close()
	r.logf("agent run of sandbox %s: exec %s with %d arguments, the prompt (%d bytes) on stdin",
		r.cfg.id, path, len(args), size)
	argv := append([]string{rn.Binary()}, args...)
	err = r.env.Exec(path, argv, envv)
	r.logf("exec %s: %v", path, err)
	return exitCannotExec
}

// openPrompt opens the prompt file for the agent's standard input, at its
// start, after checking that it holds a task: a missing or empty prompt
// must stop the run before the agent starts (SPEC S13.2), since an agent
// without one either fails late or waits on an empty stdin.
func openPrompt(path string) (*os.File, int64, error) {
	fail := func(format string, args ...any) (*os.File, int64, error) {
		return nil, 0, fmt.Errorf("prompt file %s "+format+
			" (BERTH_PROMPT_FILE; the host writes the task there before the container starts)",
			append([]any{path}, args...)...)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("does not exist")
	case err != nil:
		return fail("cannot be read: %v", unwrapPath(err))
	case !fi.Mode().IsRegular():
		// A FIFO would block the open, a directory has no task.
		return fail("is not a regular file (%s)", fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return fail("cannot be read: %v", unwrapPath(err))
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return fail("cannot be read: %v", unwrapPath(err))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		f.Close()
		return fail("is empty: refusing to start the agent without a task")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return fail("cannot be read: %v", unwrapPath(err))
	}
	return f, int64(len(data)), nil
}

// unwrapPath drops the path a *fs.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// writeRunnerFiles writes BERTH_RUNNER_FILES under HOME, each replacing
// what is there (HOME is fresh every run; a session's keeps the CLI's own
// state, which none of these files is), private to the agent's user:
// the files name the credentials the runner reads, never their values, but
// the agent's configuration is nobody else's business either.
func (r *starter) writeRunnerFiles() error {
	for _, f := range r.cfg.runnerFiles {
		path := filepath.Join(r.cfg.home, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := writeFile(path, []byte(f.Content), 0o600); err != nil {
			return err
		}
	}
	if n := len(r.cfg.runnerFiles); n > 0 {
		r.logf("wrote %d config files of runner %s under HOME", n, r.cfg.runner)
	}
	n, err := r.copyRepoSkills()
	if err != nil {
		return fmt.Errorf("skills from the repository: %w", err)
	}
	if n > 0 {
		r.logf("copied %d skills of the repository's %s under HOME", n, r.env.Getenv(envSkillsFrom))
	}
	return nil
}

// gitSettings are what git needs to work on the mounted checkout: the
// checkout is owned by another uid than the agent's on some hosts, and
// without safe.directory git refuses it as of dubious ownership; without an
// identity a commit fails. The host's author, else berth's default.
func (r *starter) gitSettings() [][2]string {
	name, email := r.cfg.authorName, r.cfg.authorEmail
	if name == "" {
		name = defaultAuthorName
	}
	if email == "" {
		email = defaultAuthorEmail
	}
	return [][2]string{{"safe.directory", r.cfg.work}, {"user.name", name}, {"user.email", email}}
}

// gitConfigEnv returns environ with settings added as git's command-line
// configuration (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>;
// git ≥ 2.31), after any entries environ has already. Nothing is written,
// and the command-line scope outranks the checkout's own .git/config, so the
// commits carry the host's identity.
func gitConfigEnv(environ []string, settings [][2]string) []string {
	n := 0
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GIT_CONFIG_COUNT="); ok {
			// A count git would refuse counts as none.
			if c, err := strconv.Atoi(v); err == nil && c > 0 {
				n = c
			}
		}
	}
	out := make([]string, 0, len(environ)+2*len(settings)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "GIT_CONFIG_COUNT" || configIndex(name) >= n {
			continue // replaced below; a stale entry could shadow ours
		}
		out = append(out, kv)
	}
	for i, kv := range settings {
		out = append(out,
			"GIT_CONFIG_KEY_"+strconv.Itoa(n+i)+"="+kv[0],
			"GIT_CONFIG_VALUE_"+strconv.Itoa(n+i)+"="+kv[1])
	}
	return append(out, "GIT_CONFIG_COUNT="+strconv.Itoa(n+len(settings)))
}

// configIndex is <n> of GIT_CONFIG_KEY_<n> or GIT_CONFIG_VALUE_<n>, or -1
// for any other name.
func configIndex(name string) int {
	for _, prefix := range []string{"GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"} {
		if v, ok := strings.CutPrefix(name, prefix); ok {
			if i, err := strconv.Atoi(v); err == nil && i >= 0 {
				return i
			}
		}
	}
	return -1
}
