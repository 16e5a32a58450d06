package sandbox

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
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
	Addr(ctx context.Context, id ID, port int) (string, error)
	// Ports are the ports Addr may be asked for (podman: 2222; Kubernetes:
	// 1024–65535).
	Ports() PortRange
}

// Connection is one connection through the gateway's tunnel to a port of
// a sandbox, from Connect to Close. While any is open the sandbox is not
// idle (SPEC S3).
type Connection struct {
	// Conn is the sandbox's end, dialled by Connect.
	Conn    net.Conn
	Sandbox Sandbox
	Port    int

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
	c, err := s.connect(ctx, p, ref, port)
	if err != nil {
		return nil, fmt.Errorf("connect to port %d of sandbox %s: %w", port, ref, err)
	}
	return c, nil
}

func (s *Service) connect(ctx context.Context, p account.Principal, ref string, port int) (*Connection, error) {
	sb, err := s.resolve(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	if !p.CanShell(sb.Owner) {
		s.record(ctx, audit.Event{At: s.now(), Org: sb.Org, Actor: p.User.ID, Sandbox: string(sb.ID), Action: audit.ShellOpen,
			Target: portTarget(port), Outcome: audit.Refused, Detail: "only its owner and operators may open a shell in a sandbox"})
		return nil, fault.Errorf(fault.Forbidden, "an organisation's administrator may see sandbox %s but not get inside it; only its owner and operators may", sb.Name)
	}
	if sb.Purpose != PurposeEngineer {
		return nil, fault.Errorf(fault.Conflict, "nothing attaches to an agent sandbox")
	}
	if sb.State != StateRunning {
		return nil, notRunning(sb)
	}
	reach, ok := s.driver.(Reacher)
	if !ok {
		return nil, fault.Errorf(fault.Unavailable, "this deployment's driver (%s) cannot reach a sandbox's ports", orNone(s.cfg.Driver))
	}
	if ports := reach.Ports(); !ports.Contains(port) {
		return nil, fault.Field("port", "%d is not reachable: the %s driver reaches %s", port, s.cfg.Driver, ports)
	}
	addr, err := reach.Addr(ctx, sb.ID, port)
	if err != nil {
		return nil, s.unreachable(ctx, sb, fmt.Errorf("driver: %w", err))
	}
	conn, err := s.dial(ctx, "tcp", addr)
	if err != nil {
		s.log.WarnContext(ctx, "sandbox does not answer", "sandbox", sb.ID, "port", port, "err", err)
		return nil, s.unreachable(ctx, sb, fault.Errorf(fault.Unavailable, "sandbox %s does not answer on port %d", sb.Name, port))
	}
	s.ConnectionOpened(sb.ID)
	// Held while open: the idle clock of another replica's sweep does not
	// see this connection.
	release := s.hold(ctx, sb.ID)
	return &Connection{Conn: conn, Sandbox: sb, Port: port, svc: s, caller: p, opened: s.now(), release: release}, nil
}

// notRunning is why a sandbox that is not running has no tunnel, in its
// state's words: why it is in it, and what its owner can do.
func notRunning(sb Sandbox) error {
	msg := fmt.Sprintf("sandbox %s is %s", sb.Name, sb.State)
	if sb.Reason != "" && sb.Reason != string(sb.State) {
		msg += " (" + sb.Reason + ")"
	}
	switch sb.State {
	case StateSuspended, StateExpired:
		msg += fmt.Sprintf("; resume it first (berth sandbox resume %s)", sb.Name)
	case StateFailed:
		msg += fmt.Sprintf("; a failed sandbox is over: its volume is kept until it is terminated (berth sandbox terminate %s)", sb.Name)
	}
	return fault.Errorf(fault.Conflict, "%s", msg)
}

// unreachable is why a running sandbox could not be reached (err), unless
// its machine has stopped or gone behind the gateway's back: then the
// sandbox is handled at once, as the sweep would, and the answer is its
// new state's, in berth's words rather than the driver's or the dialler's.
func (s *Service) unreachable(ctx context.Context, sb Sandbox, err error) error {
	if m, ierr := s.driver.Inspect(ctx, sb.ID); ierr == nil && m.Status == MachineRunning {
		return err
	}
	if herr := (sweeper{s}).sweepSandbox(ctx, sb.ID); herr != nil {
		s.log.WarnContext(ctx, "could not handle a sandbox whose machine stopped", "sandbox", sb.ID, "err", herr)
	}
	if now, gerr := s.store.GetSandbox(ctx, sb.ID); gerr == nil && now.State != StateRunning {
		return notRunning(now)
	}
	return err
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
		c.Conn.Close()
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
