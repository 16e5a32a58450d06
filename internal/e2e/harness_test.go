package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// berthBin is the berth binary TestMain builds once: berthtest, which is
// cmd/berth with the tests' knobs (BERTH_TEST_MIN_TTL).
var berthBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	berthBin = filepath.Join(dir, "berth")
	build := exec.Command("go", "build", "-o", berthBin, "berth.dev/berth/internal/e2e/berthtest")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berth:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopCluster()
	os.RemoveAll(dir)
	os.Exit(code)
}

// podmanRoot is the podman root holding the sandbox image, or a skip.
func podmanRoot(t *testing.T) string {
	root := os.Getenv("BERTH_TEST_PODMAN")
	if root == "" {
		t.Skip("set BERTH_TEST_PODMAN to a podman root holding localhost/berth-sandbox:latest (make images) to run end-to-end tests")
	}
	return root
}

const classesYAML = `sandboxes:
  - name: standard
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    default_ttl: 1h
    max_ttl: 4h
    purposes: [engineer]
  - name: agent
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    default_ttl: 1h
    max_ttl: 2h
    purposes: [agent]
`

// gateway is a `berth serve` process on the podman driver, with its own
// data directory and the shared podman root.
type gateway struct {
	t        testing.TB
	env      []string
	url      string
	dataDir  string
	root     string
	cmd      *exec.Cmd
	log      *syncBuffer
	operator *client.Client
	key      string
}

// startGateway starts a gateway on a new data directory. extra settings
// override the defaults.
func startGateway(t *testing.T, extra ...string) *gateway {
	t.Helper()
	root := podmanRoot(t)
	g, dir, classes, port := newGateway(t)
	g.root = root
	g.env = append(os.Environ(),
		"HOME="+dir,
		"BERTH_DATA_DIR="+g.dataDir,
		// Sandboxes reach the gateway on the host's bridge address.
		"BERTH_ADDR=:"+port,
		"BERTH_SANDBOX_PUBLIC_URL=http://host.containers.internal:"+port,
		"BERTH_URL="+g.url,
		"BERTH_SANDBOX_DRIVER=podman",
		"BERTH_SANDBOX_PODMAN_ROOT="+root,
		"BERTH_SANDBOXES_FILE="+classes,
		"BERTH_SWEEP_INTERVAL=1s",
		"BERTH_TEST_MIN_TTL=5s",
		"BERTH_SANDBOX_GIT_FORGE=local",
		"BERTH_LOG_LEVEL=debug",
	)
	g.env = append(g.env, extra...)
	g.start()
	t.Cleanup(g.cleanup)
	out := g.berth("admin", "bootstrap", "-o", "json")
	var boot api.Bootstrap
	if err := json.Unmarshal(out, &boot); err != nil {
		t.Fatalf("bootstrap: %v: %s", err, out)
	}
	g.key = boot.Key.Secret
	g.operator = client.New(g.url, g.key, nil)
	return g
}

// newGateway lays out a gateway's directory, with classesYAML as its
// sandboxes file (its image BERTH_TEST_SANDBOX_IMAGE when that is set), and
// picks its port; the caller sets its environment.
func newGateway(t testing.TB) (g *gateway, dir, classes, port string) {
	t.Helper()
	dir = t.TempDir()
	classes = filepath.Join(dir, "classes.yaml")
	yaml := classesYAML
	if image := os.Getenv("BERTH_TEST_SANDBOX_IMAGE"); image != "" {
		// An image built beside the one in use (BERTH_IMAGE_TAG=… images/build).
		yaml = strings.ReplaceAll(yaml, "localhost/berth-sandbox:latest", image)
	}
	if err := os.WriteFile(classes, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	port = freePort(t)
	g = &gateway{t: t, dataDir: filepath.Join(dir, "data"), url: "http://127.0.0.1:" + port}
	return g, dir, classes, port
}

func (g *gateway) start() {
	g.t.Helper()
	g.log = &syncBuffer{}
	g.cmd = exec.Command(berthBin, "serve")
	g.cmd.Env = g.env
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(g.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.t.Fatalf("the gateway did not come up:\n%s", g.log)
}

// cleanup ends every sandbox the test left, so no container or volume
// outlives it, then stops the gateway.
func (g *gateway) cleanup() {
	if g.cmd == nil {
		g.start()
	}
	if g.operator != nil {
		sbs, err := g.operator.Sandboxes(context.Background(), client.ListOptions{})
		if err != nil {
			g.t.Errorf("cleanup: %v", err)
		}
		for _, sb := range sbs {
			if _, err := g.operator.Terminate(context.Background(), sb.ID); err != nil {
				g.t.Errorf("cleanup: terminate %s: %v", sb.ID, err)
			}
		}
	}
	g.stop()
}

// stop interrupts the gateway and waits for it.
func (g *gateway) stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
		g.t.Errorf("the gateway did not stop within 30s")
	}
	if g.t.Failed() {
		g.t.Logf("gateway log:\n%s", g.log)
	}
	g.cmd = nil
}

// kill ends the gateway with SIGKILL, as a crash would.
func (g *gateway) kill() {
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	g.cmd = nil
}

