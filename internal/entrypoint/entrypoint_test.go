package entrypoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/entrypoint"
)

// errExecStub is what the tests' Exec returns after recording the call: a
// real exec never returns, so Main reports a failure (1) after a "successful"
// start; the recorded call is what the tests check.
var errExecStub = errors.New("exec recorded by the test")

type execCall struct {
	path string
	argv []string
	envv []string
}

// harness runs entrypoint.Main with a fake environment, a temporary HOME,
// real setup commands (git, ssh-keygen) and a recording Exec.
type harness struct {
	t      *testing.T
	home   string
	vars   map[string]string
	stderr bytes.Buffer
	stdout bytes.Buffer
	runs   [][]string
	envs   [][]string // the environment of each run
	execs  []execCall
	waited int
	// stdin is what SetStdin was handed, read to its end; nil until then.
	// Env.Stdin reads it afterwards, as fd 0 would be.
	stdin *bytes.Reader
}

// Read reads the standard input SetStdin put in place.
func (h *harness) Read(p []byte) (int, error) {
	if h.stdin == nil {
		return 0, io.EOF
	}
	return h.stdin.Read(p)
}

func newHarness(t *testing.T, vars map[string]string) *harness {
	t.Helper()
	h := &harness{t: t, home: t.TempDir(), vars: map[string]string{}}
	h.vars["HOME"] = h.home
	h.vars["PATH"] = os.Getenv("PATH")
	maps.Copy(h.vars, vars)
	return h
}

func (h *harness) env() entrypoint.Env {
	return entrypoint.Env{
		Getenv: func(k string) string { return h.vars[k] },
		Environ: func() []string {
			var env []string
			for _, k := range slices.Sorted(maps.Keys(h.vars)) {
				env = append(env, k+"="+h.vars[k])
			}
			return env
		},
		Stdin:  h,
		Stdout: &h.stdout,
		Stderr: &h.stderr,
		Run: func(c *exec.Cmd) error {
			h.runs = append(h.runs, c.Args)
			h.envs = append(h.envs, c.Env)
			return c.Run()
		},
		Exec: func(path string, argv, envv []string) error {
			h.execs = append(h.execs, execCall{path, argv, envv})
			return errExecStub
		},
		SetStdin: func(f *os.File) error {
			// Read through a second descriptor: f's offset is what the
			// agent starts reading at, and must stay at the start.
			b, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
			if err != nil {
				return err
			}
			if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
				return fmt.Errorf("stdin handed over at offset %d, %v; want 0", off, err)
			}
			h.stdin = bytes.NewReader(b)
			return nil
		},
		WaitForStop: func() { h.waited++ },
	}
}

func (h *harness) main(args ...string) int {
	h.t.Helper()
	h.stderr.Reset()
	return entrypoint.Main(append([]string{"/usr/local/bin/berth-init"}, args...), h.env())
}

func (h *harness) read(rel string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.home, rel))
	if err != nil {
		h.t.Fatalf("read ~/%s: %v", rel, err)
	}
	return string(b)
}

func (h *harness) mode(rel string) fs.FileMode {
	h.t.Helper()
	fi, err := os.Stat(filepath.Join(h.home, rel))
	if err != nil {
		h.t.Fatalf("stat ~/%s: %v", rel, err)
	}
	return fi.Mode().Perm()
}

func needCommand(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed", n)
		}
	}
}

func engineerVars() map[string]string {
	return map[string]string{
		"BERTH_SANDBOX_ID":      "sbx_1",
		"BERTH_SANDBOX_NAME":    "dev",
		"BERTH_SANDBOX_PURPOSE": "engineer",
		"BERTH_AUTHORIZED_KEYS": "ssh-ed25519 AAAAone a@x\r\n\n  ssh-ed25519 AAAAtwo b@y\n",
		"BERTH_API_KEY":         "berth_sk_secret_value",
		"BERTH_BASE_URL":        "http://host.containers.internal:8080",
		"BERTH_TASK":            "fix the build",
		"BERTH_GIT_TOKEN":       "glpat-secret-token",
		"TERM":                  "xterm",
		"HOSTNAME":              "dev",
	}
}

