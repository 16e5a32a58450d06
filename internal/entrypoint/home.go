package entrypoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// startupLine is appended once to each shell startup file so that login and
// interactive shells see the same environment as ssh sessions.
const startupLine = `if [ -r "$HOME/.berth/env.sh" ]; then . "$HOME/.berth/env.sh"; fi # berth: sandbox environment`

// RefreshHomeArg, as berth-init's first argument, rewrites HOME's files
// that hold the sandbox's name and key from the environment it is run
// with, and exits: the driver runs it (podman exec) in a fork, whose
// restored processes and files still name the sandbox it was forked from.
const RefreshHomeArg = "--berth-refresh-home"

// refreshHome is berth-init's RefreshHomeArg mode.
func refreshHome(env Env, work string) int {
	cfg, err := loadConfig(env.Getenv, work)
	if err != nil {
		fmt.Fprintf(env.Stderr, "berth-init: %v\n", err)
		return exitUsage
	}
	r := &starter{cfg: cfg, env: env}
	if err := r.prepareHome(); err != nil {
		r.logf("refresh HOME: %v", err)
		return exitFailure
	}
	return 0
}

// prepareHome writes what HOME needs at every start: the ssh keys and the
// environment files. It rewrites only files berth-init owns and appends one
// line to the user's startup files when it is missing.
func (r *starter) prepareHome() error {
	home := r.cfg.home
	sshDir := filepath.Join(home, ".ssh")
	berthDir := filepath.Join(home, ".berth")
	for _, d := range []string{sshDir, berthDir} {
		if err := privateDir(d); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return fmt.Errorf("%w (HOME %s must be writable by uid %d)", err, home, os.Getuid())
			}
			return err
		}
	}
	if err := writeFile(filepath.Join(sshDir, "authorized_keys"), authorizedKeys(r.cfg.authorizedKeys), 0o600); err != nil {
		return err
	}
	vars := sessionEnv(r.env.Environ())
	localBin := filepath.Join(home, ".local", "bin")
	if err := writeFile(filepath.Join(sshDir, "environment"), sshEnvironment(vars, localBin), 0o600); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(berthDir, "env.sh"), shellEnvironment(vars, localBin), 0o600); err != nil {
		return err
	}
	startup := []string{".profile", ".bashrc"}
	// A login bash reads the first of these that exists instead of .profile.
	for _, f := range []string{".bash_profile", ".bash_login"} {
		if _, err := os.Stat(filepath.Join(home, f)); err == nil {
			startup = append(startup, f)
		}
	}
	for _, f := range startup {
		if err := appendLineOnce(filepath.Join(home, f), startupLine); err != nil {
			return err
		}
	}
	r.logf("wrote the environment for ssh sessions and shells (%d variables)", len(vars))
	return r.writePiFiles()
}

// authorizedKeys normalises BERTH_AUTHORIZED_KEYS: one key a line, no blank
// lines, no carriage returns.
func authorizedKeys(keys string) []byte {
	var b strings.Builder
	for line := range strings.Lines(keys) {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(line + "\n")
		}
	}
	return []byte(b.String())
}

// envVar is one variable of the environment.
type envVar struct{ name, value string }

// sessionEnv is the part of environ that ssh sessions and shells get, sorted
// by name. The first of duplicate names wins, as in os.Getenv.
func sessionEnv(environ []string) []envVar {
	var vars []envVar
	seen := map[string]bool{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		if inSessions(name, value) {
			vars = append(vars, envVar{name, value})
		}
	}
	slices.SortFunc(vars, func(a, b envVar) int { return strings.Compare(a.name, b.name) })
	return vars
}

