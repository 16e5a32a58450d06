package podman

import (
	"context"
	"os"
	"strings"

	"berth.dev/berth/internal/handoff"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
)

// An engineer's machine takes its tunnels' connections over itself
// (package handoff): the gateway listens on a socket in a directory of
// its own per machine, which the container mounts read only, and
// berth-init in the container connects to it and runs `sshd -i` on each
// client's socket it is handed. A machine made before this (no mount, no
// BERTH_HANDOFF_SOCKET) never connects, and its tunnels copy.

var _ reach.Handoffer = (*Driver)(nil)

// handoffSocket is the socket's path inside a machine.
const handoffSocket = handoff.Mount + "/" + handoff.SocketName

// openHandoff listens for machine name's receiver and returns the
// directory to mount; "" when this driver hands nothing over or the
// socket could not be made (the machine's tunnels then copy).
func (d *Driver) openHandoff(ctx context.Context, name string) string {
	if d.hub == nil {
		return ""
	}
	dir, err := d.hub.Open(name)
	if err != nil {
		d.log.WarnContext(ctx, "this machine's tunnels will copy bytes, not hand them over", "machine", name, "err", err)
		return ""
	}
	return dir
}

// closeHandoff forgets a machine that is gone.
func (d *Driver) closeHandoff(ctx context.Context, name string) {
	if d.hub == nil {
		return
	}
	if err := d.hub.Remove(name); err != nil {
		d.log.WarnContext(ctx, "a machine's handoff directory was not removed", "machine", name, "err", err)
	}
}

// Handoff is reach.Handoffer's: sshd's port of a machine whose receiver
// is connected now.
func (d *Driver) Handoff(id sandbox.ID, port int) reach.Receiver {
	if d.hub == nil || port != sshPort {
		return nil
	}
	name := d.nameOf(id)
	if !d.hub.Ready(name) {
		return nil
	}
	return machineReceiver{hub: d.hub, name: name}
}

// machineReceiver is one machine's receiver, through the hub.
type machineReceiver struct {
	hub  *handoff.Hub
	name string
}

func (m machineReceiver) Give(f *os.File) (<-chan struct{}, error) { return m.hub.Give(m.name, f) }

// tidyHandoff removes the handoff directories of machines podman no
// longer knows (removed while no gateway ran), once idle for OrphanAge:
// a machine being made opens its directory just before its container
// exists. It returns the directories it removed.
func (d *Driver) tidyHandoff(ctx context.Context) ([]string, error) {
	if d.hub == nil {
		return nil, nil
	}
	names, err := d.hub.Names()
	if err != nil {
		return nil, err
	}
	var idle []string
	for _, n := range names {
		if d.hub.Idle(n, d.cfg.OrphanAge) {
			idle = append(idle, n)
		}
	}
	if len(idle) == 0 {
		return nil, nil
	}
	out, err := d.run(ctx, nil, "ps", "--all", "--format", "{{.Names}}")
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, n := range strings.Fields(string(out)) {
		known[n] = true
	}
	var removed []string
	for _, n := range idle {
		if known[n] {
			continue
		}
		if err := d.hub.Remove(n); err != nil {
			return removed, err
		}
		d.log.InfoContext(ctx, "the handoff directory of a machine that is gone removed", "machine", n)
		removed = append(removed, d.hub.Dir(n))
	}
	return removed, nil
}
