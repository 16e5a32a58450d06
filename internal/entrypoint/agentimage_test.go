package entrypoint_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
	"berth.dev/berth/internal/runner"
)

// agentHardening is an agent run's podman flags (SPEC S13), as the podman
// driver passes them: the checkout, the name, the network and the
// environment are added per run.
var agentHardening = []string{
	"--rm", "--user", "1001:1001", "--read-only",
	"--tmpfs", "/tmp:rw,noexec,nosuid,size=512m",
	"--tmpfs", "/home/berth:rw,exec,mode=0700,U,size=1g",
	"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
	"--pids-limit", "512", "--memory", "2g", "--cpus", "1",
}

// TestPodmanAgentRun runs the agent images images/build makes, with their
// real agent CLIs, as an agent run: hardening flags, the checkout as the
// only mount at /work, the prompt file, the runner's config files and
// ContainerArgs, pointed at the scripted model server on the host. The
// scripted tool call must commit in the checkout, and the stdout must parse
// with the runner's ParseLine to the tokens the server reported. Gated like
// TestPodmanSandbox, and per runner on its image being built (images/build
// agent); the images are used as built, so rebuild them after changing
// berth-init.
func TestPodmanAgentRun(t *testing.T) {
	usePodmanRoot(t)
	needCommand(t, "podman", "git")
	host, err := hostAddress(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		runner  string
		dialect modelserver.Dialect
		model   string
		extra   int // model calls beyond the agent's two, unreported
	}{
		{"pi", modelserver.OpenAIChat, "mock-model", 0},
		{"claude-code", modelserver.Anthropic, "mock-model", 0},
		// Built on request only (images/build agent codex opencode gemini).
		{"codex", modelserver.OpenAIResponses, "gpt-5.5", 0},  // a slug Codex knows
		{"opencode", modelserver.OpenAIChat, "mock-model", 1}, // its title call
		{"gemini", modelserver.Gemini, "gemini-2.5-pro", 0},   // a model it knows
	} {
		t.Run(tt.runner, func(t *testing.T) {
			image := "localhost/berth-agent-" + tt.runner + ":latest"
			if _, err := podman(t, "image", "exists", image); err != nil {
				t.Skipf("%s is not built (images/build agent %s)", image, tt.runner)
			}
			script, err := modelserver.Scenario(modelserver.ScenarioTool)
			if err != nil {
				t.Fatal(err)
			}
			srv := modelserver.New(script)
			base := serveOn(t, host, srv.Handler())
			rn, err := runner.Get(tt.runner)
			if err != nil {
				t.Fatal(err)
			}
			run := newAgentRun(t, rn, base, tt.model)
			stdout, stderr, code := run.podman(t, image)
			if code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}

			// The scripted tool call's commit is in the mounted checkout.
			log := gitOut(t, run.work, "log", "--format=%an <%ae>|%s")
			if want := "Ada Agent <ada@example.com>|add f.txt\nt <t@example.com>|init\n"; log != want {
				t.Errorf("git log in the checkout = %q, want %q", log, want)
			}
			// stdout is NDJSON in the runner's vocabulary.
			var tel runner.Telemetry
			tel.Model = tt.model
			lines, ignored := 0, 0
			sc := bufio.NewScanner(bytes.NewReader(stdout))
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				lines++
				if !json.Valid(sc.Bytes()) {
					t.Errorf("stdout line %d is not JSON: %.200q", lines, sc.Text())
				}
				if rn.ParseLine(&tel, sc.Bytes()).Ignored() {
					ignored++
				}
			}
			if lines == 0 || ignored == lines {
				t.Fatalf("stdout has %d lines, %d of them ignored by ParseLine:\n%s", lines, ignored, stdout)
			}
			u := modelserver.DefaultUsage()
			want := runner.Usage{Input: 2 * int64(u.Input), CacheRead: 2 * int64(u.CacheRead), Output: 2 * int64(u.Output)}
			if tt.dialect == modelserver.Anthropic {
				want.CacheWrite = 2 * int64(u.CacheWrite)
			}
			want.Reasoning = tel.Usage.Reasoning // Codex reports some; not the point here
			if diff := cmp.Diff(want, tel.Usage); diff != "" || tel.Error != "" {
				t.Errorf("telemetry error %q, tokens (-want +got):\n%s", tel.Error, diff)
			}
			calls := 0
			for _, q := range srv.Requests() {
				if q.Turn < 0 {
					continue
				}
				calls++
				if q.Dialect != tt.dialect || q.Model != tt.model || q.Credential == "" {
					t.Errorf("model call %+v, want %s, %s, with a key", q, tt.dialect, tt.model)
				}
				if q.Session != run.session {
					// Naming the session is the runner's config files'
					// business (SPEC S14), not the image's: said, not
					// failed: the gateway's end-to-end test holds every
					// runner's calls to their session.
					t.Logf("model call named session %q, want %q (X-Berth-Session)", q.Session, run.session)
				}
			}
			if calls != 2+tt.extra {
				t.Errorf("%d model calls, want %d (the tool call, then the answer)", calls, 2+tt.extra)
			}
			t.Logf("%s: %d lines (%d ignored), %+v, cost %.6f (%s), model %s, session %s",
				tt.runner, lines, ignored, tel.Usage, tel.CostUSD, tel.Cost, tel.Model, tel.SessionID)

			// Without its prompt, the run ends before the agent starts.
			if err := os.Remove(run.prompt); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code = run.podman(t, image)
			if code != 64 || len(stdout) != 0 || !strings.Contains(string(stderr), "prompt file /work/.berth-prompt.txt does not exist") {
				t.Errorf("without a prompt: exit %d, stdout %q, stderr %q; want 64, nothing, the reason", code, stdout, stderr)
			}
		})
	}
}

