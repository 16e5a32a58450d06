package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/modelserver"
	"berth.dev/berth/internal/sandbox"
)

// bigTask is a multi-line task of exactly n bytes that starts with
// marker, with quotes, a shell variable and a multi-byte character on
// every line, ending in a character no tool trims.
func bigTask(marker string, n int) string {
	var b strings.Builder
	b.WriteString(marker + "\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "step %d: greet \"é\" and leave $HOME and `pwd` alone\n", i)
	}
	s := b.String()[:n-1]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + strings.Repeat(".", n-len(s))
}

// lineTask is a task of exactly n bytes on one line, starting with marker.
func lineTask(marker string, n int) string {
	s := marker + strings.Repeat(` fix the "greeting" in $HOME;`, n/29+1)
	return s[:n]
}

// gatedModelServer is the scripted model server on loopback, in the
// test's process so its record of requests can be read; the first model
// call waits until the test calls release, so the test can look at the
// agent's container while it runs.
func gatedModelServer(t *testing.T, script string) (srv *modelserver.Server, url string, arrived <-chan struct{}, release func()) {
	t.Helper()
	sc, err := modelserver.Scenario(script)
	if err != nil {
		t.Fatal(err)
	}
	srv = modelserver.New(sc)
	in, out := make(chan struct{}), make(chan struct{})
	var first, done sync.Once
	release = func() { done.Do(func() { close(out) }) }
	t.Cleanup(release)
	inner := srv.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			first.Do(func() { close(in); <-out })
		}
		inner.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return srv, "http://" + ln.Addr().String(), in, release
}

// containerConfig is what podman inspect says a container was given.
type containerConfig struct {
	Args   []string
	Config struct {
		Env []string
		Cmd []string
	}
}

func (g *gateway) inspectContainer(id string) containerConfig {
	g.t.Helper()
	var got []containerConfig
	if err := json.Unmarshal([]byte(g.podman("inspect", "--format", "json", "berth-"+id)), &got); err != nil || len(got) != 1 {
		g.t.Fatalf("podman inspect berth-%s: %v", id, err)
	}
	return got[0]
}

// TestAgentGets1MiBTaskIntact: a multi-line task of 1 MiB, the limit of
// berth's contract, reaches the real Claude Code whole (the model server
// behind the gateway sees it, by digest, as one of the user's texts), and
// podman inspect of the running container shows the task nowhere in its
// environment or command line, and no env file of it is left on disk.
func TestAgentGets1MiBTaskIntact(t *testing.T) {
	srv, url, arrived, release := gatedModelServer(t, modelserver.ScenarioText)
	t.Setenv("E2E_VENDOR_KEY", "vendor-secret")
	g := startAgentGateway(t, `providers:
  - {name: vendor, kind: anthropic, url: `+url+`, credential_env: E2E_VENDOR_KEY}
models:
  - {id: claude-sonnet-4-5, provider: vendor, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
`, "claude-code")
	g.seedRepo("acme/app")
	marker := "task-" + strings.ToLower(rand.Text()[:12])
	task := bigTask(marker, sandbox.MaxTask)
	file := filepath.Join(t.TempDir(), "task.txt")
	if err := os.WriteFile(file, []byte(task), 0o600); err != nil {
		t.Fatal(err)
	}
	// The CLI sends it from the file: 1 MiB fits in no argument.
	out := g.berth("sandbox", "create", "big", "--purpose", "agent", "--repo", "acme/app", "--runner", "claude-code",
		"--task-file", file, "--no-wait", "-o", "json")
	var sb api.Sandbox
	if err := json.Unmarshal(out, &sb); err != nil {
		t.Fatalf("create: %v", err)
	}

	select {
	case <-arrived:
	case <-time.After(3 * time.Minute):
		got, _ := g.operator.Sandbox(context.Background(), sb.ID)
		t.Fatalf("no model call in 3 minutes; the sandbox is %s (%s)", got.State, got.Reason)
	}
	c := g.inspectContainer(sb.ID)
	for _, kv := range c.Config.Env {
		if strings.HasPrefix(kv, "BERTH_TASK=") || strings.Contains(kv, marker) {
			t.Errorf("the container's environment holds the task: %.60s…", kv)
		}
	}
	for _, a := range append(c.Args, c.Config.Cmd...) {
		if strings.Contains(a, marker) {
			t.Errorf("the container's command line holds the task: %.60s…", a)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(g.root, "env", sb.ID+".*")); len(left) > 0 {
		t.Errorf("env files of the running sandbox are still on disk: %v", left)
	}
	release()

	end := g.waitSandbox(g.operator, sb.ID, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "terminated" || sb.State == "failed"
	})
	if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", "big")
		t.Fatalf("sandbox %s (%s), run %+v; log:\n%.4000s", end.State, end.Reason, end.Run, log)
	}
	want := modelserver.TextOf(task)
	var calls int
	for _, r := range srv.Requests() {
		if r.Dialect != modelserver.Anthropic {
			continue
		}
		calls++
		found := false
		for _, tx := range r.UserTexts {
			found = found || tx == want
		}
		if !found {
			t.Errorf("model call %s carried user texts %v; none is the task (%d bytes, sha256 %s)", r.Path, r.UserTexts, want.Bytes, want.SHA256)
		}
	}
	if calls == 0 {
		t.Fatal("the model server saw no Messages call")
	}
}

