package fake

import (
	"context"
	"fmt"
	"sync"

	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// Checkpointing is the fake driver as one that saves machines' memory
// (sandbox.Checkpointer) and forks them (sandbox.Forker): a checkpoint
// stops the machine and is remembered (12Mi); a fork makes each fork's
// machine, stopped, with a save of its own (7Mi); a restore starts the
// machine when it has a save, and says it fell back to a cold start when
// it has none.
type Checkpointing struct {
	*Driver
	mu             sync.Mutex
	saved          map[sandbox.ID]bool
	failCheckpoint error
	failFork       error
	cold           string
	restores       int
	forkedFrom     map[sandbox.ID]sandbox.ID
}

var _ sandbox.Forker = (*Checkpointing)(nil)

// NewCheckpointing is d as a driver that saves machines' memory.
func NewCheckpointing(d *Driver) *Checkpointing {
	return &Checkpointing{Driver: d, saved: map[sandbox.ID]bool{}, forkedFrom: map[sandbox.ID]sandbox.ID{}}
}

// FailNextCheckpoint makes the next checkpoint fail with err, the machine
// left running.
func (c *Checkpointing) FailNextCheckpoint(err error) {
	c.mu.Lock()
	c.failCheckpoint = err
	c.mu.Unlock()
}

// FailNextFork makes the next fork fail with err, nothing made.
func (c *Checkpointing) FailNextFork(err error) { c.mu.Lock(); c.failFork = err; c.mu.Unlock() }

// ColdNextRestore makes the next restore fall back to a cold start,
// saying why.
func (c *Checkpointing) ColdNextRestore(why string) { c.mu.Lock(); c.cold = why; c.mu.Unlock() }

// Restores is how many restores were asked for.
func (c *Checkpointing) Restores() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restores
}

// ForkedFrom is the source of the fork id; "" when it is none.
func (c *Checkpointing) ForkedFrom(id sandbox.ID) sandbox.ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forkedFrom[id]
}

// Checkpoints says an engineer's machine can be saved, an agent's not.
func (c *Checkpointing) Checkpoints(sb sandbox.Sandbox) string {
	if sb.Purpose != sandbox.PurposeEngineer {
		return "an agent's machine is not suspended"
	}
	return ""
}

// Checkpoint saves the machine of id and stops it.
func (c *Checkpointing) Checkpoint(ctx context.Context, id sandbox.ID) (quantity.Bytes, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.failCheckpoint; err != nil {
		c.failCheckpoint = nil
		return 0, err
	}
	if err := c.Driver.Stop(ctx, id); err != nil {
		return 0, err
	}
	c.saved[id] = true
	return 12 << 20, nil
}

// Restore starts the machine of spec, from its save when it has one.
func (c *Checkpointing) Restore(ctx context.Context, spec sandbox.Spec) (string, error) {
	c.mu.Lock()
	c.restores++
	cold := c.cold
	c.cold = ""
	had := c.saved[spec.Sandbox.ID]
	delete(c.saved, spec.Sandbox.ID)
	c.mu.Unlock()
	if !had {
		cold = "its checkpoint is missing"
	}
	return cold, c.Driver.Start(ctx, spec)
}

// Start starts the machine from its volume: its save is dropped.
func (c *Checkpointing) Start(ctx context.Context, spec sandbox.Spec) error {
	c.mu.Lock()
	delete(c.saved, spec.Sandbox.ID)
	c.mu.Unlock()
	return c.Driver.Start(ctx, spec)
}

// Fork makes each fork's machine, stopped, with its save.
func (c *Checkpointing) Fork(ctx context.Context, src sandbox.ID, specs []sandbox.Spec) (quantity.Bytes, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.failFork; err != nil {
		c.failFork = nil
		return 0, err
	}
	if m, err := c.Driver.Inspect(ctx, src); err != nil || m.Status != sandbox.MachineRunning {
		return 0, fmt.Errorf("fake: %s does not run (%v)", src, err)
	}
	for _, spec := range specs {
		c.Driver.Make(spec)
		c.saved[spec.Sandbox.ID] = true
		c.forkedFrom[spec.Sandbox.ID] = src
	}
	return 7 << 20, nil
}