// agentRunSetup is one prepared agent run.
type agentRunSetup struct {
	work, prompt string
	session      string
	env          map[string]string // by name on podman's command line
	args         []string
}

// newAgentRun prepares what the host prepares: a checkout with one commit
// and the prompt file, owned by the agent's uid; the runner's config files,
// environment, credentials (by name) and ContainerArgs.
func newAgentRun(t *testing.T, rn runner.Runner, base, model string) *agentRunSetup {
	t.Helper()
	work := t.TempDir()
	gitOut(t, work, "init", "-q", "-b", "main")
	gitOut(t, work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init")
	prompt := filepath.Join(work, ".berth-prompt.txt")
	write(t, prompt, "Create f.txt containing hi and commit it.\n")
	if out, err := exec.Command("chown", "-R", "1001:1001", work).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
	r := &agentRunSetup{work: work, prompt: prompt, session: "sbx_" + strings.TrimPrefix(testName(), "berth-test-")}
	g := runner.Gateway{BaseURL: base}
	opts := runner.Options{Model: model}
	var err error
	if r.args, err = rn.ContainerArgs(opts); err != nil {
		t.Fatal(err)
	}
	files, err := rn.Files(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	filesJSON, err := runner.FilesJSON(files)
	if err != nil {
		t.Fatal(err)
	}
	r.env = map[string]string{
		"BERTH_SANDBOX_ID":         r.session,
		"BERTH_SANDBOX_NAME":       "agent-run",
		"BERTH_SANDBOX_PURPOSE":    "agent",
		"BERTH_RUNNER":             rn.Name(),
		"BERTH_PROMPT_FILE":        "/work/.berth-prompt.txt",
		"BERTH_RUNNER_FILES":       filesJSON,
		"BERTH_GIT_AUTHOR_NAME":    "Ada Agent",
		"BERTH_GIT_AUTHOR_EMAIL":   "ada@example.com",
		"BERTH_API_KEY":            "berth_sk_agent_run_test",
		"BERTH_BASE_URL":           base,
		"BERTH_SESSION":            r.session,
		"ANTHROPIC_CUSTOM_HEADERS": "X-Berth-Session: " + r.session,
		// As the gateway hands them to every agent sandbox.
		"GEMINI_CLI_CUSTOM_HEADERS": "X-Berth-Session: " + r.session,
	}
	vars, err := rn.Env(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		r.env[v.Name] = v.Value
	}
	for _, name := range rn.Credentials() {
		r.env[name] = "berth_sk_agent_run_test"
	}
	return r
}

// podman runs image as the agent run and returns its stdout, stderr and
// exit code.
func (r *agentRunSetup) podman(t *testing.T, image string) (stdout, stderr []byte, code int) {
	t.Helper()
	name := testName()
	args := append([]string{"run", "--name", name}, agentHardening...)
	args = append(args, "-v", r.work+":/work", "-w", "/work")
	env := os.Environ()
	for k, v := range r.env {
		args = append(args, "-e", k)
		env = append(env, k+"="+v)
	}
	args = append(append(args, image), r.args...)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "0", name) })
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("podman run %s: %v, exit %d", image, time.Since(start).Round(10*time.Millisecond), exitCode(err))
	if ctx.Err() != nil {
		t.Fatalf("the run did not end within 3 minutes; stderr:\n%s", errb.String())
	}
	return out.Bytes(), errb.Bytes(), exitCode(err)
}

// hostAddress is the address containers on podman's default network reach
// the host at (host.containers.internal): the network's gateway.
func hostAddress(t *testing.T) (string, error) {
	t.Helper()
	gw, err := podman(t, "network", "inspect", "podman", "--format", "{{range .Subnets}}{{.Gateway}} {{end}}")
	if err != nil {
		return "", err
	}
	return strings.Fields(gw + " 0.0.0.0")[0], nil
}

// serveOn serves h on ip at a free port until the test ends and returns
// the base URL a container uses for it.
func serveOn(t *testing.T, ip string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		// netavark makes the bridge (and its address) with the first
		// container on the network and removes it with the last: with
		// none running now, listen on every address, the bridge's once
		// the container brings it up.
		ln, err = net.Listen("tcp", ":0")
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return "http://host.containers.internal:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// gitOut runs git in dir, trusting it whatever its owner, and returns its
// output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
