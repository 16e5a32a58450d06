package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout closes a tunnel that carried no byte either way for
// two hours (SPEC S10).
const DefaultIdleTimeout = 2 * time.Hour

// bufSize is each direction's copy buffer: larger than one ssh packet, so
// a bulk copy moves whole packets per read.
const bufSize = 64 << 10

// Options tune Serve. The zero value is SPEC S10's behaviour.
type Options struct {
	// IdleTimeout closes the tunnel after this long with no byte either
	// way; 0 means DefaultIdleTimeout. Tests shorten it.
	IdleTimeout time.Duration
	// OnActivity, when set, is called while bytes move, at most once per
	// ActivityInterval, from the goroutine that copies them: keep it short.
	// The gateway uses it to keep the sandbox's idle clock at zero.
	OnActivity func()
	// ActivityInterval spaces OnActivity calls; 0 means a second.
	ActivityInterval time.Duration
}

// How a tunnel ended, in Stats.End.
const (
	EndClosed  = "closed"  // both ends stopped, or one of them failed
	EndIdle    = "idle"    // no byte either way for the idle timeout
	EndStopped = "stopped" // the caller's context ended (the gateway is stopping)
)

// Stats says what one tunnel carried.
type Stats struct {
	Up   int64  // bytes from the client to the sandbox
	Down int64  // bytes from the sandbox to the client
	End  string // EndClosed, EndIdle or EndStopped
}

// Serve answers r with 101 Switching Protocols, takes its connection over
// and copies bytes between it and backend (the sandbox's port) until both
// directions have ended, either end fails, nothing moved for the idle
// timeout, or ctx is done. A direction that ends cleanly is passed on as a
// half-close, so the other keeps flowing. Serve closes backend and the
// client's connection before it returns.
//
// ctx ending closes the tunnel (the gateway is stopping). Do not pass
// r.Context() as it is: net/http cancels it when the client half-closes
// before the takeover. Call CheckRequest first. An error means the
// connection could not be taken over; nothing was written to w, which can
// still carry an error.
func Serve(ctx context.Context, w http.ResponseWriter, r *http.Request, backend net.Conn, o Options) (Stats, error) {
	defer backend.Close()
	raw, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return Stats{}, fmt.Errorf("take over the connection: %w", err)
	}
	client := &Conn{Conn: raw, r: brw.Reader}
	defer client.Close()
	if _, err := io.WriteString(raw, upgraded); err != nil {
		return Stats{End: EndClosed}, nil // the client went away
	}
	return relay(ctx, client, backend, o), nil
}

// Join copies bytes between a and b until both directions have ended,
// either fails, nothing moved for the idle timeout, or ctx is done, as
// Serve does after the upgrade (a clean end of one direction is passed on
// as a half-close), and closes both before it returns. The client's side
// uses it to carry a local connection through a tunnel (berth sandbox
// forward).
func Join(ctx context.Context, a, b net.Conn, o Options) Stats {
	defer a.Close()
	defer b.Close()
	return relay(ctx, a, b, o)
}

// relay copies both ways between client and backend; see Serve.
func relay(ctx context.Context, client, backend net.Conn, o Options) Stats {
	p := &pump{idle: o.IdleTimeout, onActivity: o.OnActivity, every: o.ActivityInterval}
	if p.idle <= 0 {
		p.idle = DefaultIdleTimeout
	}
	if p.every <= 0 {
		p.every = time.Second
	}
	p.last.Store(time.Now().UnixNano())
	abort := sync.OnceFunc(func() {
		client.Close()
		backend.Close()
	})
	var st Stats
	var wg sync.WaitGroup
	wg.Go(func() { st.Up = p.copy(backend, client, abort) })
	wg.Go(func() { st.Down = p.copy(client, backend, abort) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	st.End = p.watch(ctx, done, abort)
	<-done
	return st
}

// pump is the shared state of one tunnel's two directions.
type pump struct {
	idle       time.Duration
	every      time.Duration
	onActivity func()
	last       atomic.Int64 // unix nanoseconds of the last bytes moved, either way
	notified   atomic.Int64 // when onActivity was last called
}

// copy moves bytes from src to dst and returns how many it wrote. A clean
// end of src half-closes dst; anything else ends both directions.
func (p *pump) copy(dst, src net.Conn, abort func()) int64 {
	var n int64
	buf := make([]byte, bufSize)
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			p.touch()
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				abort()
				return n
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) || !closeWrite(dst) {
				abort()
			}
			return n
		}
	}
}

// touch records that bytes moved now. It costs a clock read and an atomic
// store per read; the callback runs at most once per interval.
func (p *pump) touch() {
	now := time.Now().UnixNano()
	p.last.Store(now)
	if p.onActivity == nil {
		return
	}
	prev := p.notified.Load()
	if now-prev >= int64(p.every) && p.notified.CompareAndSwap(prev, now) {
		p.onActivity()
	}
}

// watch waits for both directions to end, closing the tunnel first when it
// has been idle too long or ctx ends, and says how it ended.
func (p *pump) watch(ctx context.Context, done <-chan struct{}, abort func()) string {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case <-done:
			return EndClosed
		case <-ctx.Done():
			abort()
			return EndStopped
		case <-t.C:
			quiet := time.Since(time.Unix(0, p.last.Load()))
			if quiet >= p.idle {
				abort()
				return EndIdle
			}
			t.Reset(p.idle - quiet)
		}
	}
}
