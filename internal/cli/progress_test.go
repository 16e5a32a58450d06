package cli_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk test@example"

// engineerGateway is an in-process gateway on the fake driver with one
// engineer class, an administrator (ann) and a member (alice).
type engineerGateway struct {
	url      string
	keys     map[string]string // by user name: ops (operator), ann (admin), alice (member)
	drv      *fake.Driver
	accounts *account.Service
	keyFile  string
}

func newEngineerGateway(t *testing.T) *engineerGateway {
	t.Helper()
	ctx := t.Context()
	log, st, tmpl := testDeployment(t, "sandboxes:\n  - name: standard\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [engineer]\n    memory: 4Gi\n")
	g := &engineerGateway{keys: map[string]string{}, drv: fake.New()}
	srv := httptest.NewUnstartedServer(nil)
	g.url = "http://" + srv.Listener.Addr().String()
	var classes *class.Service
	g.accounts = account.NewService(st, st, time.Now, func(ctx context.Context, org string) error { return classes.Seed(ctx, org) }, st, log)
	runtimes := map[sandbox.Tier]string{sandbox.TierStandard: ""}
	svc := sandbox.NewService(st, g.drv, g.accounts, sandbox.Config{Driver: "fake", Runtimes: runtimes, Audit: st, PublicURL: g.url}, log, time.Now)
	classes = class.NewService(st, g.accounts, nil, class.Config{Template: tmpl, Runtimes: runtimes}, log, time.Now)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	srv.Config.Handler = gateway.New(gateway.Options{Accounts: g.accounts, Sandboxes: svc, Classes: classes, Log: log, Version: "9.9.9-test", Commit: "0123456789abcdef0123456789abcdef01234567", Driver: "fake"}).Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	_, _, op, opKey, err := g.accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	g.keys["ops"] = opKey.Secret.Reveal()
	operator := account.Principal{User: op}
	for name, role := range map[string]account.Role{"ann": account.RoleAdmin, "alice": account.RoleMember} {
		u, err := g.accounts.CreateUser(ctx, operator, "acme", name, "", role)
		if err != nil {
			t.Fatal(err)
		}
		k, err := g.accounts.CreateKey(ctx, operator, u.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		g.keys[name] = k.Secret.Reveal()
	}
	g.keyFile = filepath.Join(t.TempDir(), "key.pub")
	if err := os.WriteFile(g.keyFile, []byte(testKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return g
}

// testDeployment is what an in-process gateway stands on: a logger into
// the test's output, a store of its own, and the classes of file.
func testDeployment(t *testing.T, file string) (*slog.Logger, *store.Store, []class.Class) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(t.Context(), t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl, err := class.ParseFile(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return log, st, tmpl
}

// client is the API as user who.
func (g *engineerGateway) client(who string) *client.Client {
	return client.New(g.url, g.keys[who], nil)
}

// berth runs the command line in-process as who.
func (g *engineerGateway) berth(t *testing.T, who string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = cli.Main(t.Context(), args, g.env(who, &out, &errs))
	return code, out.String(), errs.String()
}

func (g *engineerGateway) env(who string, stdout, stderr io.Writer) cli.Env {
	env := map[string]string{"BERTH_URL": g.url, "BERTH_API_KEY": g.keys[who]}
	return cli.Env{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Getenv: func(k string) string { return env[k] }, HTTP: &http.Client{}, Now: time.Now}
}

// watched is a writer that tells, once, when what was written matches re.
type watched struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	re   *regexp.Regexp
	once sync.Once
	seen chan struct{}
}

func watch(re string) *watched {
	return &watched{re: regexp.MustCompile(re), seen: make(chan struct{})}
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.re.Match(w.buf.Bytes()) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestCreateShowsStages: create prints each stage of the start with the
// time since it was asked for: admitted, the machine being created, then
// running with sshd answering.
func TestCreateShowsStages(t *testing.T) {
	g := newEngineerGateway(t)
	release := g.drv.Hold()
	defer release()
	errs := watch(`dev: creating the machine \(\d+\.\ds\)\n`)
	var out bytes.Buffer
	codec := make(chan int, 1)
	go func() {
		codec <- cli.Main(t.Context(), []string{"sandbox", "create", "dev", "--ssh-key", g.keyFile}, g.env("alice", &out, errs))
	}()
	select {
	case <-errs.seen:
	case <-time.After(10 * time.Second):
		t.Fatalf("no machine stage after 10s; stderr:\n%s", errs)
	}
	release()
	if code := <-codec; code != 0 {
		t.Fatalf("create exited %d: %s", code, errs)
	}
	wantLines(t, "stderr", errs.String(),
		`^dev: admitted \(\d+\.\ds\)$`,
		`^dev: creating the machine \(\d+\.\ds\)$`,
		`^dev: running: sshd answering \(\d+\.\ds\)$`)
}

// TestCreateInterrupted: Ctrl-C while create waits stops the wait at once
// and says that the sandbox keeps starting and how to end it, with the
// time really waited (not the --timeout); the exit status is a shell's for
// the signal. With --cancel-on-interrupt the sandbox is terminated.
func TestCreateInterrupted(t *testing.T) {
	g := newEngineerGateway(t)
	release := g.drv.Hold()
	defer release()
	for _, tt := range []struct {
		name  string
		flags []string
		sig   syscall.Signal
		code  int
		want  []string
		state api.State
	}{
		{"keeps-starting", nil, syscall.SIGINT, 130, []string{
			`^dev1: stopped waiting after \d+\.\ds; the sandbox keeps starting\.$`,
			`^  berth sandbox show dev1 +how it goes$`,
			`^  berth sandbox terminate dev1 +end it$`}, api.StateStarting},
		{"cancel-on-interrupt", []string{"--cancel-on-interrupt"}, syscall.SIGTERM, 143, []string{
			`^dev2: interrupted after \d+\.\ds; terminated \(--cancel-on-interrupt\)$`}, api.StateTerminated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := "dev" + map[string]string{"keeps-starting": "1", "cancel-on-interrupt": "2"}[tt.name]
			errs := watch(name + `: creating the machine`)
			var out bytes.Buffer
			codec := make(chan int, 1)
			began := time.Now()
			go func() {
				args := append([]string{"sandbox", "create", name, "--ssh-key", g.keyFile}, tt.flags...)
				codec <- cli.Run(args, g.env("alice", &out, errs))
			}()
			select {
			case <-errs.seen:
			case <-time.After(10 * time.Second):
				t.Fatalf("no machine stage after 10s; stderr:\n%s", errs)
			}
			if err := syscall.Kill(os.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			var code int
			select {
			case code = <-codec:
			case <-time.After(10 * time.Second):
				t.Fatalf("create still waiting 10s after %v; stderr:\n%s", tt.sig, errs)
			}
			if code != tt.code {
				t.Errorf("create exited %d after %v, want %d; stderr:\n%s", code, tt.sig, tt.code, errs)
			}
			if took := time.Since(began); took > 9*time.Minute {
				t.Fatalf("took %s", took)
			}
			wantLines(t, "stderr", errs.String(), tt.want...)
			if strings.Contains(errs.String(), "10m0s") || strings.Contains(errs.String(), "context canceled") {
				t.Errorf("stderr names the timeout or a raw error:\n%s", errs)
			}
			sb, err := g.client("alice").Sandbox(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if sb.State != tt.state {
				t.Errorf("%s is %s after the interrupt, want %s", name, sb.State, tt.state)
			}
		})
	}
}

// TestSignalNeverPrintsAGoError: a command a signal ends in the middle of
// a request says it was interrupted, not "context canceled".
func TestSignalNeverPrintsAGoError(t *testing.T) {
	// A gateway that never answers, so the request is in flight when the
	// signal comes.
	asked := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		<-r.Context().Done()
	}))
	defer srv.Close()
	var out, errs bytes.Buffer
	env := map[string]string{"BERTH_URL": srv.URL, "BERTH_API_KEY": "berth_0123456789abcdef_x"}
	codec := make(chan int, 1)
	go func() {
		codec <- cli.Run([]string{"sandbox", "list"}, cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
			Getenv: func(k string) string { return env[k] }, HTTP: &http.Client{}, Now: time.Now})
	}()
	<-asked
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-codec; code != 143 {
		t.Errorf("exited %d, want 143", code)
	}
	if got, want := errs.String(), "berth: interrupted (SIGTERM) before the command finished\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}
