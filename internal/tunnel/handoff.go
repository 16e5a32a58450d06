package tunnel

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Receiver takes a client's connection over inside the sandbox (package
// handoff's, for one machine): Give sends the connected socket f, which
// stays the caller's, and ended is closed once the sandbox's server of
// it has ended or the receiver went away.
type Receiver interface {
	Give(f *os.File) (ended <-chan struct{}, err error)
}

// ServeHandoff is Serve for a sandbox whose machine can take the client's
// connection over itself (package handoff): after the 101 the gateway
// hands the socket to recv and copies nothing, and it keeps a duplicate
// of it to see the bytes move (Options.OnActivity, the idle timeout,
// Stats) and to shut it down when the idle timeout passes or ctx ends.
// When the connection cannot be handed over (it is not plain TCP, the
// client sent bytes past the request, or recv has no receiver), Serve's
// copy takes over with the backend dial returns. handed says which it
// was. The errors are Serve's; a backend that cannot be dialled after the
// takeover gets the client a 502 with what went wrong.
func ServeHandoff(ctx context.Context, w http.ResponseWriter, r *http.Request, recv Receiver,
	dial func(context.Context) (net.Conn, error), o Options) (st Stats, handed bool, err error) {
	raw, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return Stats{}, false, err
	}
	client := &Conn{Conn: raw, r: brw.Reader}
	tcp, plain := raw.(*net.TCPConn)
	if !plain || brw.Reader.Buffered() > 0 || !canWatch {
		return copyTo(ctx, client, dial, o), false, nil
	}
	// sshd gets the socket as its own accept would give it, Nagle on (Go
	// turns it off on every connection it accepts): sshd turns it off
	// itself for an interactive session, and a bulk copy moves in full
	// segments (0.95 of ssh straight to sshd with it off, 0.98 on;
	// bench/tunnel.sh -n 21).
	_ = tcp.SetNoDelay(false)
	f, err := tcp.File()
	if err != nil {
		return copyTo(ctx, client, dial, o), false, nil
	}
	// Counted from before the 101: the client may send right after it.
	base, err := readCounts(f)
	if err != nil {
		f.Close()
		return copyTo(ctx, client, dial, o), false, nil
	}
	if _, err := io.WriteString(raw, upgraded); err != nil {
		f.Close()
		raw.Close()
		return Stats{End: EndClosed}, false, nil // the client went away
	}
	base.down += uint64(len(upgraded)) // the 101 is no byte from the sandbox
	ended, err := recv.Give(f)
	if err != nil {
		f.Close()
		return joinTo(ctx, client, dial, o), false, nil
	}
	// The socket is the sandbox's now, and f the gateway's only hold on it.
	raw.Close()
	defer f.Close()
	return watchHanded(ctx, f, base, ended, o), true, nil
}

// upgraded is the 101, written by hand: net/http treats a 101 from
// WriteHeader as informational and would expect a final status after it.
const upgraded = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Protocol + "\r\n\r\n"

// copyTo is ServeHandoff's way back to copying before the 101: dial the
// backend, answer, and relay; a backend that cannot be dialled gets the
// client a 502.
func copyTo(ctx context.Context, client *Conn, dial func(context.Context) (net.Conn, error), o Options) Stats {
	backend, err := dial(ctx)
	if err != nil {
		msg := err.Error() + "\n"
		_, _ = io.WriteString(client.Conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: "+
			strconv.Itoa(len(msg))+"\r\n\r\n"+msg)
		client.Close()
		return Stats{End: EndClosed}
	}
	if _, err := io.WriteString(client.Conn, upgraded); err != nil {
		client.Close()
		backend.Close()
		return Stats{End: EndClosed}
	}
	return Join(ctx, client, backend, o)
}

// joinTo is the way back after the 101: the client learns of a backend
// that cannot be dialled by the connection closing.
func joinTo(ctx context.Context, client *Conn, dial func(context.Context) (net.Conn, error), o Options) Stats {
	backend, err := dial(ctx)
	if err != nil {
		client.Close()
		return Stats{End: EndClosed}
	}
	return Join(ctx, client, backend, o)
}

// watchHanded follows a handed connection through f until it ends, the
// idle timeout passes or ctx ends, and says what it carried.
func watchHanded(ctx context.Context, f *os.File, base counts, ended <-chan struct{}, o Options) Stats {
	idle, every := o.IdleTimeout, o.ActivityInterval
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	if every <= 0 {
		every = time.Second
	}
	// Looked at more often than the idle timeout, however short a test
	// makes it.
	tick := time.NewTicker(min(every, max(idle/4, time.Millisecond)))
	defer tick.Stop()
	last, seen := time.Now(), base
	stats := func(end string) Stats {
		if c, err := readCounts(f); err == nil {
			seen = c
		}
		return Stats{Up: int64(seen.up - base.up), Down: int64(seen.down - base.down), End: end}
	}
	for {
		select {
		case <-ended:
			// The sandbox's server ended, or its receiver went away and
			// nobody watches the connection any more: either way it ends
			// for the client too.
			st := stats(EndClosed)
			shutdown(f)
			return st
		case <-ctx.Done():
			st := stats(EndStopped)
			shutdown(f)
			return st
		case now := <-tick.C:
			c, err := readCounts(f)
			if err != nil {
				continue
			}
			if c != seen {
				seen, last = c, now
				if o.OnActivity != nil {
					o.OnActivity()
				}
				continue
			}
			if now.Sub(last) >= idle {
				st := stats(EndIdle)
				shutdown(f)
				return st
			}
		}
	}
}

// counts are a socket's bytes received (from the client) and sent and
// acknowledged (to it).
type counts struct{ up, down uint64 }
