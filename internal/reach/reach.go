// Package reach is the way into a sandbox (SPEC S10), one floor above
// sandbox: who may get inside, dialling the port a driver reaches, the
// idle clock the tunnel's connections feed (sandbox's Activity port), and
// the audit entry of each shell. A sandbox's state it changes only through
// the sandbox service (Recheck).
package reach

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// PortRange is the ports of a sandbox a driver lets the gateway reach, from
// Lo to Hi inclusive.
type PortRange struct{ Lo, Hi int }

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Lo && port <= r.Hi }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return "port " + strconv.Itoa(r.Lo)
	}
	return fmt.Sprintf("ports %d–%d", r.Lo, r.Hi)
}

// Reacher is the capability of a driver whose sandboxes the gateway can
// dial (SPEC S10, S11): podman reaches a container's address, Kubernetes a
// pod's. A driver without it has no tunnel.
type Reacher interface {
	// Addr returns the host:port the gateway dials for port of a sandbox's
	// machine: fault.NotFound when the driver has no machine, fault.Conflict when
	// it is not running.
	Addr(ctx context.Context, id sandbox.ID, port int) (string, error)
	// Ports are the ports Addr may be asked for (podman: 2222; Kubernetes:
	// 1024–65535).
	Ports() PortRange
}

// Handoffer is the capability of a driver whose machines can take a
// client's connection over themselves (package handoff): their sshd then
// serves the client's socket, and the gateway copies no byte.
type Handoffer interface {
	// Handoff is what takes a connection to port of the sandbox's
	// machine over, or nil when nothing in it would now.
	Handoff(id sandbox.ID, port int) Receiver
}

// Receiver takes a connected socket over inside a sandbox (the tunnel's
// Receiver): f stays the caller's, and ended is closed once the sandbox's
// server of it has ended.
type Receiver interface {
	Give(f *os.File) (ended <-chan struct{}, err error)
}

// Sandboxes is what the way in needs of the sandbox service: the sandbox
// a caller names, as for every call (not found for whoever may not see
// it), and a sandbox whose machine did not answer looked at again, as the
// sweep would.
type Sandboxes interface {
	Get(ctx context.Context, p account.Principal, ref string) (sandbox.Sandbox, error)
	Recheck(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error)
}

// Store is where the idle clock is saved for the other replicas' sweeps.
type Store interface {
	// SaveActivity moves the sandbox's ActiveAt forward to at (never back).
	SaveActivity(ctx context.Context, id sandbox.ID, at time.Time) error
}

// Holds is how a replica marks the sandboxes it serves (sandbox.Replicas'
// Hold), so the leader's sweep does not count one idle while a
// connection through this replica is open.
type Holds interface {
	Hold(ctx context.Context, id sandbox.ID) (release func(), err error)
}

// Config is the way in's part of the deployment.
type Config struct {
	// Driver names the driver for messages.
	Driver string
	// Reacher dials the sandboxes' ports; nil: this driver has no tunnel.
	Reacher Reacher
	// Holds holds a sandbox while a connection to it is open; nil on a
	// gateway alone.
	Holds Holds
	// Audit records each shell and each refusal; nil records nothing.
	Audit audit.Recorder
}

// Service lets callers into sandboxes. It is the sandbox service's
// Activity.
type Service struct {
	sandboxes Sandboxes
	cfg       Config
	audit     audit.Recorder
	log       *slog.Logger
	now       func() time.Time
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	active    *activities
}

var _ sandbox.Activity = (*Service)(nil)

