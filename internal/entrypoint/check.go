package entrypoint

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/runner"
)

// check is the agent-run mode's last step under BERTH_IMAGE_CHECK=1: it
// reports instead of exec'ing, and exits 0 whatever it found (the report
// says); a missing prompt has already ended the run with 64.
func (r *starter) check(args []string, prompt *os.File, envv []string) int {
	rep := api.CheckReport{Runner: r.cfg.runner, Argv: args}
	add := func(name string, ok bool, format string, a ...any) {
		rep.Elements = append(rep.Elements, api.CheckElement{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}

	uid, gid := os.Getuid(), os.Getgid()
	add("non-root", uid != 0, "uid %d, gid %d", uid, gid)
	status, err := procStatus()
	if err != nil {
		add("capabilities", false, "%v", err)
		add("no-new-privileges", false, "%v", err)
	} else {
		capsOK := true
		var caps []string
		for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
			capsOK = capsOK && strings.Trim(status[k], "0") == "" && status[k] != ""
			caps = append(caps, k+" "+status[k])
		}
		add("capabilities", capsOK, "%s", strings.Join(caps, ", "))
		add("no-new-privileges", status["NoNewPrivs"] == "1", "NoNewPrivs %s", status["NoNewPrivs"])
	}

	cwd, err := os.Getwd()
	if err != nil {
		add("workdir", false, "%v", err)
	} else {
		if cwd == workDir {
			add("workdir", true, "cwd %s", cwd)
		} else {
			add("workdir", false, "cwd %s, want %s", cwd, workDir)
		}
	}
	if err := probeWrite(".", false, r.env.Run); err != nil {
		add("workdir-writable", false, "%v", err)
	} else {
		add("workdir-writable", true, "uid %d created and removed a file", uid)
	}

	if err := r.env.SetStdin(prompt); err != nil {
		add("prompt-stdin", false, "hand over %s: %v", r.cfg.promptFile, err)
	} else {
		prompt.Close()
		h := sha256.New()
		n, err := io.Copy(h, r.env.Stdin)
		rep.Stdin = api.CheckStdin{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}
		if err != nil {
			add("prompt-stdin", false, "read stdin: %v", err)
		} else {
			add("prompt-stdin", n > 0, "%s → stdin: %d bytes, then EOF", r.cfg.promptFile, n)
		}
	}

	if err := probeWrite(r.cfg.home, true, r.env.Run); err != nil {
		add("home", false, "HOME %s: %v", r.cfg.home, err)
	} else {
		add("home", true, "HOME %s is writable, and a program written there runs", r.cfg.home)
	}
	rep.Elements = append(rep.Elements, r.checkFiles(), r.checkGit(envv))

	if r.cfg.runner == "" {
		add("runner", false, "no runner named (BERTH_RUNNER)")
	} else if rn, err := runner.Get(r.cfg.runner); err != nil {
		add("runner", false, "%v", err)
	} else {
		rep.Argv = append([]string{rn.Binary()}, args...)
		if path, err := lookPath(rn.Binary(), r.env.Getenv("PATH")); err != nil {
			add("runner", false, "%s: %v", rn.Name(), err)
		} else {
			add("runner", true, "%s: %s → %s", rn.Name(), rn.Binary(), path)
		}
	}

	enc := json.NewEncoder(r.env.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		r.logf("write the check's report: %v", err)
		return exitFailure
	}
	return exitOK
}

// checkFiles verifies what writeRunnerFiles wrote.
func (r *starter) checkFiles() api.CheckElement {
	el := api.CheckElement{Name: "runner-files"}
	if len(r.cfg.runnerFiles) == 0 {
		el.OK, el.Detail = true, "none to write"
		return el
	}
	var names []string
	for _, f := range r.cfg.runnerFiles {
		fi, err := os.Stat(filepath.Join(r.cfg.home, filepath.FromSlash(f.Path)))
		if err != nil {
			el.Detail = err.Error()
			return el
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() != int64(len(f.Content)) {
			el.Detail = fmt.Sprintf("~/%s: mode %v, %d bytes; want 0600, %d bytes",
				f.Path, fi.Mode().Perm(), fi.Size(), len(f.Content))
			return el
		}
		names = append(names, "~/"+f.Path)
	}
	el.OK, el.Detail = true, "wrote "+strings.Join(names, ", ")+" (0600)"
	return el
}

// checkGit asks git, with the agent's environment, for the identity it
// would commit with and the safe directories it trusts.
func (r *starter) checkGit(envv []string) api.CheckElement {
	el := api.CheckElement{Name: "git"}
	gitOut := func(args ...string) (string, error) {
		c := exec.Command("git", args...)
		c.Env = envv
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		if err := r.env.Run(c); err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	ident, err := gitOut("var", "GIT_COMMITTER_IDENT")
	if err != nil {
		el.Detail = err.Error()
		return el
	}
	// "Name <email> 1700000000 +0000": the time is not the point.
	if f := strings.Fields(ident); len(f) > 2 {
		ident = strings.Join(f[:len(f)-2], " ")
	}
	safe, err := gitOut("config", "--get-all", "safe.directory")
	if err != nil {
		el.Detail = err.Error()
		return el
	}
	trusted := false
	for line := range strings.Lines(safe) {
		trusted = trusted || strings.TrimSpace(line) == workDir
	}
	el.OK = trusted
	el.Detail = fmt.Sprintf("commits as %s; safe.directory %s", ident, strings.Join(strings.Fields(safe), " "))
	return el
}

// procStatus reads the fields of /proc/self/status.
func procStatus() (map[string]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, sc.Err()
}

// probeWrite creates a file in dir and removes it; with run set, the file
// is a shell script that must run (HOME is mounted exec: tools the agent
// installs there must start).
func probeWrite(dir string, run bool, runCmd func(*exec.Cmd) error) error {
	f, err := os.CreateTemp(dir, ".berth-image-check-*")
	if err != nil {
		return unwrapPath(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString("#!/bin/sh\nexit 0\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil || !run {
		return err
	}
	if err := os.Chmod(f.Name(), 0o700); err != nil {
		return err
	}
	path, err := filepath.Abs(f.Name())
	if err != nil {
		return err
	}
	if err := runCmd(exec.Command(path)); err != nil {
		return fmt.Errorf("a program written there does not run: %v", err)
	}
	return nil
}
