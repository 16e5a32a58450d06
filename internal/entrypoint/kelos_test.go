package entrypoint_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/kelos"
)

// kelosEntrypoint is the Kelos-shaped test image's entrypoint (the podman
// driver's testdata): the unit tests run the very script the image runs.
// Absolute: it runs in the checkout.
var kelosEntrypoint, _ = filepath.Abs(filepath.Join("..", "driver", "podman", "testdata", "kelos", "kelos_entrypoint.sh"))

// kelosSeen is the JSON line the Kelos-shaped entrypoint prints first.
type kelosSeen struct {
	Type         string `json:"type"`
	PromptBytes  int    `json:"prompt_bytes"`
	PromptSHA256 string `json:"prompt_sha256"`
	Args         int    `json:"args"`
	Cwd          string `json:"cwd"`
	Home         string `json:"home"`
	AgentType    string `json:"agent_type"`
	Model        string `json:"model"`
	SetupFile    string `json:"setup_file"`
	UID          int    `json:"uid"`
	GID          int    `json:"gid"`
	Root         string `json:"root"`
	CapEff       string `json:"cap_eff"`
}

// kelosStream checks what a kelos run of the test image streamed to the
// gateway, output: its JSON line first, saying it got task whole as its
// one argument; then its output block, naming commit; on stderr the setup
// banners alone. It returns what the JSON line said.
func kelosStream(t *testing.T, output, task, commit string) kelosSeen {
	t.Helper()
	stdout, stderr := byStream(t, output)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	var seen kelosSeen
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[0], "o ")), &seen); err != nil || seen.Type != "kelos-test" {
		t.Fatalf("the image's first line %.200q: %v", lines[0], err)
	}
	sum := sha256.Sum256([]byte(task))
	if seen.Args != 1 || seen.PromptBytes != len(task) || seen.PromptSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the image got %d arguments, $1 of %d bytes (sha256 %s); want the task alone, %d bytes (sha256 %x)",
			seen.Args, seen.PromptBytes, seen.PromptSHA256, len(task), sum)
	}
	if want := []string{"o " + kelos.OutputsStart, "o commit: " + commit, "o input-tokens: 12", "o a line without a key", "o " + kelos.OutputsEnd}; !slices.Equal(lines[1:], want) {
		t.Errorf("the image's stdout at the gateway after its JSON line: %q, want %q", lines[1:], want)
	}
	if want := "e " + kelos.SetupStart + "\ne " + kelos.SetupDone + "\n"; stderr != want {
		t.Errorf("the image's stderr at the gateway: %q, want the setup banners %q", stderr, want)
	}
	return seen
}

// kelosInMachine prepares a kelos image's in-machine run against g, as
// its pod has it: berth-init in a directory of its own beside
// git-credential-berth (this test binary, see TestMain), a directory on
// no PATH; the variables the gateway gives a kelos run. It returns the
// harness, the name berth-init is called by, and the work directory.
func kelosInMachine(t *testing.T, g *fakeGateway) (*harness, string, string) {
	t.Helper()
	needCommand(t, "bash", "jq", "sha256sum")
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "git-credential-berth")); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{
		"BERTH_SANDBOX_ID":        "sbx_kelos",
		"BERTH_SANDBOX_NAME":      "fix-1",
		"BERTH_SANDBOX_PURPOSE":   "agent",
		"BERTH_RUNNER":            "claude-code",
		"BERTH_RUN_REPORT":        "gateway",
		"BERTH_RUN_CONTRACT":      "kelos",
		"BERTH_REPO":              g.srv.URL + "/git/app.git",
		"BERTH_BRANCH":            "feature",
		"BERTH_BASE_URL":          g.srv.URL,
		"BERTH_API_KEY":           inMachineKey,
		"KELOS_AGENT_TYPE":        "claude-code",
		"KELOS_MODEL":             "claude-sonnet-4-5",
		"KELOS_BASE_BRANCH":       "feature",
		"KELOS_SETUP_COMMAND":     `["sh","-c","echo \"setup ran\" > \"$HOME/setup.txt\""]`,
		"GIT_CONFIG_NOSYSTEM":     "1",
		"BERTH_INIT_TEST_AS_MAIN": "1", // for git-credential-berth
		"GORACE":                  "atexit_sleep_ms=0",
	})
	// The checkout's directory is the pod's volume, not the agent's own
	// (a kubelet's emptyDir is root's, the agent 61100): here another uid
	// than the test's, when the test may give it away.
	work := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(work, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(work, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return h, filepath.Join(dir, "berth-init"), work
}

func (h *harness) kelos(self, work string, args ...string) int {
	h.t.Helper()
	h.stderr.Reset()
	return entrypoint.MainKelos(append([]string{self}, args...), h.env(), work, kelosEntrypoint)
}

// lineTask is a task of n bytes on one line; manyLines one of n bytes on
// many, with quotes, a shell variable, a glob and a multi-byte character
// on each, ending in a character no tool trims.
func lineTask(n int) string { return strings.Repeat("x", n-1) + "." }

func manyLines(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "step %d: greet \"é\" * and leave $HOME alone\n", i)
	}
	s := strings.ToValidUTF8(b.String()[:n-1], "")
	return s + strings.Repeat(".", n-len(s))
}

