package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/tunnel"
)

// openTunnel is GET /sandbox/v1/{ref}/tcp/{port} (SPEC S10): the caller's
// key was checked by authenticate; the sandbox service decides whether the
// caller may get inside and dials the sandbox; then the connection becomes
// a byte pipe to it.
func (s *Server) openTunnel(w http.ResponseWriter, r *http.Request, p account.Principal) {
	// First, so a request that lost its Upgrade header on the way learns
	// why whatever else is wrong, and a stranger learns nothing more.
	if err := tunnel.CheckRequest(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Only the form here: which ports are reachable is the way in's one
	// rule (reach.Connect), after it has decided whether the caller may.
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, fault.Field("port", "%q is not a port number", r.PathValue("port")))
		return
	}
	stop, ok := s.tunnels.add()
	if !ok {
		s.writeError(w, r, fault.Errorf(fault.Unavailable, "the gateway is stopping"))
		return
	}
	defer s.tunnels.done()
	if s.reach == nil {
		s.writeError(w, r, fault.Errorf(fault.Unavailable, "this gateway reaches no sandbox"))
		return
	}
	conn, err := s.reach.ConnectOrHand(r.Context(), p, r.PathValue("ref"), port)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The tunnel outlives nothing but the gateway: not the request's
	// context, which net/http cancels when a client half-closes early.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := s.log.With("sandbox", conn.Sandbox.ID, "user", p.User.ID, "port", port)
	log.InfoContext(ctx, "tunnel opened")
	began := time.Now()
	s.tunnels.open.Add(1)
	s.meter.TunnelOpened()
	opts := tunnel.Options{IdleTimeout: s.tunnelIdle, OnActivity: conn.Active}
	var st tunnel.Stats
	handed := false
	if conn.Handoff != nil {
		// sshd in the sandbox takes the client's socket over: no byte
		// of it passes through here (package handoff). The gateway
		// serves no TLS itself, so the socket carries the client's bytes
		// as they are.
		st, handed, err = tunnel.ServeHandoff(ctx, w, r, conn.Handoff, conn.Dial, opts)
	} else {
		st, err = tunnel.Serve(ctx, w, r, conn.Conn, opts)
	}
	s.tunnels.open.Add(-1)
	s.meter.TunnelClosed()
	if err == nil {
		s.tunnels.opened.Add(1)
		s.tunnels.up.Add(st.Up)
		s.tunnels.down.Add(st.Down)
		s.meter.TunnelBytes(st.Up, st.Down)
	}
	// Recorded even when the gateway is stopping: CloseTunnels waits for it.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer rcancel()
	conn.Close(rctx, reach.Traffic{Up: st.Up, Down: st.Down, End: st.End})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	log.InfoContext(ctx, "tunnel closed", "end", st.End, "up", st.Up, "down", st.Down, "handed", handed, "took", time.Since(began))
}

// tunnels keeps track of open tunnels: net/http forgets a connection once
// a handler takes it over, so the gateway closes them itself when it
// stops. It also counts them, for the metrics to come.
type tunnels struct {
	mu       sync.Mutex
	stopping bool
	stop     chan struct{} // closed when the gateway stops
	wg       sync.WaitGroup

	open, opened, up, down atomic.Int64
}

func newTunnels() *tunnels { return &tunnels{stop: make(chan struct{})} }

// add registers a tunnel about to open; false when the gateway is stopping.
func (t *tunnels) add() (stop <-chan struct{}, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopping {
		return nil, false
	}
	t.wg.Add(1)
	return t.stop, true
}

func (t *tunnels) done() { t.wg.Done() }

// TunnelCounts are the gateway's tunnel counters since it started.
type TunnelCounts struct {
	Open      int64 // tunnels open now
	Opened    int64 // tunnels that opened (answered 101) and have closed
	BytesUp   int64 // bytes carried to sandboxes by closed tunnels
	BytesDown int64 // bytes carried from sandboxes by closed tunnels
}

// TunnelCounts reads the tunnel counters.
func (s *Server) TunnelCounts() TunnelCounts {
	t := s.tunnels
	return TunnelCounts{Open: t.open.Load(), Opened: t.opened.Load(), BytesUp: t.up.Load(), BytesDown: t.down.Load()}
}

// CloseTunnels closes every open tunnel and every preview's connection,
// refuses new ones, and waits until each tunnel has been recorded. Call it after http.Server.Shutdown, which does
// not wait for connections it handed over.
func (s *Server) CloseTunnels() {
	t := s.tunnels
	t.mu.Lock()
	if !t.stopping {
		t.stopping = true
		close(t.stop)
	}
	t.mu.Unlock()
	t.wg.Wait()
	s.previews.stop()
}
