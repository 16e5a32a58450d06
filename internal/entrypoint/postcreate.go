package entrypoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"berth.dev/berth/internal/devcontainer"
)

// A devcontainer's postCreateCommand (berth image build leaves it in the
// image) runs once per sandbox: at its first start, beside sshd, so the
// engineer can log in and watch it. The marker lives on the HOME volume,
// so a resume does not run it again; a start it did not finish (the
// sandbox stopped meanwhile) runs it again.
const (
	// postCreateArg, as berth-init's first argument, runs the command
	// instead of starting the sandbox: the process startPostCreate starts.
	postCreateArg = "--berth-post-create"
	// postCreateLog and postCreateDone are in ~/.berth.
	postCreateLog  = "post-create.log"
	postCreateDone = "post-create.done"
)

// startPostCreate starts the postCreateCommand in its own process when the
// image has one and this sandbox has not run it, and returns without
// waiting: sshd, exec'd next as PID 1, reaps it.
func (r *starter) startPostCreate() error {
	if _, err := os.Stat(r.postCreateFile); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if r.cfg.imageCheck {
		r.logf("berth image check: not running the image's postCreateCommand")
		return nil
	}
	berthDir := filepath.Join(r.cfg.home, ".berth")
	if _, err := os.Stat(filepath.Join(berthDir, postCreateDone)); err == nil {
		r.logf("postCreateCommand ran at this sandbox's first start; not again")
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(berthDir, postCreateLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy
	dir := r.workDir()
	cmd := exec.Command(self, postCreateArg, r.postCreateFile, dir)
	cmd.Dir = dir
	cmd.Env = postCreateEnv(r.env.Environ(), r.cfg.home)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, log, log
	if err := r.env.Start(cmd); err != nil {
		return fmt.Errorf("start postCreateCommand: %w", err)
	}
	r.logf("postCreateCommand started in %s; its output is in ~/.berth/%s", dir, postCreateLog)
	return nil
}

// postCreateEnv is what the command sees: what ssh sessions see, with
// HOME and ~/.local/bin first on PATH.
func postCreateEnv(environ []string, home string) []string {
	localBin := filepath.Join(home, ".local", "bin")
	envv := []string{"HOME=" + home}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, v := range sessionEnv(environ) {
		if v.name == "PATH" {
			path = v.value
			continue
		}
		envv = append(envv, v.name+"="+v.value)
	}
	dirs := append([]string{localBin}, without(filepath.SplitList(path), localBin)...)
	return append(envv, "PATH="+strings.Join(dirs, string(os.PathListSeparator)))
}

// runPostCreate is the process startPostCreate starts: berth-init
// --berth-post-create FILE DIR. It runs each step in DIR, its output to
// its own (the log), and writes the marker when all have run, whatever
// their exit, so a command that fails is not retried at each start: the
// log says why and the engineer reruns it by hand.
func runPostCreate(args []string, env Env) int {
	if len(args) != 2 {
		fmt.Fprintf(env.Stderr, "berth-init: %s FILE DIR\n", postCreateArg)
		return exitUsage
	}
	file, dir := args[0], args[1]
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(env.Stderr, "berth-init: postCreateCommand: %v\n", err)
		return exitFailure
	}
	c, err := devcontainer.ParseCommand(data)
	if err != nil {
		fmt.Fprintf(env.Stderr, "berth-init: postCreateCommand in %s: %v\n", file, err)
		return exitFailure
	}
	code := 0
	for _, s := range c.Steps {
		label := "postCreateCommand"
		if s.Name != "" {
			label += " " + s.Name
		}
		fmt.Fprintf(env.Stdout, "berth-init: %s %s: %s\n", time.Now().UTC().Format(time.RFC3339), label, strings.Join(s.Argv, " "))
		cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, env.Stdout, env.Stderr
		err := env.Run(cmd)
		switch ee, ok := errors.AsType[*exec.ExitError](err); {
		case err == nil:
			fmt.Fprintf(env.Stdout, "berth-init: %s: exit 0\n", label)
		case ok:
			code = ee.ExitCode()
			fmt.Fprintf(env.Stdout, "berth-init: %s: exit %d\n", label, code)
		default:
			code = exitFailure
			fmt.Fprintf(env.Stdout, "berth-init: %s: %v\n", label, err)
		}
	}
	home := env.Getenv("HOME")
	done := fmt.Sprintf("exit %d at %s\n", code, time.Now().UTC().Format(time.RFC3339))
	if err := writeFile(filepath.Join(home, ".berth", postCreateDone), []byte(done), 0o600); err != nil {
		fmt.Fprintf(env.Stderr, "berth-init: postCreateCommand: %v\n", err)
		return exitFailure
	}
	return code
}