// TestInMachineKelosRun: berth-init wraps a kelos image's entrypoint
// unchanged. It clones through the gateway with git-credential-berth named
// by its path beside berth-init (the pod puts no PATH of its own), fetches
// the task and gives it whole as the entrypoint's one argument, $1 (64 KiB
// on one line, and a multi-line one at kelos.MaxPrompt), writes no prompt
// file, runs it in the checkout with the pod's environment (its HOME,
// KELOS_*), streams its output (setup banners, the markers) to the gateway
// unchanged, and reports its exit with its commit as a bundle.
func TestInMachineKelosRun(t *testing.T) {
	for _, task := range []string{lineTask(64 << 10), manyLines(kelos.MaxPrompt)} {
		t.Run(fmt.Sprint(len(task)), func(t *testing.T) {
			g := newFakeGateway(t, task)
			h, self, work := kelosInMachine(t, g)
			base := g.branch("feature")
			if code := h.kelos(self, work); code != 0 {
				t.Fatalf("Main = %d, want 0; stderr:\n%s", code, h.stderr.String())
			}
			calls, outputs, exits := g.got()
			if calls != 1 || len(outputs) != 1 || len(exits) != 1 {
				t.Fatalf("the gateway got %d task calls, %d outputs, %d exit reports; want one each; stderr:\n%s", calls, len(outputs), len(exits), h.stderr.String())
			}
			rep := exits[0]
			if rep.ExitCode != 0 || rep.Commit == "" || rep.Commit == base || len(rep.Bundle) == 0 || rep.Error != "" {
				t.Fatalf("exit report %+v; want exit 0, the entrypoint's commit and its bundle; stderr:\n%s", rep, h.stderr.String())
			}
			seen := kelosStream(t, outputs[0], task, rep.Commit)
			for _, c := range []struct{ what, got, want string }{
				{"working directory", seen.Cwd, work}, {"HOME", seen.Home, h.home},
				{"KELOS_AGENT_TYPE", seen.AgentType, "claude-code"}, {"KELOS_MODEL", seen.Model, "claude-sonnet-4-5"},
				{"what the setup command wrote in HOME", seen.SetupFile, "setup ran"},
			} {
				if c.got != c.want {
					t.Errorf("%s of the entrypoint: %q, want %q", c.what, c.got, c.want)
				}
			}
			if at := g.branch("berth/fix-1"); at != "" {
				t.Fatalf("berth-init pushed berth/fix-1 at %s; the machine never pushes", at)
			}
			if landed := g.land(t, rep.Bundle, "berth/fix-1"); landed != rep.Commit {
				t.Errorf("the bundle holds %s, the report says %s", landed, rep.Commit)
			}
			if parent := strings.TrimSpace(gitOut(t, g.bare, "rev-parse", "berth/fix-1^")); parent != base {
				t.Errorf("the landed commit's parent is %s, want the cloned %s (BERTH_BRANCH=feature)", parent, base)
			}
			if tree := gitOut(t, g.bare, "ls-tree", "--name-only", "berth/fix-1"); tree != "FEATURE\nREADME\nkelos.txt\n" {
				t.Errorf("the landed commit holds %q, want the clone's files and kelos.txt", tree)
			}
			if exists(filepath.Join(work, ".berth-prompt.txt")) {
				t.Error("a prompt file was written: a kelos image's task is its $1 alone")
			}
			if got := gitOut(t, work, "config", "--file", filepath.Join(h.home, ".gitconfig"), "--get-regexp", `credential\..*\.helper`); !strings.Contains(got, filepath.Join(filepath.Dir(self), "git-credential-berth")) {
				t.Errorf("~/.gitconfig names the helper %q, want it by its path beside berth-init", got)
			}
			if strings.Contains(h.stderr.String(), inMachineKey) || strings.Contains(h.stderr.String(), task[:64]) {
				t.Errorf("berth-init's log shows the key or the task:\n%.2000s", h.stderr.String())
			}
		})
	}
}

