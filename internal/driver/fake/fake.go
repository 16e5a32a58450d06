// Package fake is an in-memory sandbox.Driver for tests and local work
// (BERTH_SANDBOX_DRIVER=fake). It isolates nothing and runs nothing: a
// "machine" is a map entry. It passes the same contract suite as the real
// drivers, and lets tests make machines exit, vanish or fail to start.
package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
)

type machine struct {
	status   sandbox.MachineStatus
	exitCode int
	finished time.Time // when it last stopped
	env      map[string]string
	spec     sandbox.Sandbox
	run      *sandbox.RunSpec
	ended    chan struct{} // closed when the machine stops or goes
}

// end marks a machine no longer running (once).
func (m *machine) end() {
	select {
	case <-m.ended:
	default:
		close(m.ended)
	}
}

// Agent is what the fake "runs" for an agent run: it may work in the
// checkout (spec.Run.Work) and returns the lines the agent prints on
// stdout (a line made by Stderr goes to stderr) and its exit code.
type Agent func(spec sandbox.Spec) (stdout []string, exit int)

// stderrMark starts a line an Agent returns for stderr: no line of a real
// agent's output starts with a NUL byte.
const stderrMark = "\x00stderr\x00"

// Stderr marks line as written to stderr when an Agent returns it.
func Stderr(line string) string { return stderrMark + line }

// Driver keeps machines in a map.
type Driver struct {
	mu          sync.Mutex
	machines    map[sandbox.ID]*machine
	failStart   map[sandbox.ID]error
	hold        chan struct{} // when not nil, Start waits for it to close
	starts      int
	pointed     map[sandbox.ID]map[int]string         // ports tests made reachable
	receivers   map[sandbox.ID]map[int]reach.Receiver // ports whose connections are handed over
	tidyHeld    chan struct{}                         // when not nil, Tidy waits for it to close
	tidyEntered chan struct{}                         // closed by the first Tidy that waits
	agent       Agent
	leftovers   []string         // what Tidy removes next
	onStop      func(sandbox.ID) // called by Stop once the machine stopped
	now         func() time.Time // the clock of machines' exit times
	watchers    map[*watcher]bool
	broken      chan struct{} // while not nil, watches fail (BreakWatch)
}

// watcher is one Watch under way: the machines that changed, in order.
type watcher struct {
	changed chan sandbox.ID
	broke   chan struct{}
}

// SetAgent makes agent runs run a, once each, when followed.
func (d *Driver) SetAgent(a Agent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.agent = a
}

// Follow "runs" an agent run's agent and reports its output; for any other
// machine it waits until the machine stops or goes.
func (d *Driver) Follow(ctx context.Context, id sandbox.ID, line func(stdout bool, b []byte)) error {
	d.mu.Lock()
	m, ok := d.machines[id]
	agent := d.agent
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("fake: %w: %s", fault.NotFound, id)
	}
	if m.run != nil && agent != nil {
		out, exit := agent(sandbox.Spec{Sandbox: m.spec, Env: maps.Clone(m.env), Run: m.run})
		for _, l := range out {
			text, stderr := strings.CutPrefix(l, stderrMark)
			line(!stderr, []byte(text))
		}
		d.mu.Lock()
		if m.status == sandbox.MachineRunning {
			d.stopped(id, m, exit)
		}
		m.end()
		d.mu.Unlock()
		return nil
	}
	select {
	case <-m.ended:
	case <-ctx.Done():
	}
	return nil
}

// New returns an empty Driver on the wall clock.
func New() *Driver {
	return &Driver{machines: map[sandbox.ID]*machine{}, failStart: map[sandbox.ID]error{}, pointed: map[sandbox.ID]map[int]string{},
		now: time.Now, watchers: map[*watcher]bool{}}
}

var (
	_ sandbox.Driver  = (*Driver)(nil)
	_ reach.Reacher   = (*Driver)(nil)
	_ sandbox.Tidier  = (*Driver)(nil)
	_ sandbox.Watcher = (*Driver)(nil)
)

// SetClock makes now the clock machines' exit times are read on, as a
// test's controlled clock.
func (d *Driver) SetClock(now func() time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.now = now
}

// stopped marks m, running, stopped now with code, and tells the watches.
// d.mu is held.
func (d *Driver) stopped(id sandbox.ID, m *machine, code int) {
	m.status, m.exitCode, m.finished = sandbox.MachineStopped, code, d.now()
	d.tell(id)
}

// tell passes a machine's change to every watch; a watch that cannot
// keep up misses it, as a real one can. d.mu is held.
func (d *Driver) tell(id sandbox.ID) {
	for w := range d.watchers {
		select {
		case w.changed <- id:
		default:
		}
	}
}