// kelosClass applies an agent class named name that runs the Kelos-shaped
// test image (buildKelosImage) for claude-code, with extra lines of YAML.
func (g *gateway) kelosClass(name, extra string) {
	g.t.Helper()
	g.kelosClassOf(buildKelosImage(g.t, g.root), name, extra)
}

// kelosClassOf is kelosClass of an image built already.
func (g *gateway) kelosClassOf(image, name, extra string) {
	g.t.Helper()
	g.kelosClassOn(image, name, "standard", extra)
}

// kelosClassOn is kelosClassOf on the isolation tier named.
func (g *gateway) kelosClassOn(image, name, isolation, extra string) {
	g.t.Helper()
	if _, err := g.operator.ApplyClasses(context.Background(), "", strings.NewReader(`sandboxes:
  - name: `+name+`
    image: `+image+`
    isolation: `+isolation+`
    cpu: "1"
    memory: 1Gi
    purposes: [agent]
    contract: kelos
    runner: claude-code
`+extra+"\n")); err != nil {
		g.t.Fatal(err)
	}
}

// buildKelosImage builds the Kelos-shaped test image (the podman driver's
// testdata) into the shared root under a tag of its own, removed when the
// test ends.
func buildKelosImage(t testing.TB, root string) string {
	t.Helper()
	tag := "localhost/berth-e2e-kelos-" + strings.ToLower(rand.Text()[:8]) + ":latest"
	dir := filepath.Join("..", "driver", "podman", "testdata", "kelos")
	if out, err := podmanOn(root, "build", "--pull=never", "--network", "none", "--quiet", "--tag", tag,
		"--file", filepath.Join(dir, "Containerfile"), dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { removeImage(t, root, tag) })
	return tag
}

// removeImage removes the image tag and the containers left on it. The
// gateway may be removing one of them meanwhile (a task's sandbox that
// just ended): podman's forced removal then fails on the container that
// went under it ("… does not exist in database: no such container", CI),
// and a second try finds it gone.
func removeImage(t testing.TB, root, tag string) {
	t.Helper()
	for try := 0; ; try++ {
		out, err := podmanOn(root, "rmi", "--force", tag).CombinedOutput()
		if err == nil {
			return
		}
		if try < 2 && strings.Contains(string(out), "no such container") {
			time.Sleep(time.Second)
			continue
		}
		t.Errorf("podman rmi %s: %v\n%s", tag, err, out)
		return
	}
}

// TestKelosImageGetsItsTaskAsItsArgument: a task of 64 KiB on one line
// (past what a line of podman's env file holds), and a multi-line one at
// the Kelos limit (131,071 bytes: one argument, MAX_ARG_STRLEN less its
// NUL, past what one variable holds), reach a Kelos-shaped image's $1
// whole through the gateway and podman; one byte more is refused at
// create, naming the task and the limit.
func TestKelosImageGetsItsTaskAsItsArgument(t *testing.T) {
	g := startAgentGateway(t, inferenceYAML, "claude-code")
	g.kelosClass("kelos", "")
	g.seedRepo("acme/app")
	ctx := context.Background()
	for _, tt := range []struct {
		n    int
		make func(string, int) string
	}{{64 << 10, lineTask}, {kelos.MaxPrompt, bigTask}} {
		n := tt.n
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			name := fmt.Sprintf("kelos-%d", n)
			task := tt.make(name, n)
			sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Class: "kelos", Purpose: "agent", Repo: "acme/app", Task: task})
			if err != nil {
				t.Fatalf("a kelos task of %d bytes: %v", n, err)
			}
			end := g.waitSandbox(g.operator, sb.ID, 2*time.Minute, func(sb api.Sandbox, late bool) bool {
				if late {
					t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
				}
				return sb.State == "terminated" || sb.State == "failed"
			})
			log, err := g.berthErr("sandbox", "logs", "--raw", name)
			if err != nil {
				t.Fatal(err)
			}
			if end.State != "terminated" {
				t.Errorf("%s: %s (%s)\n%s", name, end.State, end.Reason, log[max(0, len(log)-3000):])
			}
			seen := kelosSaw(t, string(log))
			// The image is removed when the test ends: no container of it may be left.
			if c, v := g.waitGone(sb.ID, 10*time.Second); c != "" || v != "" {
				t.Errorf("left behind: containers %q volumes %q", c, v)
			}
			sum := sha256.Sum256([]byte(task))
			if seen.Args != 1 || seen.PromptBytes != n || seen.PromptSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("the image got %d arguments, $1 of %d bytes (sha256 %s); want the task alone, %d bytes (sha256 %x)",
					seen.Args, seen.PromptBytes, seen.PromptSHA256, n, sum)
			}
		})
	}
	_, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "kelos-over", Class: "kelos", Purpose: "agent", Repo: "acme/app",
		Task: bigTask("kelos-over", kelos.MaxPrompt+1)})
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != "task" || !strings.Contains(e.Message, "at most 131071 bytes") {
		t.Errorf("a kelos task of %d bytes: %v, want 400 naming the task and its limit", kelos.MaxPrompt+1, err)
	}
}