// NewService returns a Service over sandboxes, saving the idle clock to
// store.
func NewService(sandboxes Sandboxes, store Store, cfg Config, log *slog.Logger, now func() time.Time) *Service {
	rec := cfg.Audit
	if rec == nil {
		rec = audit.Discard{}
	}
	return &Service{sandboxes: sandboxes, cfg: cfg, audit: rec, log: log, now: now,
		dial:   (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		active: &activities{of: map[sandbox.ID]*activity{}, now: now, store: store, log: log}}
}

// Connection is one connection through the gateway's tunnel to a port of
// a sandbox, from Connect to Close. While any is open the sandbox is not
// idle (SPEC S3).
type Connection struct {
	// Conn is the sandbox's end, dialled by Connect, or by Dial when the
	// connection was to be handed over and could not be.
	Conn net.Conn
	// Handoff, when not nil, takes the client's connection over in the
	// sandbox, and Conn is nil until Dial.
	Handoff Receiver
	Sandbox sandbox.Sandbox
	Port    int

	addr string

	svc    *Service
	caller account.Principal
	opened time.Time
	once   sync.Once
	// release ends the replica's hold on the sandbox (see Replicas).
	release func()
}

// Traffic is what a connection carried.
type Traffic struct {
	Up   int64  // bytes to the sandbox
	Down int64  // bytes from it
	End  string // how it ended, in words ("closed", "idle"…)
}

// Connect opens a connection to port of the sandbox ref for p (SPEC S6,
// S10): operators and the owner may; an organisation's administrator sees
// the sandbox but may not get inside (fault.Forbidden, and the refusal is
// audited); anybody else does not find it. The sandbox must be a running
// engineer sandbox, and the driver must reach the port.
func (s *Service) Connect(ctx context.Context, p account.Principal, ref string, port int) (*Connection, error) {
	c, err := s.connect(ctx, p, ref, port, false)
	if err != nil {
		return nil, fmt.Errorf("connect to port %d of sandbox %s: %w", port, ref, err)
	}
	return c, nil
}

// ConnectOrHand is Connect for a client's connection the sandbox's
// machine may take over itself (the tunnel's): when the driver's machine
// has a receiver for port (Handoffer), it dials nothing and the
// Connection's Handoff is set; else it is Connect.
func (s *Service) ConnectOrHand(ctx context.Context, p account.Principal, ref string, port int) (*Connection, error) {
	c, err := s.connect(ctx, p, ref, port, true)
	if err != nil {
		return nil, fmt.Errorf("connect to port %d of sandbox %s: %w", port, ref, err)
	}
	return c, nil
}

// Admit is Connect's rule without the connection: whether p may get
// inside port of the sandbox ref, and the sandbox. What Connect refuses
// it refuses, the same way (an administrator's refusal audited), up to
// dialling; it does not look at the port's number. The HTTP preview asks
// it before it hands out a preview and on each request through one.
func (s *Service) Admit(ctx context.Context, p account.Principal, ref string, port int) (sandbox.Sandbox, error) {
	sb, err := s.admit(ctx, p, ref, port)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("port %d of sandbox %s: %w", port, ref, err)
	}
	return sb, nil
}

func (s *Service) admit(ctx context.Context, p account.Principal, ref string, port int) (sandbox.Sandbox, error) {
	sb, err := s.sandboxes.Get(ctx, p, ref)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if !p.CanShell(sb.Owner) {
		s.record(ctx, audit.Event{At: s.now(), Org: sb.Org, Actor: p.User.ID, Sandbox: string(sb.ID), Action: audit.ShellOpen,
			Target: portTarget(port), Outcome: audit.Refused, Detail: "only its owner and operators may open a shell in a sandbox"})
		return sandbox.Sandbox{}, fault.Errorf(fault.Forbidden, "an organisation's administrator may see sandbox %s but not get inside it; only its owner and operators may", sb.Name)
	}
	if sb.Purpose != sandbox.PurposeEngineer {
		return sandbox.Sandbox{}, fault.Errorf(fault.Conflict, "nothing attaches to an agent sandbox")
	}
	if sb.State != sandbox.StateRunning {
		return sandbox.Sandbox{}, notRunning(sb)
	}
	return sb, nil
}

// Ports are the ports this deployment's driver reaches; ok is false when
// it reaches none.
func (s *Service) Ports() (ports PortRange, ok bool) {
	if s.cfg.Reacher == nil {
		return PortRange{}, false
	}
	return s.cfg.Reacher.Ports(), true
}

func (s *Service) connect(ctx context.Context, p account.Principal, ref string, port int, hand bool) (*Connection, error) {
	sb, err := s.admit(ctx, p, ref, port)
	if err != nil {
		return nil, err
	}
	reach := s.cfg.Reacher
	if reach == nil {
		return nil, fault.Errorf(fault.Unavailable, "this deployment's driver (%s) cannot reach a sandbox's ports", orNone(s.cfg.Driver))
	}
	if ports := reach.Ports(); !ports.Contains(port) {
		return nil, fault.Field("port", "%d is not reachable: the %s driver reaches %s", port, s.cfg.Driver, ports)
	}
	addr, err := reach.Addr(ctx, sb.ID, port)
	if err != nil {
		return nil, s.unreachable(ctx, sb, fmt.Errorf("driver: %w", err))
	}
	c := &Connection{Sandbox: sb, Port: port, svc: s, caller: p, addr: addr}
	if h, ok := reach.(Handoffer); ok && hand {
		c.Handoff = h.Handoff(sb.ID, port)
	}
	if c.Handoff == nil {
		// Dialled now, so that a sandbox that does not answer is told
		// before the upgrade. A handed connection is dialled by nobody:
		// a dial would cost sshd a process for nothing.
		if c.Conn, err = c.dial(ctx); err != nil {
			return nil, err
		}
	}
	s.ConnectionOpened(sb.ID)
	// Held while open: the idle clock of another replica's sweep does not
	// see this connection.
	c.release = s.hold(ctx, sb.ID)
	c.opened = s.now()
	return c, nil
}