// Watch tells changed of every machine that stops (Stop, Exit, an agent
// run's end) or goes (Remove, Vanish) until ctx is done, or until
// BreakWatch breaks it.
func (d *Driver) Watch(ctx context.Context, changed func(sandbox.ID)) error {
	w := &watcher{changed: make(chan sandbox.ID, 1024), broke: make(chan struct{})}
	d.mu.Lock()
	if d.broken != nil {
		d.mu.Unlock()
		return errors.New("fake: the watch is broken")
	}
	d.watchers[w] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.watchers, w)
		d.mu.Unlock()
	}()
	for {
		select {
		case id := <-w.changed:
			changed(id)
		case <-w.broke:
			return errors.New("fake: the watch broke")
		case <-ctx.Done():
			return nil
		}
	}
}

// BreakWatch ends every watch with an error, and fails every watch
// started until release is called: what changes meanwhile is told to
// nobody, as a real watch misses what happens while it is down.
func (d *Driver) BreakWatch() (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.broken = make(chan struct{})
	for w := range d.watchers {
		close(w.broke)
		delete(d.watchers, w)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.broken = nil
			d.mu.Unlock()
		})
	}
}

// Start makes the machine for spec run.
func (d *Driver) Start(ctx context.Context, spec sandbox.Spec) error {
	d.mu.Lock()
	hold := d.hold
	d.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := spec.Sandbox.ID
	if err, ok := d.failStart[id]; ok {
		delete(d.failStart, id)
		return err
	}
	d.starts++
	m, ok := d.machines[id]
	if !ok || spec.Replace {
		if !ok && spec.Env == nil {
			return fault.Errorf(fault.NotFound, "fake: no machine for %s and no environment to create one", id)
		}
		m = &machine{env: maps.Clone(spec.Env), spec: spec.Sandbox, run: spec.Run, ended: make(chan struct{})}
		d.machines[id] = m
	}
	if m.status != sandbox.MachineRunning {
		m.ended = make(chan struct{})
	}
	m.status, m.exitCode = sandbox.MachineRunning, 0
	return nil
}

// Stop stops a machine and keeps it.
func (d *Driver) Stop(_ context.Context, id sandbox.ID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.machines[id]
	if !ok {
		return fmt.Errorf("fake: %w: %s", fault.NotFound, id)
	}
	if m.status == sandbox.MachineRunning {
		d.stopped(id, m, 143)
	}
	m.end()
	if f := d.onStop; f != nil {
		// Outside the lock: f may look at the machine, as a sweep running
		// while a real engine is still stopping it would.
		d.mu.Unlock()
		defer d.mu.Lock()
		f(id)
	}
	return nil
}

// OnStop makes every Stop call f with the machine's id once the machine
// has stopped and before Stop returns: what others see while a real
// engine's stop is still under way.
func (d *Driver) OnStop(f func(sandbox.ID)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onStop = f
}

// Remove forgets a machine.
func (d *Driver) Remove(_ context.Context, id sandbox.ID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.machines[id]; ok {
		m.end()
		delete(d.machines, id)
		d.tell(id)
	}
	return nil
}

// Inspect reports a machine's status.
func (d *Driver) Inspect(_ context.Context, id sandbox.ID) (sandbox.Machine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.machines[id]
	if !ok {
		return sandbox.Machine{}, fmt.Errorf("fake: %w: %s", fault.NotFound, id)
	}
	return m.machine(id), nil
}

func (m *machine) machine(id sandbox.ID) sandbox.Machine {
	out := sandbox.Machine{ID: id, Status: m.status, ExitCode: m.exitCode}
	if m.status == sandbox.MachineStopped {
		out.FinishedAt = m.finished
	}
	return out
}

// List returns every machine, ordered by id.
func (d *Driver) List(context.Context) ([]sandbox.Machine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]sandbox.Machine, 0, len(d.machines))
	for _, id := range slices.Sorted(maps.Keys(d.machines)) {
		out = append(out, d.machines[id].machine(id))
	}
	return out, nil
}

// Exit makes a running machine's process end with code, as if it exited,
// now on the driver's clock.
func (d *Driver) Exit(id sandbox.ID, code int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.machines[id]; ok {
		d.stopped(id, m, code)
		m.end()
	}
}

// Vanish removes a machine behind the service's back.
func (d *Driver) Vanish(id sandbox.ID) { _ = d.Remove(context.Background(), id) }

// Plant adds a machine the database knows nothing of, as a crash would leave.
func (d *Driver) Plant(id sandbox.ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.machines[id] = &machine{status: sandbox.MachineRunning, ended: make(chan struct{})}
}

// Make makes the machine of spec without starting it, as a fork's is
// made before its restore starts it.
func (d *Driver) Make(spec sandbox.Spec) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := &machine{status: sandbox.MachineStopped, env: maps.Clone(spec.Env), spec: spec.Sandbox, ended: make(chan struct{})}
	m.end()
	d.machines[spec.Sandbox.ID] = m
}

// FailStart makes the next Start of id fail with err.
func (d *Driver) FailStart(id sandbox.ID, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failStart[id] = err
}

