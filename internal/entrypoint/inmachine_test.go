package entrypoint_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/runner"
)

const inMachineKey = "berth_sk_inmachine_secret"

// exitReport is the body of POST /sandbox/v1/run/exit, less the verdict
// (verdictReport has it).
type exitReport struct {
	ExitCode int    `json:"exit_code"`
	Commit   string `json:"commit"`
	Bundle   []byte `json:"bundle"`
	Error    string `json:"error"`
}

// verdictReport is the verdict part of an exit report.
type verdictReport struct {
	Verdict      []byte `json:"verdict"`
	VerdictFile  string `json:"verdict_file"`
	VerdictError string `json:"verdict_error"`
}

// fakeGateway plays the gateway of an in-machine run: the run routes,
// which check the sandbox's key and record what came, and the git
// endpoint, git http-backend over the bare repository, behind the key as
// the Basic auth password. Anything else fails the test; it serves the
// routes at api's paths, which berth-init repeats. Like the gateway, its
// git endpoint refuses every push of the run's key: the machine never
// pushes.
type fakeGateway struct {
	t    *testing.T
	srv  *httptest.Server
	bare string
	task string
	// breakOutput is what the first POST /sandbox/v1/run/output gets:
	// "" (served), "500" or "close" (the connection is dropped).
	breakOutput string

	mu          sync.Mutex
	taskCalls   int
	outputs     []string // the body of each POST /sandbox/v1/run/output
	exits       []exitReport
	verdictsGot []verdictReport // the verdict part of each exit report
}

func newFakeGateway(t *testing.T, task string) *fakeGateway {
	t.Helper()
	needCommand(t, "git", "sh")
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGateway{t: t, bare: bareRepo(t), task: task}
	backend := &cgi.Handler{
		Path: gitPath, Args: []string{"http-backend"}, Root: "/git",
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(g.bare), "GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=berth", // lets receive-pack in
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + filepath.Dir(g.bare),
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.RunTaskPath, g.authorized(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.taskCalls++
		g.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, g.task)
	}))
	mux.HandleFunc("POST "+api.RunOutputPath, g.authorized(g.output))
	mux.HandleFunc("POST "+api.RunExitPath, g.authorized(func(w http.ResponseWriter, r *http.Request) {
		var rep struct {
			exitReport
			verdictReport
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			t.Errorf("exit report: %v", err)
		}
		g.mu.Lock()
		g.exits = append(g.exits, rep.exitReport)
		g.verdictsGot = append(g.verdictsGot, rep.verdictReport)
		g.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{}`)
	}))
	mux.HandleFunc("/git/", func(w http.ResponseWriter, r *http.Request) {
		if _, pw, ok := r.BasicAuth(); !ok || pw != inMachineKey {
			w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
			http.Error(w, "berth: the sandbox's own key, please", http.StatusUnauthorized)
			return
		}
		if strings.Contains(r.URL.RawQuery+r.URL.Path, "git-receive-pack") {
			t.Errorf("berth-init pushed: %s %s", r.Method, r.URL)
			http.Error(w, "berth: the host pushes an agent's work after a clean exit", http.StatusForbidden)
			return
		}
		backend.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected call %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

// authorized checks the sandbox's key as the gateway does.
func (g *fakeGateway) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+inMachineKey {
			g.t.Errorf("%s %s with Authorization %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"code": "unauthenticated", "message": "who are you"}`)
			return
		}
		h(w, r)
	}
}

func (g *fakeGateway) output(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	first := len(g.outputs) == 0
	g.mu.Unlock()
	if first && g.breakOutput == "close" {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			g.t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
		g.mu.Lock()
		g.outputs = append(g.outputs, "(dropped)")
		g.mu.Unlock()
		return
	}
	if first && g.breakOutput == "500" {
		g.mu.Lock()
		g.outputs = append(g.outputs, "(refused)")
		g.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"code": "internal", "message": "try again"}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		g.t.Errorf("read the output: %v", err)
	}
	g.mu.Lock()
	g.outputs = append(g.outputs, string(body))
	g.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// got returns what the run routes received: the number of task calls,