func TestEngineerStart(t *testing.T) {
	needCommand(t, "ssh-keygen")
	h := newHarness(t, engineerVars())
	if code := h.main(); code != 1 {
		t.Fatalf("Main = %d, want 1 (exec stub); stderr:\n%s", code, h.stderr.String())
	}

	if len(h.execs) != 1 {
		t.Fatalf("exec calls = %d, want 1 (sshd)", len(h.execs))
	}
	conf := filepath.Join(h.home, ".sshd", "sshd_config")
	got := h.execs[0]
	if diff := cmp.Diff([]string{"/usr/sbin/sshd", "-D", "-e", "-f", conf}, got.argv); got.path != "/usr/sbin/sshd" || diff != "" {
		t.Errorf("exec %s argv (-want +got):\n%s", got.path, diff)
	}
	for _, kv := range got.envv {
		if strings.HasPrefix(kv, "BERTH_GIT_TOKEN=") || strings.HasPrefix(kv, "BERTH_TASK=") {
			t.Errorf("sshd's environment has start-only %s", kv)
		}
	}

	if got, want := h.read(".ssh/authorized_keys"), "ssh-ed25519 AAAAone a@x\nssh-ed25519 AAAAtwo b@y\n"; got != want {
		t.Errorf("authorized_keys = %q, want %q", got, want)
	}
	for rel, want := range map[string]fs.FileMode{
		".ssh": 0o700, ".ssh/authorized_keys": 0o600, ".ssh/environment": 0o600,
		".berth": 0o700, ".berth/env.sh": 0o600, ".sshd": 0o700, ".sshd/host_ed25519": 0o600,
	} {
		if got := h.mode(rel); got != want {
			t.Errorf("mode of ~/%s = %v, want %v", rel, got, want)
		}
	}
	sshdConf := h.read(".sshd/sshd_config")
	for _, line := range []string{
		"Port 2222", "HostKey " + filepath.Join(h.home, ".sshd/host_ed25519"),
		"PidFile " + filepath.Join(h.home, ".sshd/sshd.pid"), "UsePAM no",
		"PasswordAuthentication no", "PubkeyAuthentication yes",
		"AuthorizedKeysFile .ssh/authorized_keys", "StrictModes yes",
		"PermitUserEnvironment yes", "AllowTcpForwarding yes", "AllowStreamLocalForwarding yes",
		"GatewayPorts no", "AllowAgentForwarding no", "X11Forwarding no", "PermitTunnel no",
		"PrintMotd no", "Subsystem sftp internal-sftp",
	} {
		if !slices.Contains(strings.Split(sshdConf, "\n"), line) {
			t.Errorf("sshd_config lacks %q:\n%s", line, sshdConf)
		}
	}
	for _, secret := range []string{"berth_sk_secret_value", "glpat-secret-token"} {
		if strings.Contains(h.stderr.String(), secret) {
			t.Errorf("stderr shows a secret value %q:\n%s", secret, h.stderr.String())
		}
	}
	if h.stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing (it belongs to the agent)", h.stdout.String())
	}
}