// TestInMachineKelosRunFails: a kelos image whose setup command fails
// exits 1 after its FAILED banner; berth-init streams the banners, reports
// that exit with no work, and exits with it.
func TestInMachineKelosRunFails(t *testing.T) {
	g := newFakeGateway(t, testPrompt)
	h, self, work := kelosInMachine(t, g)
	h.vars["KELOS_SETUP_COMMAND"] = `["false"]`
	if code := h.kelos(self, work); code != 1 {
		t.Fatalf("Main = %d, want the entrypoint's 1; stderr:\n%s", code, h.stderr.String())
	}
	_, outputs, exits := g.got()
	if len(exits) != 1 || exits[0].ExitCode != 1 || exits[0].Bundle != nil || exits[0].Commit != "" {
		t.Fatalf("exit reports %+v; want one, exit 1, no work", exits)
	}
	if len(outputs) != 1 {
		t.Fatalf("the gateway got %d outputs, want 1", len(outputs))
	}
	if _, stderr := byStream(t, outputs[0]); stderr != "e "+kelos.SetupStart+"\ne "+kelos.SetupFailed+"\n" {
		t.Errorf("the entrypoint's stderr at the gateway: %q, want the START and FAILED banners", stderr)
	}
}

// TestInMachineKelosRunRefuses: what a kelos image's in-machine run cannot
// do is refused before the image runs, saying why: a contract berth-init
// does not know, the kelos contract outside an in-machine run, arguments
// beside the task, no entrypoint, and git-credential-berth not beside
// berth-init (the clone fails, naming it; the gateway hears of it).
func TestInMachineKelosRunRefuses(t *testing.T) {
	tests := []struct {
		name   string
		set    map[string]string
		args   []string
		noHelp bool   // berth-init is called from a directory without git-credential-berth
		entry  string // the entrypoint, when not the test image's
		code   int
		want   string
		report bool // the gateway is told
	}{
		{name: "bogus contract", set: map[string]string{"BERTH_RUN_CONTRACT": "docker"}, code: 64,
			want: `BERTH_RUN_CONTRACT is "docker", want kelos`},
		{name: "not in-machine", set: map[string]string{"BERTH_RUN_REPORT": ""}, code: 64,
			want: "BERTH_RUN_CONTRACT=kelos is for an in-machine run (BERTH_RUN_REPORT=gateway)"},
		{name: "arguments", args: []string{"-p"}, code: 64, report: true,
			want: "a kelos image's run takes no arguments (it was given 1)"},
		{name: "no entrypoint", entry: "/nonexistent/kelos_entrypoint.sh", code: 127, report: true,
			want: "the kelos image's entrypoint: /nonexistent/kelos_entrypoint.sh is not an executable file"},
		{name: "no helper", noHelp: true, code: 1, report: true,
			want: "configure git: git-credential-berth is not beside berth-init"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t, testPrompt)
			h, self, work := kelosInMachine(t, g)
			for k, v := range tt.set {
				h.vars[k] = v
			}
			if tt.noHelp {
				self = filepath.Join(t.TempDir(), "berth-init")
			}
			entry := cmp.Or(tt.entry, kelosEntrypoint)
			h.stderr.Reset()
			if code := entrypoint.MainKelos(append([]string{self}, tt.args...), h.env(), work, entry); code != tt.code {
				t.Errorf("Main = %d, want %d; stderr:\n%s", code, tt.code, h.stderr.String())
			}
			if !strings.Contains(h.stderr.String(), "berth-init: "+tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, h.stderr.String())
			}
			calls, outputs, exits := g.got()
			if len(outputs) != 0 || exists(filepath.Join(work, "kelos.txt")) || calls != 0 {
				t.Errorf("the entrypoint ran, or the task was fetched (%d outputs, %d task calls)", len(outputs), calls)
			}
			if tt.report != (len(exits) == 1) || (tt.report && (exits[0].ExitCode != tt.code || !strings.Contains(exits[0].Error, tt.want))) {
				t.Errorf("exit reports %+v; want the gateway told: %v", exits, tt.report)
			}
		})
	}
}

