package panel

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/openssh"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/terminal"
)

// The terminal (issue 18) is GET /sandboxes/{ref}/terminal, a WebSocket:
// signed in by the panel's cookie (SameSite=Strict, so another site's page
// does not send it), from a page of the gateway's own origin (checked
// against PublicURL: a WebSocket is not bound by the same-origin policy),
// for whoever reach.Connect lets into the sandbox (the owner and
// operators; an administrator refused and audited; anybody else does not
// find it). The gateway then signs in to the sandbox's sshd with a
// certificate of its own (package terminal) and carries the shell's
// pseudo-terminal: binary messages are keys typed and output, a text
// message {"cols":N,"rows":N} resizes it.

// terminalPolicy is the sandbox page's Content-Security-Policy when it
// offers a terminal: xterm.js sizes and colours its rows with <style>
// elements it writes, so that page allows inline styles (never scripts).
const terminalPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// canTerminal reports whether the page of sb offers c a terminal.
func (p *Panel) canTerminal(c caller, sb sandbox.Sandbox) bool {
	return p.terminal != nil && p.reach != nil && sb.Purpose == sandbox.PurposeEngineer &&
		sb.State == sandbox.StateRunning && c.CanShell(sb.Owner)
}

// sameOrigin reports whether r came from a page of the gateway's public
// origin.
func (p *Panel) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || p.origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Scheme+"://"+u.Host == p.origin
}

// originOf is the scheme and host of a public URL.
func originOf(public string) string {
	u, err := url.Parse(public)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// openTerminal is GET /sandboxes/{ref}/terminal.
func (p *Panel) openTerminal(w http.ResponseWriter, r *http.Request, c caller) {
	ctx := r.Context()
	if !p.sameOrigin(r) {
		p.log.WarnContext(ctx, "panel: a terminal refused: its page is not of the gateway's public URL (BERTH_PUBLIC_URL)",
			"origin", r.Header.Get("Origin"), "public_origin", p.origin)
		p.render(w, r, http.StatusForbidden, "error", p.view(c, r, "Refused", "", errorPage{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: "A terminal opens only from the panel's own pages."}))
		return
	}
	if p.terminal == nil || p.reach == nil {
		p.fail(w, r, c, fault.Errorf(fault.Unavailable, "this gateway opens no terminals"))
		return
	}
	var stop <-chan struct{}
	if p.track != nil {
		s, done, ok := p.track()
		if !ok {
			p.fail(w, r, c, fault.Errorf(fault.Unavailable, "the gateway is stopping"))
			return
		}
		defer done()
		stop = s
	}
	conn, err := p.reach.Connect(ctx, c.Principal, r.PathValue("ref"), openssh.Port)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	var up, down atomic.Int64
	end := "closed"
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		conn.Close(rctx, reach.Traffic{Up: up.Load(), Down: down.Load(), End: "terminal " + end})
	}()
	size := terminal.Size{Cols: atoiOr(r.URL.Query().Get("cols"), 80), Rows: atoiOr(r.URL.Query().Get("rows"), 24)}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sess, err := p.terminal.Open(octx, conn.Conn, string(conn.Sandbox.ID), size)
	cancel()
	if err != nil {
		p.log.WarnContext(ctx, "panel: could not open a terminal", "sandbox", conn.Sandbox.ID, "err", err)
		p.fail(w, r, c, fault.Errorf(fault.Unavailable, "sandbox %s's shell did not open", conn.Sandbox.Name))
		return
	}
	defer sess.Close()
	// The origin is checked above, against the public URL rather than the
	// Host header the library would compare it with.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		end = "refused"
		return // Accept answered
	}
	ws.SetReadLimit(64 << 10)
	// The terminal outlives nothing but the gateway.
	bctx, cancelBridge := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBridge()
	go func() {
		select {
		case <-stop:
			cancelBridge()
		case <-bctx.Done():
		}
	}()
	end = bridge(bctx, ws, sess, conn, &up, &down)
}

// bridge carries the terminal both ways until either side ends, and says
// how it ended.
func bridge(ctx context.Context, ws *websocket.Conn, sess *terminal.Session, conn *reach.Connection, up, down *atomic.Int64) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg     sync.WaitGroup
		once   sync.Once
		how    string
		active = throttle(conn.Active)
	)
	stop := func(why string) { once.Do(func() { how = why; cancel() }) }
	wg.Go(func() { // the shell's output to the browser
		buf := make([]byte, 32<<10)
		for {
			n, err := sess.Read(buf)
			if n > 0 {
				down.Add(int64(n))
				active()
				if werr := ws.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					stop("by the browser")
					return
				}
			}
			if err != nil {
				stop("by the shell")
				return
			}
		}
	})
	wg.Go(func() { // keys and sizes from the browser
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				stop("by the browser")
				return
			}
			active()
			if typ == websocket.MessageText {
				var size terminal.Size
				if json.Unmarshal(b, &struct {
					Cols *int `json:"cols"`
					Rows *int `json:"rows"`
				}{&size.Cols, &size.Rows}) == nil {
					_ = sess.Resize(size)
				}
				continue
			}
			up.Add(int64(len(b)))
			if _, err := sess.Write(b); err != nil {
				stop("by the shell")
				return
			}
		}
	})
	<-ctx.Done()
	once.Do(func() { how = "by the gateway" }) // stopping
	sess.Close()                               // ends the reader
	if how == "by the shell" {
		ws.Close(websocket.StatusNormalClosure, "the shell ended")
	} else {
		ws.CloseNow()
	}
	wg.Wait()
	return how
}

// throttle calls f at most once a second.
func throttle(f func()) func() {
	var last atomic.Int64
	return func() {
		now := time.Now().UnixNano()
		if prev := last.Load(); now-prev >= int64(time.Second) && last.CompareAndSwap(prev, now) {
			f()
		}
	}
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