func TestSessionEnvironment(t *testing.T) {
	needCommand(t, "ssh-keygen")
	tests := []struct {
		name, value string
		want        bool
	}{
		{"BERTH_API_KEY", "berth_sk_1", true},
		{"BERTH_SANDBOX_NAME", "dev", true},
		{"BERTH_GIT_USERNAME", "x-access-token", true},
		{"CALLER_ADDED", "value with spaces", true},
		{"EMPTY", "", true},
		{"TERM", "xterm", false},
		{"HOSTNAME", "dev", false},
		{"PWD", "/", false},
		{"SHLVL", "1", false},
		{"BERTH_TASK", "do it", false},
		{"BERTH_GIT_TOKEN", "glpat-1", false},
		{"BERTH_PI_CONFIG", "{}", false},
		{"BERTH_PI_SETTINGS", "{}", false},
		{"MULTILINE", "one\ntwo", false},
		{"CARRIAGE", "one\rtwo", false},
		{"not-a-name", "x", false},
	}
	vars := engineerVars()
	for _, tt := range tests {
		vars[tt.name] = tt.value
	}
	h := newHarness(t, vars)
	h.main()
	sshEnv := strings.Split(h.read(".ssh/environment"), "\n")
	shEnv := strings.Split(h.read(".berth/env.sh"), "\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := tt.name + "=" + tt.value
			if got := slices.Contains(sshEnv, line); got != tt.want {
				t.Errorf("~/.ssh/environment has %q: %v, want %v", line, got, tt.want)
			}
			prefix := "export " + tt.name + "="
			got := slices.ContainsFunc(shEnv, func(l string) bool { return strings.HasPrefix(l, prefix) })
			if got != tt.want {
				t.Errorf("~/.berth/env.sh exports %s: %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	// PATH is kept; HOME never (ssh sets it) and neither are keys.
	for _, l := range sshEnv {
		if strings.HasPrefix(l, "HOME=") || strings.HasPrefix(l, "BERTH_AUTHORIZED_KEYS=") {
			t.Errorf("~/.ssh/environment has %q", l)
		}
	}
	if want := "PATH=" + filepath.Join(h.home, ".local/bin") + ":" + os.Getenv("PATH"); !slices.Contains(sshEnv, want) {
		t.Errorf("~/.ssh/environment lacks %q", want)
	}
}

// TestSessionPathLocalBin checks that ssh sessions find what the user
// installed into ~/.local/bin first, by name, whether the directory exists
// at start or not, and without a second entry when the image's PATH had it.
func TestSessionPathLocalBin(t *testing.T) {
	for _, tt := range []struct{ name, path, rest string }{
		{"image PATH without it", "/usr/local/bin:/usr/bin", "/usr/local/bin:/usr/bin"},
		{"image PATH with it last", "/usr/bin:HOME/.local/bin", "/usr/bin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, engineerVars())
			localBin := filepath.Join(h.home, ".local/bin")
			h.vars["PATH"] = strings.ReplaceAll(tt.path, "HOME", h.home)
			h.main()
			want := "PATH=" + localBin + ":" + tt.rest
			if env := strings.Split(h.read(".ssh/environment"), "\n"); !slices.Contains(env, want) {
				t.Errorf("~/.ssh/environment:\n%s\nwant the line %q", h.read(".ssh/environment"), want)
			}
		})
	}
}

// TestEnvShQuoting sources the rendered env.sh with a real POSIX shell and
// checks every value comes back byte for byte.
func TestEnvShQuoting(t *testing.T) {
	needCommand(t, "sh")
	values := map[string]string{
		"Q_SINGLE":    `it's`,
		"Q_DOUBLE":    `say "hi"`,
		"Q_DOLLAR":    `$HOME and ${PATH} and $(id) and ` + "`id`",
		"Q_SPACES":    "  lead and trail  ",
		"Q_BACKSLASH": `C:\dir\ and \'`,
		"Q_MIXED":     `'"$\` + "\t;&|*?",
		"Q_EMPTY":     "",
		"Q_UNICODE":   "grüße ✓",
	}
	vars := map[string]string{"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "agent"}
	maps.Copy(vars, values)
	h := newHarness(t, vars)
	if code := h.main(); code != 143 {
		t.Fatalf("Main = %d, want 143 (an agent without a command waits for its stop); stderr:\n%s", code, h.stderr.String())
	}
	names := slices.Sorted(maps.Keys(values))
	script := `. "$1"; shift; for n; do eval "printf '%s\0' \"\$$n\""; done`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh", filepath.Join(h.home, ".berth/env.sh")}, names...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sourcing env.sh: %v\n%s", err, h.read(".berth/env.sh"))
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(names) {
		t.Fatalf("sourcing env.sh printed %d values, want %d: %q", len(got), len(names), got)
	}
	for i, n := range names {
		if got[i] != values[n] {
			t.Errorf("$%s after sourcing env.sh = %q, want %q", n, got[i], values[n])
		}
	}
}

// TestEnvShPath checks that sourcing env.sh keeps the shell's PATH entries
// (what ~/.profile added), puts ~/.local/bin first when it is missing and
// adds the sandbox's missing ones, once.
func TestEnvShPath(t *testing.T) {
	needCommand(t, "sh")
	h := newHarness(t, map[string]string{
		"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "agent",
	})
	h.vars["PATH"] = "/usr/local/bin:/usr/bin::/opt/it's/bin"
	h.main()
	envSh := filepath.Join(h.home, ".berth/env.sh")
	// ~/.local/bin comes first when the shell lacks it, and stays where
	// a startup file put it.
	local := filepath.Join(h.home, ".local/bin")
	tests := []struct{ before, want string }{
		{local + ":/usr/bin", local + ":/usr/bin:/usr/local/bin:/opt/it's/bin"},
		{"/usr/bin:" + local, "/usr/bin:" + local + ":/usr/local/bin:/opt/it's/bin"},
		{"/usr/local/bin:/usr/bin::/opt/it's/bin", local + ":/usr/local/bin:/usr/bin::/opt/it's/bin"},
		{"", local + ":/usr/local/bin:/usr/bin:/opt/it's/bin"},
	}
	for _, tt := range tests {
		// Sourced twice: a nested shell must not grow PATH.
		cmd := exec.Command("/bin/sh", "-c", `PATH="$1"; . "$2"; . "$2"; printf %s "$PATH"`, "sh", tt.before, envSh)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sourcing env.sh: %v\n%s", err, h.read(".berth/env.sh"))
		}
		if string(out) != tt.want {
			t.Errorf("PATH %q after sourcing env.sh = %q, want %q", tt.before, out, tt.want)
		}
	}
}

// snapshot maps each file under dir to its mode and contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files[rel] = fi.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		files[rel] = fi.Mode().String() + " " + string(b)
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return files
}

func TestIdempotent(t *testing.T) {
	needCommand(t, "ssh-keygen", "git")
	h := newHarness(t, engineerVars())
	h.vars["BERTH_GIT_AUTHOR_NAME"] = "Ada Lovelace"
	h.vars["BERTH_GIT_AUTHOR_EMAIL"] = "ada@example.com"
	userRC := "# my own settings\nalias ll='ls -l'" // no final newline
	if err := os.WriteFile(filepath.Join(h.home, ".bashrc"), []byte(userRC), 0o644); err != nil {
		t.Fatal(err)
	}

	h.main()
	first := snapshot(t, h.home)
	h.main()
	second := snapshot(t, h.home)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("HOME after the second start differs (-first +second):\n%s", diff)
	}
	for _, f := range []string{".profile", ".bashrc"} {
		if n := strings.Count(h.read(f), "# berth: sandbox environment"); n != 1 {
			t.Errorf("~/%s sources env.sh %d times, want once:\n%s", f, n, h.read(f))
		}
	}
	if rc := h.read(".bashrc"); !strings.HasPrefix(rc, userRC+"\n") {
		t.Errorf("~/.bashrc lost the user's content:\n%s", rc)
	}
	keygens := 0
	for _, argv := range h.runs {
		if argv[0] == "ssh-keygen" {
			keygens++
		}
	}
	if keygens != 1 {
		t.Errorf("ssh-keygen ran %d times over two starts, want once", keygens)
	}
}

// TestHostKeyPrivateOnResume: a HOME volume that comes back with its
// files group-read-write, as a kubelet's fsGroup change leaves them, still
// gives sshd a host key it accepts (only the owner may read it).
func TestHostKeyPrivateOnResume(t *testing.T) {
	needCommand(t, "ssh-keygen")
	h := newHarness(t, engineerVars())
	h.main()
	key := filepath.Join(h.home, ".sshd", "host_ed25519")
	if err := os.Chmod(key, 0o660); err != nil {
		t.Fatal(err)
	}
	h.main()
	fi, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("host key mode %o after a start, want 600", fi.Mode().Perm())
	}
}

func TestChangedEnvironmentOnResume(t *testing.T) {
	needCommand(t, "ssh-keygen")
	h := newHarness(t, engineerVars())
	h.main()
	h.vars["BERTH_API_KEY"] = "berth_sk_new_key"
	h.vars["BERTH_AUTHORIZED_KEYS"] = "ssh-ed25519 AAAAthree c@z"
	h.main()
	if env := h.read(".ssh/environment"); !strings.Contains(env, "BERTH_API_KEY=berth_sk_new_key\n") || strings.Contains(env, "berth_sk_secret_value") {
		t.Errorf("~/.ssh/environment after a resume with a new key:\n%s", env)
	}
	if got, want := h.read(".ssh/authorized_keys"), "ssh-ed25519 AAAAthree c@z\n"; got != want {
		t.Errorf("authorized_keys = %q, want %q", got, want)
	}
}

func TestMissingVariables(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want []string // in stderr
	}{
		{"nothing", map[string]string{}, []string{"BERTH_SANDBOX_ID is not set", "BERTH_SANDBOX_PURPOSE is not set"}},
		{"no id", map[string]string{"BERTH_SANDBOX_PURPOSE": "agent"}, []string{"BERTH_SANDBOX_ID is not set"}},
		{"no purpose", map[string]string{"BERTH_SANDBOX_ID": "sbx_1"}, []string{"BERTH_SANDBOX_PURPOSE is not set"}},
		{"bad purpose", map[string]string{"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "pet"}, []string{`BERTH_SANDBOX_PURPOSE is "pet"`}},
		{"engineer without keys", map[string]string{"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "engineer", "BERTH_AUTHORIZED_KEYS": "\n"}, []string{"BERTH_AUTHORIZED_KEYS is not set"}},
		{"relative HOME", map[string]string{"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "agent", "HOME": "home"}, []string{`HOME is "home"`}},
		{"unnamable repo", map[string]string{"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "agent", "BERTH_REPO": "https://host/"}, []string{"BERTH_REPO: cannot name a checkout directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.vars)
			if code := h.main("true"); code != 64 {
				t.Errorf("Main = %d, want 64", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(h.stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, h.stderr.String())
				}
			}
			if entries, _ := os.ReadDir(h.home); len(entries) != 0 {
				t.Errorf("HOME has %d entries, want none written before validation passes", len(entries))
			}
			if len(h.execs) != 0 || len(h.runs) != 0 {
				t.Errorf("ran %v and exec'd %v, want nothing", h.runs, h.execs)
			}
		})
	}
}

func TestAgent(t *testing.T) {
	needCommand(t, "true")
	vars := map[string]string{"BERTH_SANDBOX_ID": "sbx_2", "BERTH_SANDBOX_PURPOSE": "agent", "BERTH_TASK": "fix it"}

	t.Run("no command", func(t *testing.T) {
		h := newHarness(t, vars)
		if code := h.main(); code != 143 || h.waited != 1 {
			t.Errorf("Main = %d after %d waits, want 143 after waiting for the stop once", code, h.waited)
		}
		if !strings.Contains(h.stderr.String(), "no runner is configured") {
			t.Errorf("stderr = %q, want it to say no runner is configured", h.stderr.String())
		}
		if len(h.execs) != 0 {
			t.Errorf("exec'd %v, want nothing", h.execs)
		}
	})

	t.Run("command", func(t *testing.T) {
		h := newHarness(t, vars)
		if code := h.main("true", "--flag", "a b"); code != 0 {
			t.Fatalf("Main = %d, want 0 (the agent exited 0); stderr:\n%s", code, h.stderr.String())
		}
		if len(h.execs) != 0 || len(h.runs) == 0 {
			t.Fatalf("exec calls = %d, runs = %d; want the agent run as a child", len(h.execs), len(h.runs))
		}
		want, _ := exec.LookPath("true")
		got := execCall{path: h.runs[len(h.runs)-1][0], argv: h.runs[len(h.runs)-1], envv: h.envs[len(h.envs)-1]}
		if diff := cmp.Diff([]string{want, "--flag", "a b"}, got.argv); diff != "" {
			t.Errorf("agent argv (-want +got):\n%s", diff)
		}
		// The agent gets the whole environment, start-only values included.
		if !slices.Contains(got.envv, "BERTH_TASK=fix it") {
			t.Errorf("agent environment lacks BERTH_TASK: %q", got.envv)
		}
		if _, err := os.Stat(filepath.Join(h.home, ".sshd")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("~/.sshd exists in an agent sandbox (err %v)", err)
		}
		if h.read(".ssh/environment") == "" {
			t.Errorf("~/.ssh/environment is empty")
		}
	})

	t.Run("unknown command", func(t *testing.T) {
		h := newHarness(t, vars)
		if code := h.main("no-such-runner-xyz"); code != 127 {
			t.Errorf("Main = %d, want 127", code)
		}
	})
}

// TestPiFilesRewrittenOnlyWhileUnchanged: the gateway's rendering of Pi's
// files is written at every start until the user changes a file; from then
// on theirs stays, and the new rendering waits beside it (SPEC S14).
func TestPiFilesRewrittenOnlyWhileUnchanged(t *testing.T) {
	needCommand(t, "ssh-keygen")
	h := newHarness(t, engineerVars())
	h.vars["BERTH_PI_CONFIG"] = `{"providers":{"berth":{"models":[{"id":"a"}]}}}`
	h.vars["BERTH_PI_SETTINGS"] = `{"defaultProvider":"berth"}`
	h.main()
	if got := h.read(".pi/agent/models.json"); got != h.vars["BERTH_PI_CONFIG"] {
		t.Fatalf("models.json = %q", got)
	}
	if m := h.mode(".pi/agent/models.json"); m != 0o600 {
		t.Errorf("models.json mode %v, want 0600", m)
	}

	// A new rendering replaces a file nobody changed.
	h.vars["BERTH_PI_CONFIG"] = `{"providers":{"berth":{"models":[{"id":"a"},{"id":"b"}]}}}`
	h.main()
	if got := h.read(".pi/agent/models.json"); got != h.vars["BERTH_PI_CONFIG"] {
		t.Errorf("an unchanged models.json was not rewritten: %q", got)
	}

	// Once the user edits it, it is theirs.
	mine := `{"providers":{"mine":{}}}`
	if err := os.WriteFile(filepath.Join(h.home, ".pi/agent/models.json"), []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	h.vars["BERTH_PI_CONFIG"] = `{"providers":{"berth":{"models":[{"id":"c"}]}}}`
	h.main()
	if got := h.read(".pi/agent/models.json"); got != mine {
		t.Errorf("the user's models.json was overwritten: %q", got)
	}
	if got := h.read(".pi/agent/models.json.berth"); got != h.vars["BERTH_PI_CONFIG"] {
		t.Errorf("the gateway's rendering is not beside it: %q", got)
	}
	if got := h.read(".pi/agent/settings.json"); got != h.vars["BERTH_PI_SETTINGS"] {
		t.Errorf("settings.json, unchanged, = %q", got)
	}
}

// TestRefreshHome: in a fork, berth-init --berth-refresh-home rewrites the
// files of HOME that name the sandbox and its key from the environment it
// is run with, and exits 0 without starting anything (no sshd, no setup).
func TestRefreshHome(t *testing.T) {
	needCommand(t, "ssh-keygen")
	h := newHarness(t, engineerVars())
	h.main() // the source's start
	execs, runs := len(h.execs), len(h.runs)
	h.vars["BERTH_SANDBOX_ID"] = "sbx_2"
	h.vars["BERTH_SANDBOX_NAME"] = "copy"
	h.vars["BERTH_API_KEY"] = "berth_sk_fork_key"
	if code := h.main(entrypoint.RefreshHomeArg); code != 0 {
		t.Fatalf("berth-init %s exited %d: %s", entrypoint.RefreshHomeArg, code, h.stderr.String())
	}
	if len(h.execs) != execs || len(h.runs) != runs {
		t.Errorf("the refresh ran %v and exec'd %v; want nothing started", h.runs[runs:], h.execs[execs:])
	}
	for _, f := range []string{".ssh/environment", ".berth/env.sh"} {
		got := h.read(f)
		for _, want := range []string{"sbx_2", "copy", "berth_sk_fork_key"} {
			if !strings.Contains(got, want) {
				t.Errorf("~/%s after the refresh lacks %q:\n%s", f, want, got)
			}
		}
		if strings.Contains(got, "berth_sk_secret_value") || strings.Contains(got, "sbx_1") {
			t.Errorf("~/%s after the refresh still names the source:\n%s", f, got)
		}
	}
	delete(h.vars, "BERTH_SANDBOX_ID")
	if code := h.main(entrypoint.RefreshHomeArg); code == 0 {
		t.Error("a refresh without the sandbox's id exited 0")
	}
}