// the outputs and the exit reports.
func (g *fakeGateway) got() (int, []string, []exitReport) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taskCalls, slices.Clone(g.outputs), slices.Clone(g.exits)
}

// verdicts returns the verdict part of each exit report.
func (g *fakeGateway) verdicts() []verdictReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.verdictsGot)
}

// land takes the bundle of an exit report into the bare repository as
// refs/heads/<name>, as the gateway does after a clean run, and returns
// where it is.
func (g *fakeGateway) land(t *testing.T, bundle []byte, name string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "work.bundle")
	if err := os.WriteFile(file, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	gitOut(t, g.bare, "bundle", "verify", "-q", file)
	gitOut(t, g.bare, "fetch", "-q", file, "HEAD:refs/heads/"+name)
	return g.branch(name)
}

// branch is where refs/heads/<name> of the bare repository is; "" when
// it does not exist.
func (g *fakeGateway) branch(name string) string {
	out, err := exec.Command("git", "--git-dir", g.bare, "rev-parse", "--verify", "--quiet", "refs/heads/"+name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// agentScript is the runner's stub: it reads the task, writes JSON lines
// (one longer than any default line buffer, and a last one without a
// newline) and a line on stderr, commits a file with everything it finds
// (git add -A: the prompt file too, were it not excluded) and exits
// $AGENT_EXIT.
const agentScript = `task=$(cat)
echo '{"type":"system","subtype":"init"}'
echo 'thinking' >&2
printf '{"type":"task","bytes":%d}\n' "${#task}"
head -c 200000 /dev/zero | tr '\0' x; echo
echo done > agent.txt
if [ -n "$AGENT_BIG" ]; then head -c 68000000 /dev/urandom > big.bin; fi
if [ -n "$AGENT_VERDICT" ]; then printf '%s' "$AGENT_VERDICT" > .berth-review-verdict.json; fi
git add -A && git commit -q -m "agent work" >&2 || exit 9
printf '{"type":"result"}'
exit "${AGENT_EXIT:-0}"`

// inMachine prepares an in-machine run against g: the runner's stub and
// git-credential-berth (this test binary, see TestMain) first on PATH, an
// empty work directory and the variables a pod gets. It returns the
// harness and the work directory.
func inMachine(t *testing.T, g *fakeGateway) (*harness, string) {
	t.Helper()
	rn, err := runner.Get("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, rn.Binary()), []byte("#!/bin/sh\n"+agentScript+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "git-credential-berth")); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{
		"BERTH_SANDBOX_ID":        "sbx_im",
		"BERTH_SANDBOX_NAME":      "fix-1",
		"BERTH_SANDBOX_PURPOSE":   "agent",
		"BERTH_RUNNER":            "claude-code",
		"BERTH_RUN_REPORT":        "gateway",
		"BERTH_REPO":              g.srv.URL + "/git/app.git",
		"BERTH_BRANCH":            "feature",
		"BERTH_BASE_URL":          g.srv.URL,
		"BERTH_API_KEY":           inMachineKey,
		"BERTH_RUNNER_FILES":      `[{"path": ".claude/settings.json", "content": "{}"}]`,
		"GIT_CONFIG_NOSYSTEM":     "1",
		"BERTH_INIT_TEST_AS_MAIN": "1", // for git-credential-berth
		// Under -race, a program sleeps a second before it exits.
		"GORACE": "atexit_sleep_ms=0",
	})
	h.vars["PATH"] = bin + ":" + h.vars["PATH"]
	return h, t.TempDir()
}

func (h *harness) inMachine(work string, args ...string) int {
	h.t.Helper()
	h.stderr.Reset()
	return entrypoint.MainInWorkDir(append([]string{"/usr/local/bin/berth-init"}, args...), h.env(), work)
}

// wantOutput is what the agent stub writes, as the gateway receives it.
func wantOutput() string {
	task := strings.TrimRight(testPrompt, "\n") // $(cat) drops the last newlines
	return strings.Join([]string{
		`o {"type":"system","subtype":"init"}`,
		`o {"type":"task","bytes":` + itoa(int64(len(task))) + `}`,
		"o " + strings.Repeat("x", 200000),
		`o {"type":"result"}`,
	}, "\n") + "\n"
}

// byStream splits the lines the gateway received by their mark; the order
// between the two streams is not kept, the order within each is.
func byStream(t *testing.T, body string) (stdout, stderr string) {
	t.Helper()
	var o, e strings.Builder
	for line := range strings.Lines(body) {
		switch {
		case strings.HasPrefix(line, "o "):
			o.WriteString(line)
		case strings.HasPrefix(line, "e "):
			e.WriteString(line)
		default:
			t.Errorf("output line without its stream's mark: %.80q", line)
		}
	}
	return o.String(), e.String()
}

func TestInMachineRun(t *testing.T) {
	g := newFakeGateway(t, testPrompt)
	h, work := inMachine(t, g)
	base := g.branch("feature")
	if code := h.inMachine(work, "-p", "--output-format", "stream-json"); code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, h.stderr.String())
	}

	calls, outputs, exits := g.got()
	if calls != 1 || len(outputs) != 1 || len(exits) != 1 {
		t.Fatalf("the gateway got %d task calls, %d outputs, %d exit reports; want one each", calls, len(outputs), len(exits))
	}
	stdout, stderr := byStream(t, outputs[0])
	if diff := cmp.Diff(wantOutput(), stdout); diff != "" {
		t.Errorf("the agent's stdout at the gateway (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(stderr, "e thinking\n") {
		t.Errorf("the agent's stderr at the gateway = %q, want it to start with %q", stderr, "e thinking\n")
	}

	if at := g.branch("berth/fix-1"); at != "" {
		t.Fatalf("berth-init pushed berth/fix-1 at %s; the machine never pushes", at)
	}
	rep := exits[0]
	if rep.ExitCode != 0 || rep.Commit == "" || rep.Commit == base || len(rep.Bundle) == 0 || rep.Error != "" {
		t.Fatalf("exit report %+v; want exit 0, the agent's commit and its bundle; stderr:\n%s", rep, h.stderr.String())
	}
	pushed := g.land(t, rep.Bundle, "berth/fix-1")
	if pushed != rep.Commit {
		t.Errorf("the bundle holds %s, the report says %s", pushed, rep.Commit)
	}
	if processDumpable() {
		t.Errorf("berth-init left itself dumpable: the agent (its uid) could read its memory")
	}
	tree, _ := exec.Command("git", "--git-dir", g.bare, "ls-tree", "--name-only", "berth/fix-1").Output()
	if want := "FEATURE\nREADME\nagent.txt\n"; string(tree) != want {
		t.Errorf("the pushed commit holds %q, want %q (the prompt file never committed)", tree, want)
	}
	if parent := gitOut(t, g.bare, "rev-parse", "berth/fix-1^"); strings.TrimSpace(parent) != base {
		t.Errorf("the pushed commit's parent is %s, want the cloned %s (BERTH_BRANCH=feature)", parent, base)
	}

	// berth-init's own stdout, the pod's log, has the agent's stdout as
	// it was written.
	raw := strings.ReplaceAll(strings.TrimPrefix(wantOutput(), "o "), "\no ", "\n")
	if got := h.stdout.String(); got != strings.TrimSuffix(raw, "\n") {
		t.Errorf("berth-init's stdout = %.200q…, want the agent's stdout unchanged", got)
	}
	if !strings.Contains(h.stderr.String(), "thinking\n") {
		t.Errorf("berth-init's stderr lacks the agent's:\n%s", h.stderr.String())
	}
	if exists(filepath.Join(work, ".berth-prompt.txt")) {
		t.Errorf("the prompt file is left in the checkout")
	}
	if got := h.read(".claude/settings.json"); got != "{}" {
		t.Errorf("~/.claude/settings.json = %q, want the runner's file", got)
	}
	if strings.Contains(h.stderr.String(), inMachineKey) {
		t.Errorf("stderr shows the key:\n%s", h.stderr.String())
	}
	want := []string{"claude", "-p", "--output-format", "stream-json"}
	if !slices.ContainsFunc(h.runs, func(argv []string) bool { return slices.Equal(argv, want) }) {
		t.Errorf("ran %q, want the runner's binary with \"$@\" %q", h.runs, want)
	}
}

