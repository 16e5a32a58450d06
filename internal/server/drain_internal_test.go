package server

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// draining is a gateway as serve wires it, on the fake driver and a real
// SQLite store, served on a loopback listener, for drain's tests.
type draining struct {
	st   *store.Store
	drv  *fake.Driver
	svc  *sandbox.Service
	gw   *gateway.Server
	srv  *http.Server
	addr string
	c    *client.Client
	run  *background
	// slow holds a request to /test/slow until it is closed, and slowIn
	// tells when one came: a request in flight at the stop.
	slow, slowIn chan struct{}
}

func newDraining(t *testing.T) *draining {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl, err := class.ParseFile(strings.NewReader("sandboxes:\n  - name: standard\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [engineer]\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	d := &draining{st: st, drv: fake.New(), slow: make(chan struct{}), slowIn: make(chan struct{}, 1)}
	var classes *class.Service
	accounts := account.NewService(st, st, time.Now, func(ctx context.Context, org string) error { return classes.Seed(ctx, org) }, st, log)
	d.svc = sandbox.NewService(st, d.drv, accounts, sandbox.Config{Driver: "fake", Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""},
		Audit: st}, log, time.Now)
	classes = class.NewService(st, accounts, nil, class.Config{Template: tmpl}, log, time.Now)
	runs := agentrun.NewService(st, d.svc, d.drv, accounts, agentrun.Config{Driver: "fake"}, log, time.Now)
	way := reach.NewService(d.svc, st, reach.Config{Driver: "fake", Reacher: d.drv, Audit: st}, log, time.Now)
	d.svc.SetActivity(way)
	d.gw = gateway.New(gateway.Options{Accounts: accounts, Sandboxes: d.svc, Reach: way, Classes: classes, Runs: runs, Log: log, Version: "test", Driver: "fake"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/", d.gw.Handler())
	mux.HandleFunc("/test/slow", func(w http.ResponseWriter, r *http.Request) {
		d.slowIn <- struct{}{}
		<-d.slow
	})
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	d.srv.RegisterOnShutdown(d.gw.StopStreams)
	go func() { _ = d.srv.Serve(ln) }()
	d.run = goBackground(ctx, func(ctx context.Context) { d.svc.Run(ctx, time.Hour) })
	t.Cleanup(func() { d.run.halt(); d.gw.CloseTunnels(); d.srv.Close() })
	_, _, _, key, err := accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	d.c = client.New("http://"+d.addr, key.Secret.Reveal(), nil)
	return d
}

// drain runs serve's drain with grace and returns its result when it ends.
func (d *draining) drain(t *testing.T, grace time.Duration) <-chan error {
	return d.drainLeases(t, grace, nil)
}

// drainLeases is drain with leases as the budgets' lease renewals.
func (d *draining) drainLeases(t *testing.T, grace time.Duration, leases *background) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- drain(slog.New(slog.NewTextHandler(t.Output(), nil)), grace, d.srv, d.gw, d.svc, d.run, leases)
	}()
	return done
}

// closed waits until the gateway's listener refuses connections.
func (d *draining) closed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", d.addr, time.Second)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the gateway still accepts connections 10 s into its stop")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// create makes an engineer sandbox through the API.
func (d *draining) create(t *testing.T, name string) api.Sandbox {
	t.Helper()
	sb, err := d.c.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Class: "standard",
		SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk alice@laptop"}})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func (d *draining) state(t *testing.T, id string) sandbox.State {
	t.Helper()
	sb, err := d.st.GetSandbox(context.Background(), sandbox.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return sb.State
}

// TestDrainFinishesStartsAndClosesTunnelsLast: on a stop the listener
// closes at once (no new request, no new tunnel), a start in flight goes
// on to running, a tunnel open before the stop carries bytes until the
// start is done and is closed last; then drain returns.
func TestDrainFinishesStartsAndClosesTunnelsLast(t *testing.T) {
	d := newDraining(t)
	ctx := t.Context()
	open := d.create(t, "open")
	deadline := time.Now().Add(10 * time.Second)
	for d.state(t, open.ID) != sandbox.StateRunning {
		if time.Now().After(deadline) {
			t.Fatal("the first sandbox never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.drv.Point(sandbox.ID(open.ID), 2222, tunneltest.Listen(t, tunneltest.Echo))
	conn, err := d.c.Tunnel(ctx, open.ID, 2222)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := bufio.NewReader(conn)
	say := func(line string) error {
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := echo.ReadString('\n')
		if err == nil && got != line+"\n" {
			err = errors.New("echoed " + got)
		}
		return err
	}

	release := d.drv.Hold()
	defer release()
	late := d.create(t, "late") // accepted; its start waits for the driver
	done := d.drain(t, time.Minute)

	d.closed(t)
	if err := say("still there"); err != nil {
		t.Fatalf("the tunnel opened before the stop does not carry bytes while a start is in flight: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("drain returned (%v) with a start in flight", err)
	default:
	}
	if s := d.state(t, late.ID); s != sandbox.StateStarting {
		t.Fatalf("the start in flight is %s, want starting", s)
	}

	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("drain = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not return once the start was done")
	}
	if s := d.state(t, late.ID); s != sandbox.StateRunning {
		t.Errorf("after the drain the accepted sandbox is %s, want running", s)
	}
	if err := say("closed?"); err == nil {
		t.Error("the tunnel still carries bytes after drain returned, want it closed")
	}
}

// TestDrainGraceRunsOut: a start that outlasts the grace is left as a
// crash leaves it, starting for the next gateway to finish, never failed,
// and drain says so.
func TestDrainGraceRunsOut(t *testing.T) {
	d := newDraining(t)
	release := d.drv.Hold()
	defer release()
	sb := d.create(t, "slow")
	began := time.Now()
	err := <-d.drain(t, 200*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain with a start held past the grace = %v, want the deadline", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("drain took %s with a grace of 200ms", took)
	}
	if s := d.state(t, sb.ID); s != sandbox.StateStarting {
		t.Errorf("the start it did not wait for is %s, want starting", s)
	}
}

// TestDrainRenewsLeasesUntilRequestsEnd: the budgets' leases are renewed
// while a request is in flight after the stop (a model request reserves
// against them, and a lease not renewed expires under it), and given back
// once the requests have ended, before drain returns.
func TestDrainRenewsLeasesUntilRequestsEnd(t *testing.T) {
	d := newDraining(t)
	given := make(chan struct{})
	leases := goBackground(t.Context(), func(ctx context.Context) { <-ctx.Done(); close(given) })
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + d.addr + "/test/slow")
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-d.slowIn
	done := d.drainLeases(t, time.Minute, leases)
	d.closed(t)
	select {
	case <-given:
		t.Fatal("the leases were given back while a request was in flight")
	case err := <-done:
		t.Fatalf("drain returned (%v) with a request in flight", err)
	default:
	}

	close(d.slow)
	if err := <-answered; err != nil {
		t.Fatalf("the request in flight at the stop: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("drain = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not return once the request ended")
	}
	select {
	case <-given:
	default:
		t.Error("drain returned with the leases still renewed")
	}
}
