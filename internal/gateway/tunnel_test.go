package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// reachable creates a running sandbox of owner's whose port 2222 is an
// echo server.
func (w *world) reachable(t *testing.T, name string) api.Sandbox {
	t.Helper()
	sb := w.create(t, w.owner, name)
	w.drv.Point(sandbox.ID(sb.ID), 2222, tunneltest.Listen(t, tunneltest.Echo))
	return sb
}

// ownersTunnel opens a tunnel to port 2222 of sb as its owner, checks it
// carries bytes, and closes it when the test ends.
func (w *world) ownersTunnel(t *testing.T, sb api.Sandbox) net.Conn {
	t.Helper()
	c, err := w.owner.Tunnel(t.Context(), sb.ID, 2222)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	roundTrip(t, c)
	return c
}

// roundTrip checks a tunnel carries bytes both ways.
func roundTrip(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatalf("write through the tunnel: %v", err)
	}
	buf := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read through the tunnel: %q, %v", buf, err)
	}
}

// TestTunnelAuthorisationMatrix is SPEC S6's "open a shell" column: the
// operator and the owner get through (101), the organisation's
// administrator sees the sandbox but is refused (403), anybody else does
// not find it (404, never 403), and a revoked key is not a key (401).
func TestTunnelAuthorisationMatrix(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	sb := w.reachable(t, "dev")
	k, err := w.operator.CreateKey(ctx, api.CreateKey{User: sb.Owner})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.operator.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	revoked := client.New(w.url, k.Secret, nil)
	rows := []struct {
		who        string
		c          *client.Client
		wantStatus int
		wantCode   string
	}{
		{"operator", w.operator, http.StatusSwitchingProtocols, ""},
		{"administrator", w.admin, http.StatusForbidden, api.CodeForbidden},
		{"owner", w.owner, http.StatusSwitchingProtocols, ""},
		{"another member", w.member, http.StatusNotFound, api.CodeNotFound},
		{"another organisation", w.foreign, http.StatusNotFound, api.CodeNotFound},
		{"revoked key", revoked, http.StatusUnauthorized, api.CodeUnauthenticated},
	}
	for _, row := range rows {
		t.Run(row.who, func(t *testing.T) {
			for _, ref := range []string{sb.ID, sb.Name} {
				c, err := row.c.Tunnel(ctx, ref, 2222)
				if row.wantStatus == http.StatusSwitchingProtocols {
					if err != nil {
						t.Fatalf("tunnel to %s: %v, want 101", ref, err)
					}
					roundTrip(t, c)
					c.Close()
					continue
				}
				if status, cd := code(err); status != row.wantStatus || cd != row.wantCode {
					t.Errorf("tunnel to %s: %v (status %d), want %d %s", ref, err, status, row.wantStatus, row.wantCode)
				}
			}
		})
	}
	// The administrator's attempt is on the record.
	events, _, err := w.st.ListAudit(ctx, audit.Filter{Sandbox: sb.ID}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	for _, e := range events {
		if e.Action == audit.ShellOpen && e.Outcome == audit.Refused {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("audit holds %d refused shells, want the administrator's 2: %+v", refused, events)
	}
}

// TestTunnelRefusals: what is not a shell to open gets a status that says
// why: a port the driver does not reach, a sandbox not running, a driver
// that cannot reach sandboxes, a sandbox that does not answer.
func TestTunnelRefusals(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	sb := w.reachable(t, "dev")
	check := func(what string, err error, wantStatus int, wantCode, wantWords string) {
		t.Helper()
		status, cd := code(err)
		if status != wantStatus || cd != wantCode || !strings.Contains(err.Error(), wantWords) {
			t.Errorf("%s: %v (status %d), want %d %s saying %q", what, err, status, wantStatus, wantCode, wantWords)
		}
	}
	// Out of the range either way: a 400 that names the field and the range.
	for _, port := range []int{22, 80, 1023, 65536, 70000} {
		_, err := w.owner.Tunnel(ctx, sb.ID, port)
		check(fmt.Sprintf("port %d", port), err, http.StatusBadRequest, api.CodeInvalid, fmt.Sprintf("%d is not reachable: the fake driver reaches ports 1024–65535", port))
		if e, ok := errors.AsType[*api.Error](err); !ok || e.Field != "port" {
			t.Errorf("port %d: %v, want the field named port", port, err)
		}
	}
	_, err := w.owner.Tunnel(ctx, sb.ID, 4000)
	check("a port the driver has nothing on", err, http.StatusConflict, api.CodeUnavailable, "nothing listens on port 4000")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	w.drv.Point(sandbox.ID(sb.ID), 5000, ln.Addr().String())
	_, err = w.owner.Tunnel(ctx, sb.ID, 5000)
	check("a port that refuses", err, http.StatusConflict, api.CodeUnavailable, "sandbox dev does not answer on port 5000")

	if _, err := w.owner.Suspend(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.owner.Tunnel(ctx, sb.ID, 2222)
	check("a suspended sandbox", err, http.StatusConflict, api.CodeConflict, "resume it first (berth sandbox resume dev)")

	// A machine that died behind the gateway's back: the sandbox says so,
	// in berth's words (not the driver's), whether the driver's watch or
	// the tunnel found it first.
	crashed := w.reachable(t, "crashed")
	w.drv.Exit(sandbox.ID(crashed.ID), 137)
	_, err = w.owner.Tunnel(ctx, crashed.ID, 2222)
	check("a sandbox whose process died", err, http.StatusConflict, api.CodeConflict, "sandbox crashed is failed (its process exited 137); a failed sandbox is over")

	resp, err := http.Get(w.url + "/sandbox/v1/dev/tcp/ssh")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401 before anything else", resp.StatusCode)
	}

	// A driver without the Reacher capability has no tunnel.
	blind := newWorld(t, func(o *worldConfig) {
		o.driver = func(d *fake.Driver) sandbox.Driver { return struct{ sandbox.Driver }{d} }
	})
	sb2 := blind.create(t, blind.owner, "dev")
	_, err = blind.owner.Tunnel(ctx, sb2.ID, 2222)
	check("a driver that cannot reach", err, http.StatusConflict, api.CodeUnavailable, "cannot reach a sandbox's ports")
}

// strippingProxy is a reverse proxy in front of target that drops the
// hop-by-hop Upgrade and Connection headers, as a proxy not configured for
// upgrades does.
func strippingProxy(t *testing.T, target string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), nil)
		if err != nil {
			t.Error(err)
			return
		}
		for k, v := range r.Header {
			if k != "Upgrade" && k != "Connection" {
				out.Header[k] = v
			}
		}
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTunnelThroughAProxyThatStripsUpgrade: 426, with a message that asks
// for the header and names the client to use.
func TestTunnelThroughAProxyThatStripsUpgrade(t *testing.T) {
	w := newWorld(t)
	sb := w.reachable(t, "dev")
	proxy := strippingProxy(t, w.url)
	k, err := w.owner.CreateKey(t.Context(), api.CreateKey{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.New(proxy, k.Secret, nil).Tunnel(t.Context(), sb.Name, 2222)
	status, cd := code(err)
	if status != http.StatusUpgradeRequired || cd != api.CodeUpgradeRequired {
		t.Fatalf("through the proxy: %v (status %d), want 426 upgrade_required", err, status)
	}
	for _, words := range []string{"Upgrade: berth-sandbox/1", "berth sandbox ssh"} {
		if !strings.Contains(err.Error(), words) {
			t.Errorf("message %q does not say %q", err, words)
		}
	}
	// The answer names the protocol, as 426 must.
	req, _ := http.NewRequest("GET", w.url+client.TunnelPath(sb.Name, 2222), nil)
	req.Header.Set("Authorization", "Bearer "+k.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != "berth-sandbox/1" {
		t.Errorf("plain GET: %d with Upgrade %q, want 426 naming berth-sandbox/1", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
}

// TestTunnelActivityAndAudit: an open tunnel shows in the sandbox's
// connections and last activity, and once closed it is in the audit log
// with who, when, how long and the bytes both ways.
func TestTunnelActivityAndAudit(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	sb := w.reachable(t, "dev")
	before := time.Now()
	c := w.ownersTunnel(t, sb)
	got, err := w.owner.Sandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Connections != 1 || got.LastActivity == nil || got.LastActivity.Before(before.Add(-time.Second)) {
		t.Errorf("while open: connections %d, last activity %v; want 1 and about now", got.Connections, got.LastActivity)
	}
	c.Close()
	var events []audit.Event
	waitFor(t, "the tunnel's audit event", func() bool {
		events, _, err = w.st.ListAudit(ctx, audit.Filter{Sandbox: sb.ID}, paging.Request{})
		events = shells(events)
		return err == nil && len(events) > 0
	})
	if got, err := w.owner.Sandbox(ctx, sb.ID); err != nil || got.Connections != 0 {
		t.Errorf("after close: connections %d, %v; want 0", got.Connections, err)
	}
	if len(events) != 1 {
		t.Fatalf("audit: %+v, want one shell", events)
	}
	e := events[0]
	if e.Action != audit.ShellOpen || e.Outcome != audit.OK || e.Actor != sb.Owner || e.Org != sb.Organisation ||
		e.Target != "port 2222" || e.At.Before(before.Add(-time.Second)) ||
		!strings.Contains(e.Detail, "4 bytes to the sandbox, 4 from it") || !strings.Contains(e.Detail, "s open") {
		t.Errorf("audit event %+v: want the owner's shell on port 2222 with its duration and 4 bytes each way", e)
	}
	if tc := w.gw.TunnelCounts(); tc.Open != 0 || tc.Opened != 1 || tc.BytesUp != 4 || tc.BytesDown != 4 {
		t.Errorf("TunnelCounts = %+v", tc)
	}
}

// TestTunnelIdleClose: with the idle timeout shortened, a quiet tunnel is
// closed by the gateway, and the audit log says so.
func TestTunnelIdleClose(t *testing.T) {
	w := newWorld(t, func(o *worldConfig) { o.tunnelIdle = 200 * time.Millisecond })
	sb := w.reachable(t, "dev")
	c := w.ownersTunnel(t, sb)
	closedByGateway(t, "a quiet tunnel", c)
	waitFor(t, "the idle close to be recorded", func() bool {
		events, _, err := w.st.ListAudit(t.Context(), audit.Filter{Sandbox: sb.ID}, paging.Request{})
		events = shells(events)
		return err == nil && len(events) == 1 && strings.Contains(events[0].Detail, "ended idle")
	})
}

// TestCloseTunnels: a stopping gateway closes open tunnels, records them,
// and opens no new one.
func TestCloseTunnels(t *testing.T) {
	w := newWorld(t)
	sb := w.reachable(t, "dev")
	c := w.ownersTunnel(t, sb)
	done := make(chan struct{})
	go func() { w.gw.CloseTunnels(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CloseTunnels did not return")
	}
	closedByGateway(t, "a tunnel after CloseTunnels", c)
	// CloseTunnels returned after the tunnel was recorded.
	events, _, err := w.st.ListAudit(t.Context(), audit.Filter{Sandbox: sb.ID}, paging.Request{})
	events = shells(events)
	if err != nil || len(events) != 1 || !strings.Contains(events[0].Detail, "ended stopped") {
		t.Errorf("audit after CloseTunnels: %+v, %v; want the shell, ended stopped", events, err)
	}
	_, err = w.owner.Tunnel(t.Context(), sb.ID, 2222)
	if status, cd := code(err); status != http.StatusConflict || cd != api.CodeUnavailable {
		t.Errorf("a tunnel while stopping: %v, want 409 unavailable", err)
	}
}

// closedByGateway checks the gateway closes c within ten seconds.
func closedByGateway(t *testing.T, what string, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from %s: %v, want the gateway to close it", what, err)
	}
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// shells keeps the shell.open entries of an audit log.
func shells(events []audit.Event) []audit.Event {
	var out []audit.Event
	for _, e := range events {
		if e.Action == audit.ShellOpen {
			out = append(out, e)
		}
	}
	return out
}