func TestInMachineRunAgentFails(t *testing.T) {
	g := newFakeGateway(t, testPrompt)
	h, work := inMachine(t, g)
	h.vars["AGENT_EXIT"] = "3"
	if code := h.inMachine(work); code != 3 {
		t.Fatalf("Main = %d, want the agent's 3; stderr:\n%s", code, h.stderr.String())
	}
	if at := g.branch("berth/fix-1"); at != "" {
		t.Errorf("a failed run pushed berth/fix-1 at %s", at)
	}
	_, outputs, exits := g.got()
	if diff := cmp.Diff([]exitReport{{ExitCode: 3}}, exits); diff != "" {
		t.Errorf("exit report (-want +got): a failed run hands over no work\n%s", diff)
	}
	if len(outputs) != 1 {
		t.Errorf("the gateway got %d outputs, want 1", len(outputs))
	}
}

func TestInMachineRunResendsABrokenOutput(t *testing.T) {
	for _, how := range []string{"500", "close"} {
		t.Run(how, func(t *testing.T) {
			g := newFakeGateway(t, testPrompt)
			g.breakOutput = how
			h, work := inMachine(t, g)
			if code := h.inMachine(work); code != 0 {
				t.Fatalf("Main = %d, want 0: the output is not the run; stderr:\n%s", code, h.stderr.String())
			}
			_, outputs, exits := g.got()
			if len(outputs) != 2 {
				t.Fatalf("the gateway got %q, want the broken output and the resent one; stderr:\n%s", outputs, h.stderr.String())
			}
			stdout, stderr := byStream(t, outputs[1])
			if stdout != wantOutput() || !strings.HasPrefix(stderr, "e thinking\n") {
				t.Errorf("the resent output lacks lines: stdout %.100q…, stderr %q", stdout, stderr)
			}
			if len(exits) != 1 || exits[0].Commit == "" || g.land(t, exits[0].Bundle, "berth/fix-1") != exits[0].Commit {
				t.Errorf("exit reports %+v, want one with the agent's commit and its bundle", exits)
			}
			if !strings.Contains(h.stderr.String(), "sending it again") {
				t.Errorf("stderr does not say the output was sent again:\n%s", h.stderr.String())
			}
		})
	}
}