// Hold makes every Start wait until the returned func is called.
func (d *Driver) Hold() (release func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	d.hold = ch
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.hold = nil
			d.mu.Unlock()
			close(ch)
		})
	}
}

// Env returns the environment a machine was created with.
func (d *Driver) Env(id sandbox.ID) map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.machines[id]; ok {
		return maps.Clone(m.env)
	}
	return nil
}

// Has reports whether the driver holds a machine for id.
func (d *Driver) Has(id sandbox.ID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.machines[id]
	return ok
}

// Ports are those the Kubernetes driver allows: the fake stands in for
// either real driver.
func (d *Driver) Ports() reach.PortRange { return reach.PortRange{Lo: 1024, Hi: 65535} }

// Addr returns the address a test pointed port of a running machine at.
// A fake machine runs nothing, so any other port is unavailable.
func (d *Driver) Addr(_ context.Context, id sandbox.ID, port int) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.machines[id]
	if !ok {
		return "", fmt.Errorf("fake: %w: %s", fault.NotFound, id)
	}
	if m.status != sandbox.MachineRunning {
		return "", fault.Errorf(fault.Conflict, "fake: %s is not running", id)
	}
	addr, ok := d.pointed[id][port]
	if !ok {
		return "", fault.Errorf(fault.Unavailable, "fake: nothing listens on port %d of %s (the fake driver runs nothing)", port, id)
	}
	return addr, nil
}

// Point makes port of a sandbox reachable at addr, such as a test's
// listener, so the gateway's tunnel has something to dial.
func (d *Driver) Point(id sandbox.ID, port int, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pointed[id] == nil {
		d.pointed[id] = map[int]string{}
	}
	d.pointed[id][port] = addr
}

// HandOver makes recv take connections to port of a sandbox over, as a
// podman machine's berth-init does (reach.Handoffer); nil stops it.
func (d *Driver) HandOver(id sandbox.ID, port int, recv reach.Receiver) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.receivers == nil {
		d.receivers = map[sandbox.ID]map[int]reach.Receiver{}
	}
	if d.receivers[id] == nil {
		d.receivers[id] = map[int]reach.Receiver{}
	}
	d.receivers[id][port] = recv
}

// Handoff is reach.Handoffer's: what HandOver set.
func (d *Driver) Handoff(id sandbox.ID, port int) reach.Receiver {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.receivers[id][port]
}

// Starts counts the machines started (or restarted) so far.
func (d *Driver) Starts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.starts
}

// Leave plants leftovers no sandbox owns, as a killed engine leaves them,
// for the next Tidy to remove.
func (d *Driver) Leave(names ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.leftovers = append(d.leftovers, names...)
}

// HoldTidy makes the next Tidy calls wait until release (or their
// context ends), as a sweep held up by a slow engine; entered is closed
// once one waits.
func (d *Driver) HoldTidy() (entered <-chan struct{}, release func()) {
	in, held := make(chan struct{}), make(chan struct{})
	d.mu.Lock()
	d.tidyHeld, d.tidyEntered = held, in
	d.mu.Unlock()
	return in, sync.OnceFunc(func() { close(held) })
}

// Tidy removes what Leave planted and returns it.
func (d *Driver) Tidy(ctx context.Context) ([]string, error) {
	d.mu.Lock()
	held, in := d.tidyHeld, d.tidyEntered
	d.tidyEntered = nil
	d.mu.Unlock()
	if held != nil {
		if in != nil {
			close(in)
		}
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.leftovers
	d.leftovers = nil
	return out, nil
}

// RunSpec returns the agent run a machine was started with; nil when none.
func (d *Driver) RunSpec(id sandbox.ID) *sandbox.RunSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.machines[id]; ok {
		return m.run
	}
	return nil
}

// InMachine is the fake as a driver whose agent runs run whole in their
// machines (sandbox.InMachineRuns, as on Kubernetes): it follows nothing,
// so a test plays the machine's part through the gateway's run routes.
type InMachine struct{ d *Driver }

// NewInMachine wraps d; d stays the test's handle on the machines.
func NewInMachine(d *Driver) InMachine { return InMachine{d: d} }

// RunsInMachine marks the capability.
func (InMachine) RunsInMachine() {}

func (m InMachine) Start(ctx context.Context, spec sandbox.Spec) error { return m.d.Start(ctx, spec) }
func (m InMachine) Stop(ctx context.Context, id sandbox.ID) error      { return m.d.Stop(ctx, id) }
func (m InMachine) Remove(ctx context.Context, id sandbox.ID) error    { return m.d.Remove(ctx, id) }
func (m InMachine) Inspect(ctx context.Context, id sandbox.ID) (sandbox.Machine, error) {
	return m.d.Inspect(ctx, id)
}
func (m InMachine) List(ctx context.Context) ([]sandbox.Machine, error) { return m.d.List(ctx) }