// TestPodmanKelosInMachine runs the Kelos-shaped test image (the podman
// driver's testdata, FROM the sandbox image) unchanged as its pod on
// Kubernetes runs it: this tree's berth-init and git-credential-berth in a
// read-only directory of their own (/berth, where the pod's init container
// copies them), berth-init the command, as the interface's uid 61100 in
// /workspace/repo with HOME /home/agent, the three empty directories of
// the host's and the root read-only, every capability dropped and no new privileges; the gateway
// is the stand-in, on loopback (the container shares the host's network).
// The image gets its task as $1, works in the clone, and its banners,
// markers, exit and commit reach the gateway. Gated like TestPodmanSandbox.
func TestPodmanKelosInMachine(t *testing.T) {
	usePodmanRoot(t)
	needCommand(t, "podman", "go")
	image := "localhost/berth-test-kelos-" + strings.ToLower(testName()[len("berth-test-"):]) + ":latest"
	dir := filepath.Dir(kelosEntrypoint)
	if out, err := podman(t, "build", "--pull=never", "--network", "none", "--quiet", "--tag", image, "--file", filepath.Join(dir, "Containerfile"), dir); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { podman(t, "rmi", "--force", image) })
	bin := t.TempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, "berth-init"), "berth.dev/berth/cmd/berth-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build berth-init: %v\n%s", err, out)
	}
	if err := os.Symlink("berth-init", filepath.Join(bin, "git-credential-berth")); err != nil {
		t.Fatal(err)
	}

	task := manyLines(kelos.MaxPrompt)
	g := newFakeGateway(t, task)
	base := g.branch("feature")
	vars := map[string]string{
		"BERTH_SANDBOX_ID": "sbx_kelospod", "BERTH_SANDBOX_NAME": "fix-1", "BERTH_SANDBOX_PURPOSE": "agent",
		"BERTH_RUNNER": "claude-code", "BERTH_RUN_REPORT": "gateway", "BERTH_RUN_CONTRACT": "kelos",
		"BERTH_REPO": g.srv.URL + "/git/app.git", "BERTH_BRANCH": "feature", "BERTH_BASE_URL": g.srv.URL, "BERTH_API_KEY": inMachineKey,
		"HOME": kelos.Home, "KELOS_AGENT_TYPE": "claude-code", "KELOS_MODEL": "claude-sonnet-4-5", "KELOS_BASE_BRANCH": "feature",
		"KELOS_SETUP_COMMAND": `["sh","-c","echo \"setup ran\" > \"$HOME/setup.txt\""]`,
	}
	name := testName()
	args := []string{"run", "--name", name, "--network", "host", "--user", "61100:61100", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "256",
		"--volume", bin + ":/berth:ro", "--workdir", kelos.WorkDir, "--entrypoint", "/berth/berth-init"}
	// The pod's emptyDirs: directories of the host's, 0777 (as a kubelet
	// makes them), mounted over whatever the image has there.
	for _, at := range []string{kelos.WorkDir, "/tmp", kelos.Home} {
		d := t.TempDir()
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--volume", d+":"+at)
	}
	env := os.Environ()
	for k, v := range vars {
		args = append(args, "--env", k) // by name: values travel in podman's environment
		env = append(env, k+"="+v)
	}
	t.Cleanup(func() { podman(t, "rm", "--force", "--time", "0", name) })
	run := exec.Command("podman", append(args, image)...)
	run.Env = env
	out, err := run.CombinedOutput()
	if code := exitCode(err); code != 0 {
		t.Fatalf("the pod's berth-init exited %d (%v):\n%s", code, err, out)
	}

	calls, outputs, exits := g.got()
	if calls != 1 || len(outputs) != 1 || len(exits) != 1 {
		t.Fatalf("the gateway got %d task calls, %d outputs, %d exit reports; want one each; the container printed:\n%s", calls, len(outputs), len(exits), out)
	}
	rep := exits[0]
	if rep.ExitCode != 0 || rep.Commit == "" || rep.Commit == base || rep.Error != "" {
		t.Fatalf("exit report %+v; want exit 0 and the image's commit; the container printed:\n%s", rep, out)
	}
	seen := kelosStream(t, outputs[0], task, rep.Commit)
	for _, c := range []struct{ what, got, want string }{
		{"working directory", seen.Cwd, kelos.WorkDir}, {"HOME", seen.Home, kelos.Home},
		{"what the setup command wrote in HOME", seen.SetupFile, "setup ran"},
		{"the root file system", seen.Root, "ro"}, {"effective capabilities", seen.CapEff, "0000000000000000"},
		{"uid:gid", fmt.Sprintf("%d:%d", seen.UID, seen.GID), fmt.Sprintf("%d:%d", kelos.UID, kelos.UID)},
	} {
		if c.got != c.want {
			t.Errorf("%s in the container: %q, want %q", c.what, c.got, c.want)
		}
	}
	if landed := g.land(t, rep.Bundle, "berth/fix-1"); landed != rep.Commit {
		t.Errorf("the bundle holds %s, the report says %s", landed, rep.Commit)
	}
	// The pod's log (berth-init's own stdout and stderr) has the image's
	// output unchanged, and berth-init's lines without the key.
	if log := string(out); !strings.Contains(log, kelos.OutputsStart+"\ncommit: "+rep.Commit) || !strings.Contains(log, "berth-init: handing the gateway berth/fix-1 at "+rep.Commit) || strings.Contains(log, inMachineKey) {
		t.Errorf("the container's log:\n%.3000s", log)
	}
}