// inSessions reports whether a variable of the container's environment is
// handed on to ssh sessions and shells.
func inSessions(name, value string) bool {
	switch name {
	case "TERM", "HOSTNAME", "HOME", "PWD", "OLDPWD", "SHLVL", "_":
		// Each session has its own (ssh sets HOME and TERM).
		return false
	case "BERTH_TASK", "BERTH_AUTHORIZED_KEYS", "BERTH_GIT_TOKEN", "BERTH_PI_CONFIG", "BERTH_PI_SETTINGS":
		// Start-only: used by berth-init and the runner, not kept in HOME.
		return false
	}
	// ~/.ssh/environment holds one NAME=value a line, and env.sh needs names
	// the shell accepts.
	return isShellName(name) && !strings.ContainsAny(value, "\r\n")
}

func isShellName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// sshEnvironment renders ~/.ssh/environment, which sshd reads for every
// session (PermitUserEnvironment yes): NAME=value, taken literally. PATH
// starts with localBin (~/.local/bin, where users install without root; on
// the home volume, so what is there survives a resume), whether or not it
// exists yet.
func sshEnvironment(vars []envVar, localBin string) []byte {
	var b strings.Builder
	b.WriteString("# Written by berth-init at every start of the sandbox; edits are lost.\n")
	for _, v := range vars {
		if v.name == "PATH" {
			v.value = strings.Join(slices.Insert(without(filepath.SplitList(v.value), localBin), 0, localBin), string(filepath.ListSeparator))
		}
		b.WriteString(v.name + "=" + v.value + "\n")
	}
	return []byte(b.String())
}

// without is dirs less every dir.
func without(dirs []string, dir string) []string {
	return slices.DeleteFunc(dirs, func(d string) bool { return d == dir })
}

// shellEnvironment renders ~/.berth/env.sh: POSIX sh exports of the same
// variables, each value single-quoted; PATH is merged (mergePath).
func shellEnvironment(vars []envVar, localBin string) []byte {
	var b strings.Builder
	b.WriteString("# Written by berth-init at every start of the sandbox; edits are lost.\n")
	b.WriteString("# ~/.profile and ~/.bashrc source it.\n")
	for _, v := range vars {
		if v.name == "PATH" {
			b.WriteString(mergePath(v.value, localBin))
			continue
		}
		b.WriteString("export " + v.name + "=" + shellQuote(v.value) + "\n")
	}
	return []byte(b.String())
}

// mergePath renders the PATH part of env.sh. Setting PATH outright would undo
// what startup files add before env.sh is sourced (Debian's ~/.profile puts
// ~/.local/bin first, if it existed at login) and what a parent shell had;
// so PATH keeps its entries, gains localBin first when it lacks it, and the
// sandbox's missing ones at the end. Empty entries (the current directory)
// are never added.
func mergePath(path, localBin string) string {
	var dirs []string
	for _, d := range without(filepath.SplitList(path), localBin) {
		if d != "" {
			dirs = append(dirs, shellQuote(d))
		}
	}
	first := shellQuote(localBin)
	s := "case \":$PATH:\" in *:" + first + ":*) ;; *) PATH=" + first + "\"${PATH:+:$PATH}\" ;; esac\n"
	if len(dirs) > 0 {
		s += "for berth_dir in " + strings.Join(dirs, " ") + "; do\n" +
			"\tcase \":$PATH:\" in *\":$berth_dir:\"*) ;; *) PATH=\"${PATH:+$PATH:}$berth_dir\" ;; esac\n" +
			"done\nunset berth_dir\n"
	}
	return s + "export PATH\n"
}

// shellQuote single-quotes s for a POSIX shell. Inside single quotes
// everything is literal except the quote itself, which ends the quoted part,
// is escaped with a backslash, and starts a new one.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// privateDir makes sure dir exists with mode 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// writeFile replaces path with data atomically (no reader ever sees half a
// file) and sets perm whatever the umask.
func writeFile(path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// appendLineOnce appends line to the file at path unless the file already
// has it, creating the file if needed. The rest of the file is the user's.
func appendLineOnce(path, line string) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for l := range strings.Lines(string(data)) {
		if strings.TrimRight(l, "\r\n") == line {
			return nil
		}
	}
	add := line + "\n"
	if len(data) > 0 && data[len(data)-1] != '\n' {
		add = "\n" + add
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(add); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