// TestInMachineRunWorkTooLarge: work over the 64 MiB the gateway takes is
// not sent: the report says why, and berth-init exits 1.
func TestInMachineRunWorkTooLarge(t *testing.T) {
	g := newFakeGateway(t, testPrompt)
	h, work := inMachine(t, g)
	h.vars["AGENT_BIG"] = "1"
	if code := h.inMachine(work); code != 1 {
		t.Fatalf("Main = %d, want 1; stderr:\n%s", code, h.stderr.String())
	}
	_, _, exits := g.got()
	if len(exits) != 1 {
		t.Fatalf("exit reports %+v, want one", exits)
	}
	rep := exits[0]
	if rep.ExitCode != 0 || rep.Bundle != nil || !strings.Contains(rep.Error, "more than 64 MiB") {
		t.Errorf("exit report: exit %d, %d bytes of bundle, %q; want the agent's 0, no bundle, and the limit named", rep.ExitCode, len(rep.Bundle), rep.Error)
	}
}

func TestInMachineRunRefusesAnEmptyTask(t *testing.T) {
	g := newFakeGateway(t, " \n\t\n")
	h, work := inMachine(t, g)
	if code := h.inMachine(work); code != 64 {
		t.Fatalf("Main = %d, want 64; stderr:\n%s", code, h.stderr.String())
	}
	_, outputs, exits := g.got()
	if len(exits) != 1 || exits[0].ExitCode != 64 || !strings.Contains(exits[0].Error, "task is empty") {
		t.Errorf("exit reports %+v, want one with 64 and why", exits)
	}
	if len(outputs) != 0 || exists(filepath.Join(work, "agent.txt")) {
		t.Errorf("the agent ran (%d outputs)", len(outputs))
	}
	if !strings.Contains(h.stderr.String(), "berth-init: the gateway's task is empty") {
		t.Errorf("stderr does not say why:\n%s", h.stderr.String())
	}
}

func TestInMachineRunRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]string
		want string
	}{
		{"no repo", map[string]string{"BERTH_REPO": ""}, "BERTH_REPO is not set (required with BERTH_RUN_REPORT=gateway)"},
		{"no base URL", map[string]string{"BERTH_BASE_URL": ""}, "BERTH_BASE_URL is not set"},
		{"no key", map[string]string{"BERTH_API_KEY": ""}, "BERTH_API_KEY is not set"},
		{"no name", map[string]string{"BERTH_SANDBOX_NAME": ""}, "BERTH_SANDBOX_NAME is not set"},
		{"bogus report", map[string]string{"BERTH_RUN_REPORT": "bogus"}, `BERTH_RUN_REPORT is "bogus", want gateway`},
		{"repo not http", map[string]string{"BERTH_REPO": "git@example.com:acme/app.git"}, "BERTH_REPO is \"git@example.com:acme/app.git\", want the repository's http(s) address"},
		{"no runner", map[string]string{"BERTH_RUNNER": ""}, "BERTH_RUN_REPORT=gateway is for an agent run"},
		{"engineer", map[string]string{"BERTH_SANDBOX_PURPOSE": "engineer", "BERTH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA x"}, "BERTH_RUN_REPORT=gateway is for an agent run"},
	}
	g := newFakeGateway(t, testPrompt) // never called
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, work := inMachine(t, g)
			for k, v := range tt.set {
				h.vars[k] = v
			}
			if code := h.inMachine(work); code != 64 {
				t.Errorf("Main = %d, want 64", code)
			}
			if !strings.Contains(h.stderr.String(), "berth-init: "+tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, h.stderr.String())
			}
			if calls, _, exits := g.got(); calls != 0 || len(exits) != 0 || len(h.runs) != 0 {
				t.Errorf("went on: %d task calls, exit reports %v, ran %v", calls, exits, h.runs)
			}
		})
	}
}

// TestInMachineReviewerRun: a reviewer's run (BERTH_RUN_PUSH=no) pushes
// nothing, and its exit report carries the verdict file it left, read
// here with the host's care, for the gateway to judge its own copy; an
// author's run that left none says so.
func TestInMachineReviewerRun(t *testing.T) {
	g := newFakeGateway(t, testPrompt)
	h, work := inMachine(t, g)
	verdict := `{"verdict": "approve", "summary": "fine"}`
	h.vars["BERTH_RUN_PUSH"], h.vars["AGENT_VERDICT"] = "no", verdict
	if code := h.inMachine(work); code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, h.stderr.String())
	}
	if at := g.branch("berth/fix-1"); at != "" {
		t.Errorf("a reviewer's run pushed berth/fix-1 at %s", at)
	}
	got := g.verdicts()
	if len(got) != 1 || string(got[0].Verdict) != verdict || got[0].VerdictFile != ".berth-review-verdict.json" || got[0].VerdictError != "" {
		t.Errorf("verdict reported: %+v, want the file's bytes", got)
	}

	g2 := newFakeGateway(t, testPrompt)
	h2, work2 := inMachine(t, g2)
	if code := h2.inMachine(work2); code != 0 {
		t.Fatalf("Main = %d; stderr:\n%s", code, h2.stderr.String())
	}
	if got := g2.verdicts(); len(got) != 1 || got[0].Verdict != nil || got[0].VerdictError == "" {
		t.Errorf("an author's run reported %+v, want no verdict and why", got)
	}
}