// syncBuffer is a gateway's output, safe to read while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// berth runs the CLI against the gateway as the operator and returns stdout.
func (g *gateway) berth(args ...string) []byte {
	g.t.Helper()
	out, err := g.berthErr(args...)
	if err != nil {
		g.t.Fatalf("berth %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (g *gateway) berthErr(args ...string) ([]byte, error) {
	cmd := exec.Command(berthBin, args...)
	cmd.Env = g.env
	if g.key != "" {
		cmd.Env = append(cmd.Env, "BERTH_API_KEY="+g.key)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// podman runs podman on the shared root. podman's listings race with
// removals (an object listed, then gone before it is read: "no such
// volume"), so such an answer is asked again.
func (g *gateway) podman(args ...string) string {
	g.t.Helper()
	for try := 0; ; try++ {
		out, err := podmanOn(g.root, args...).CombinedOutput()
		if err == nil {
			return strings.TrimSpace(string(out))
		}
		if try < 5 && strings.Contains(string(out), "no such") {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		g.t.Fatalf("podman %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// objects lists the containers ("name state") and volumes labelled with a
// sandbox id.
func (g *gateway) objects(id string) (containers, volumes string) {
	filter := "label=berth.sandbox=" + id
	var cs []struct {
		Names []string
		State string
	}
	if err := json.Unmarshal([]byte(g.podman("ps", "--all", "--filter", filter, "--format", "json")), &cs); err != nil {
		g.t.Fatalf("podman ps: %v", err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, strings.Join(c.Names, ",")+" "+c.State)
	}
	return strings.Join(out, "\n"), g.podman("volume", "ls", "--filter", filter, "--format", "{{.Name}}")
}

// waitGone polls until a sandbox has no container and no volume left, and
// returns what is left when within runs out.
func (g *gateway) waitGone(id string, within time.Duration) (containers, volumes string) {
	deadline := time.Now().Add(within)
	for {
		c, v := g.objects(id)
		if (c == "" && v == "") || time.Now().After(deadline) {
			return c, v
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStopped polls until a sandbox's container has stopped, and returns
// what there is when within runs out.
func (g *gateway) waitStopped(id string, within time.Duration) (containers, volumes string) {
	deadline := time.Now().Add(within)
	for {
		c, v := g.objects(id)
		if stopped(c) || time.Now().After(deadline) {
			return c, v
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ip is a running sandbox container's address.
func (g *gateway) ip(id string) string {
	return g.podman("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", "berth-"+id)
}

// waitEnded polls the API until the sandbox has ended (terminated or
// failed), as the operator sees it.
func (g *gateway) waitEnded(id string, within time.Duration) api.Sandbox {
	g.t.Helper()
	return g.waitSandbox(g.operator, id, within, func(sb api.Sandbox, late bool) bool {
		if late {
			g.t.Fatalf("sandbox %s is still %s after %s", sb.Name, sb.State, within)
		}
		return sb.State == "terminated" || sb.State == "failed"
	})
}

// waitState polls the API until the sandbox is in state want.
func (g *gateway) waitState(c *client.Client, id string, want api.State, within time.Duration) api.Sandbox {
	g.t.Helper()
	return g.waitSandbox(c, id, within, func(sb api.Sandbox, late bool) bool {
		if sb.State == want {
			return true
		}
		if final := sb.State == "failed" || sb.State == "terminated"; final || late {
			g.t.Fatalf("sandbox %s is %s (%s) after %s, want %s", id, sb.State, sb.Reason, within, want)
		}
		return false
	})
}

// waitSandbox polls the API until done says the sandbox is as wanted; done
// is told when within has passed (late), and then fails the test.
func (g *gateway) waitSandbox(c *client.Client, id string, within time.Duration, done func(sb api.Sandbox, late bool) bool) api.Sandbox {
	g.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb, err := c.Sandbox(context.Background(), id)
		if err != nil {
			g.t.Fatal(err)
		}
		if done(sb, time.Now().After(deadline)) {
			return sb
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort is a port nobody listens on, below the kernel's ephemeral
// range (32768 and up here): a port the kernel handed out a moment ago
// may be handed out again as some outgoing connection's source port
// before the gateway binds it ("address already in use").
func freePort(t testing.TB) string {
	for range 200 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		port := strconv.Itoa(20000 + int(b[0])<<8%12000 + int(b[1]))
		l, err := net.Listen("tcp", ":"+port)
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("no free port in 20000–32255")
	return ""
}

// sshKey makes a key pair in dir and returns the private key's path and
// the public key.
func sshKey(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(string(pub))
}

// ssh runs a command in the sandbox at ip with the real OpenSSH client.
func ssh(t *testing.T, key, ip string, command string) string {
	t.Helper()
	cmd := exec.Command("ssh", "-i", key, "-p", "2222", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "berth@"+ip, command)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ssh %s: %v: %s", command, err, out)
	}
	return strings.TrimSpace(string(out))
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// podmanMay runs podman on the shared root for what a test only reports
// (a container's log) or tidies: its output, or its error, never a failure.
func (g *gateway) podmanMay(args ...string) string {
	out, err := podmanOn(g.root, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// podmanOn is podman on the podman root root (the driver's own
// containers.conf and storage).
func podmanOn(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+root+"/containers.conf", "CONTAINERS_STORAGE_CONF="+root+"/storage.conf")
	return cmd
}
