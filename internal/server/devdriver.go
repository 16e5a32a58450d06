package server

import (
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/sandbox"
)

// devDriver is the fake driver as berth serve runs it
// (BERTH_SANDBOX_DRIVER=fake): like podman's, it saves an engineer
// sandbox's memory on the isolated tier only, so a suspend there keeps it
// and a fork works, as on gVisor; elsewhere a suspend stops the machine.
// The CLI's scripts fork through it.
type devDriver struct{ *fake.Checkpointing }

var _ sandbox.Forker = devDriver{}

func newDevDriver() devDriver { return devDriver{fake.NewCheckpointing(fake.New())} }

// Checkpoints says a machine on another tier than the isolated one cannot
// be saved.
func (d devDriver) Checkpoints(sb sandbox.Sandbox) string {
	if sb.Isolation != sandbox.TierIsolated {
		return "its runtime cannot save a machine's memory (gVisor's, the isolated tier's, can)"
	}
	return d.Checkpointing.Checkpoints(sb)
}
