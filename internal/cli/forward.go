package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/tunnel"
)

// forwardDialTimeout bounds a tunnel's connect and handshake, not its
// stream.
const forwardDialTimeout = 30 * time.Second

func newSandboxForwardCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "forward NAME [LOCAL:]PORT...",
		Short: "Forward local ports to a sandbox's ports through the gateway",
		Long: `Listen on 127.0.0.1 and carry each connection to a port of a running
sandbox through the gateway's tunnel, as kubectl port-forward does, until
interrupted (Ctrl-C or SIGTERM end it, exit 0).

Each PORT is the sandbox's (1024–65535 on every driver); LOCAL is the
port to listen on: the same number when left out, any free port when 0
(the line "Forwarding from 127.0.0.1:L -> PORT" says which). The gateway
checks each connection as it checks ssh: the sandbox's owner and
operators may; an organisation's administrator is refused (and the
attempt is in the audit log); anybody else does not find the sandbox.

A connection the gateway refuses is closed and why is printed; when the
very first one is refused as not allowed or not reachable (400, 401, 403,
404), the command exits 1. A sandbox with nothing listening on PORT yet
only prints why, so a server started later is reached.

The key comes from $BERTH_API_KEY or the login file, never from the
command line.`,
		Example: `  berth sandbox forward dev 3000            # http://127.0.0.1:3000 is the sandbox's 3000
  berth sandbox forward dev 8080:3000 9229   # local 8080 to 3000, and 9229 to 9229
  berth sandbox forward dev 0:3000           # any free local port (printed)`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("%s: want a sandbox name and at least one [LOCAL:]PORT (see %s --help)", cmd.CommandPath(), cmd.CommandPath())}
			}
			if _, err := parseForwards(args[1:]); err != nil {
				return usageError{fmt.Errorf("%s: %w (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fwds, _ := parseForwards(args[1:]) // checked by Args
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			sb, err := c.Sandbox(ctx, args[0])
			if err != nil {
				return err
			}
			if err := shellable(sb); err != nil {
				return err
			}
			f := &forwarder{c: c, sandbox: sb, out: cmd.OutOrStdout(), errs: cmd.ErrOrStderr(), fatal: make(chan error, 1)}
			return f.run(ctx, fwds)
		},
	}
}

// forward is one [LOCAL:]PORT: listen on local (0: any free port), reach
// the sandbox's port.
type forward struct{ local, port int }

// parseForwards reads the [LOCAL:]PORT arguments.
func parseForwards(args []string) ([]forward, error) {
	var out []forward
	locals := map[int]bool{}
	for _, a := range args {
		local, remote, hasLocal := strings.Cut(a, ":")
		if !hasLocal {
			local, remote = "", a
		}
		port, err := strconv.Atoi(remote)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("%q: PORT must be a port number (the gateway reaches 1024–65535)", a)
		}
		f := forward{local: port, port: port}
		if hasLocal {
			if f.local, err = strconv.Atoi(local); err != nil || f.local < 0 || f.local > 65535 {
				return nil, fmt.Errorf("%q: LOCAL must be a local port from 0 (any free one) to 65535", a)
			}
		}
		if f.local != 0 && locals[f.local] {
			return nil, fmt.Errorf("%q: local port %d is given twice", a, f.local)
		}
		locals[f.local] = true
		out = append(out, f)
	}
	return out, nil
}

// forwarder carries local connections to one sandbox's ports.
type forwarder struct {
	c          *client.Client
	sandbox    api.Sandbox
	out, errs  io.Writer
	mu         sync.Mutex // serialises the output lines
	dialled    atomic.Bool
	fatal      chan error
	connection sync.WaitGroup
}

// run listens for every forward, then serves them until ctx ends (nil) or
// the first dial is refused for good (its error).
func (f *forwarder) run(ctx context.Context, fwds []forward) error {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for _, fw := range fwds {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(fw.local)))
		if err != nil {
			return fmt.Errorf("listen for port %d: %w", fw.port, err)
		}
		lns = append(lns, ln)
	}
	for i, ln := range lns {
		f.printf(f.out, "Forwarding from %s -> %d\n", ln.Addr(), fwds[i].port)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var accepting sync.WaitGroup
	for i, ln := range lns {
		accepting.Go(func() { f.accept(ctx, ln, fwds[i].port) })
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-f.fatal:
	}
	cancel()
	for _, ln := range lns {
		ln.Close()
	}
	accepting.Wait()
	f.connection.Wait()
	return err
}

// accept serves ln's connections until it is closed.
func (f *forwarder) accept(ctx context.Context, ln net.Listener, port int) {
	for {
		local, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				f.printf(f.errs, "berth: accept on %s: %v\n", ln.Addr(), err)
			}
			return
		}
		f.connection.Go(func() { f.carry(ctx, local, ln.Addr(), port) })
	}
}

// carry dials the sandbox's port through the gateway for one local
// connection and copies bytes both ways until either end stops.
func (f *forwarder) carry(ctx context.Context, local net.Conn, from net.Addr, port int) {
	dctx, cancel := context.WithTimeout(ctx, forwardDialTimeout)
	remote, err := f.c.Tunnel(dctx, f.sandbox.ID, port)
	cancel()
	if err != nil {
		local.Close()
		err = fmt.Errorf("forward %s -> %d: %w", from, port, err)
		if !f.dialled.Load() && refusedForGood(err) {
			select {
			case f.fatal <- err:
			default:
			}
			return
		}
		if ctx.Err() == nil {
			f.printf(f.errs, "berth: %s\n", describe(err))
		}
		return
	}
	f.dialled.Store(true)
	tunnel.Join(ctx, local, remote, tunnel.Options{})
}

// refusedForGood reports a refusal that no retry changes: the port is
// out of range, or the caller may not reach the sandbox.
func refusedForGood(err error) bool {
	ae, ok := errors.AsType[*api.Error](err)
	if !ok {
		return false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

func (f *forwarder) printf(w io.Writer, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(w, format, args...)
}