// Dial dials the sandbox's port for a connection that was to be handed
// over and could not be; Conn is then set.
func (c *Connection) Dial(ctx context.Context) (net.Conn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.Conn = conn
	return conn, nil
}

func (c *Connection) dial(ctx context.Context) (net.Conn, error) {
	s, sb := c.svc, c.Sandbox
	conn, err := s.dial(ctx, "tcp", c.addr)
	if err != nil {
		s.log.WarnContext(ctx, "sandbox does not answer", "sandbox", sb.ID, "port", c.Port, "err", err)
		return nil, s.unreachable(ctx, sb, fault.Errorf(fault.Unavailable, "sandbox %s does not answer on port %d", sb.Name, c.Port))
	}
	return conn, nil
}

// notRunning is why a sandbox that is not running has no tunnel, in its
// state's words: why it is in it, and what its owner can do.
func notRunning(sb sandbox.Sandbox) error {
	msg := fmt.Sprintf("sandbox %s is %s", sb.Name, sb.State)
	if sb.Reason != "" && sb.Reason != string(sb.State) {
		msg += " (" + sb.Reason + ")"
	}
	switch sb.State {
	case sandbox.StateSuspended, sandbox.StateExpired:
		msg += fmt.Sprintf("; resume it first (berth sandbox resume %s)", sb.Name)
	case sandbox.StateFailed:
		msg += fmt.Sprintf("; a failed sandbox is over: its volume is kept until it is terminated (berth sandbox terminate %s)", sb.Name)
	}
	return fault.Errorf(fault.Conflict, "%s", msg)
}

// unreachable is why a running sandbox could not be reached (err), unless
// its machine has stopped or gone behind the gateway's back: then the
// sandbox is handled at once, as the sweep would, and the answer is its
// new state's, in berth's words rather than the driver's or the dialler's.
func (s *Service) unreachable(ctx context.Context, sb sandbox.Sandbox, err error) error {
	if now, rerr := s.sandboxes.Recheck(ctx, sb); rerr == nil && now.State != sandbox.StateRunning {
		return notRunning(now)
	}
	return err
}

// hold holds id for this replica and returns its release. A hold that
// cannot be taken is logged and the connection goes on: at worst the
// leader's sweep counts the sandbox's idle time from the row.
func (s *Service) hold(ctx context.Context, id sandbox.ID) func() {
	if s.cfg.Holds == nil {
		return func() {}
	}
	release, err := s.cfg.Holds.Hold(ctx, id)
	if err != nil {
		s.log.WarnContext(ctx, "could not hold a sandbox for this replica", "sandbox", id, "err", err)
		return func() {}
	}
	return release
}

// record writes an event that has no write of its own; a failure is
// logged.
func (s *Service) record(ctx context.Context, e audit.Event) {
	audit.Record(ctx, s.audit, s.log, s.now, e)
}

func orNone(driver string) string {
	if driver == "" {
		return "none"
	}
	return driver
}

func portTarget(port int) string { return "port " + strconv.Itoa(port) }

// Active records that bytes moved through c: the sandbox's idle clock
// restarts. The tunnel calls it at most once a second.
func (c *Connection) Active() { c.svc.active.touch(c.Sandbox.ID) }

// Close closes the sandbox's end, ends the connection for the idle clock,
// and records it in the audit log with how long it lasted and what it
// carried. Only the first call counts.
func (c *Connection) Close(ctx context.Context, t Traffic) {
	c.once.Do(func() {
		if c.Conn != nil {
			c.Conn.Close()
		}
		c.svc.ConnectionClosed(c.Sandbox.ID)
		// Saved before the hold goes: the sweep of another replica must
		// not count the sandbox idle from before this connection.
		save, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		c.svc.active.save(save, c.Sandbox.ID)
		cancel()
		if c.release != nil {
			c.release()
		}
		end := t.End
		if end == "" {
			end = "closed"
		}
		took := c.svc.now().Sub(c.opened).Round(time.Second)
		detail := fmt.Sprintf("%s open, ended %s; %d bytes to the sandbox, %d from it; key %s",
			quantity.FormatDuration(took), end, t.Up, t.Down, c.caller.KeyID)
		c.svc.record(ctx, audit.Event{At: c.opened, Org: c.Sandbox.Org, Actor: c.caller.User.ID, Sandbox: string(c.Sandbox.ID),
			Action: audit.ShellOpen, Target: portTarget(c.Port), Outcome: audit.OK, Detail: detail})
	})
}
