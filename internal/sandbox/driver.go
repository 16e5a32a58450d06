package sandbox

import (
	"context"
	"time"

	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/secret"
)

// Driver runs the machines behind sandboxes: podman containers on one host,
// agent-sandbox objects on Kubernetes, or an in-memory fake. Every driver
// passes the contract suite in driver/drivertest.
type Driver interface {
	// Start makes the machine for spec run and returns once it is ready
	// (SPEC S10: an engineer's once sshd answers with its greeting, an
	// agent's once started). A machine that exists is started again (a
	// resume); with spec.Replace it is first recreated on the same volume,
	// because a resume after expiry brings a new key in its environment.
	Start(ctx context.Context, spec Spec) error
	// Stop stops the machine and keeps its volume. It is fault.NotFound when
	// the driver has no machine for id.
	Stop(ctx context.Context, id ID) error
	// Remove deletes the machine and its volume. A machine already gone is
	// not an error, so terminate can be retried.
	Remove(ctx context.Context, id ID) error
	// Inspect reports the machine's condition; fault.NotFound when it has none.
	Inspect(ctx context.Context, id ID) (Machine, error)
	// List returns every machine the driver holds for this deployment, for
	// the reconciler (SPEC S11: sandboxes never outlive the database).
	List(ctx context.Context) ([]Machine, error)
}

// Spec is what a driver needs to run a sandbox's machine.
type Spec struct {
	Sandbox Sandbox
	// Env is the environment of SPEC S15 plus the caller's additions. It
	// holds the sandbox's key: drivers pass values by name (never in argv)
	// and never log them. Empty when the machine exists and keeps its own.
	Env     map[string]string
	Replace bool
	// Bootstrap, when set, is a one-time token the machine trades at the
	// gateway for its environment (SPEC S12): Env is then nil, so nothing
	// per sandbox is baked into the machine. A driver with warm.Pools takes
	// such a machine from the class's warm pool, or starts it again.
	Bootstrap secret.Secret
	// Run, when set, makes the machine an agent run (SPEC S13): the
	// runner's image with its arguments, the checkout the only mount,
	// hardened, removed after it exits.
	Run *RunSpec
}

// RunSpec is what a driver needs to run an agent (SPEC S13).
type RunSpec struct {
	// Contract is the interface the image implements; it decides where
	// the checkout is mounted, who runs, and what the image is given.
	// "" is berth's.
	Contract Contract
	// Work is the host directory mounted at /work (at /workspace/repo for
	// a kelos image), also the working directory: the only mount.
	Work string
	// KelosSession says the run is a task of a kelos session: it runs
	// under kelos.SessionShell with Args (kelos.SessionArgs), not the
	// image's entrypoint, which the shell invokes to prepare first.
	KelosSession bool
	// Home is a host directory mounted at the image's HOME instead of a
	// fresh tmpfs: a session's agent keeps its own state there across its
	// tasks' machines; "" a tmpfs.
	Home string
	// Plugins is a host directory mounted read-only at kelos.PluginDir:
	// a kelos run's plugins (KELOS_PLUGIN_DIR); "" none.
	Plugins string
	// Args fill the "$@" slot: the runner's ContainerArgs, or for a kelos
	// image the prompt alone, its $1 (none in-machine: berth-init fetches
	// the task and gives it to the image's entrypoint as $1).
	Args []string
	// Network is "allowlist" (the default: a network that reaches only the
	// gateway) or "open".
	Network string
	// InMachine says the machine does the whole run itself, on a driver
	// with InMachineRuns: Work is "", and berth-init (BERTH_RUN_REPORT=
	// gateway in the environment) clones the repository through the
	// gateway into /work (a kelos image's /workspace/repo), fetches the
	// task, streams its output to the gateway, and reports the agent's
	// exit there with its work as a git bundle (it pushes nothing). A
	// kelos image has no berth-init of its own: the driver puts one in.
	InMachine bool
}

// InMachineRuns is the capability of a driver that can neither mount a
// host directory nor follow a machine's output (Kubernetes, which the
// gateway reaches only through the API server, without pods/log): its
// agent runs run whole in the machine (RunSpec.InMachine), and the machine
// reports to the gateway.
type InMachineRuns interface {
	RunsInMachine()
}

// MachineStatus is what a driver can tell of a machine.
type MachineStatus string

// The machine statuses a driver reports.
const (
	MachineRunning MachineStatus = "running"
	MachineStopped MachineStatus = "stopped" // its process ended; ExitCode says how
)

// Machine is a driver's view of one sandbox's machine.
type Machine struct {
	ID       ID
	Status   MachineStatus
	ExitCode int
	Detail   string // a driver's own words on the state, for failure reasons
	// VolumeOnly says the machine itself is gone and only its volume is
	// left (the home of a failed engineer sandbox, or what a crash left).
	VolumeOnly bool
	// Final says a stopped machine cannot be started again: on Kubernetes
	// a finished pod, which the sweep fails whatever its exit code (SPEC
	// S11), where podman suspends an engineer sandbox that exited 0.
	Final bool
	// FinishedAt is when a stopped machine's process ended, as its runtime
	// tells (podman's exit time; on Kubernetes when the controller saw
	// the pod finish or go); zero when the runtime does not say. The
	// running segment closes then, not when the gateway noticed (SPEC S8).
	FinishedAt time.Time
}

// Watcher is the capability of a driver that hears of its machines as
// they change (podman's events, a Kubernetes watch): the service handles a
// machine that stopped or vanished at once, as the sweep would, rather
// than at the next sweep. The sweep stays the safety net: a watch misses
// what happens while it is down.
type Watcher interface {
	// Watch calls changed with the id of each machine of the deployment
	// that may have stopped or vanished, until ctx is done (nil) or the
	// watch breaks (its error; the service watches again after a
	// while). A change may be told twice, or of a machine that did not
	// change: the service looks at the machine itself.
	Watch(ctx context.Context, changed func(ID)) error
}

// Expirer is the capability of a driver whose machines carry their expiry
// themselves, so the cluster enforces it even with every gateway gone
// (SPEC S11: Kubernetes' shutdownTime). Every new expiry is handed to it.
type Expirer interface {
	// SetExpiry moves the machine's expiry to at: fault.NotFound when the
	// driver has no machine for id.
	SetExpiry(ctx context.Context, id ID, at time.Time) error
}

// Checkpointer is the capability of a driver that can suspend a machine
// with its memory (SPEC S3, the isolated tier under gVisor): the machine's
// memory, processes and open files are saved beside its volume and the
// machine stops; a resume restores them, so the processes go on where
// they were.
type Checkpointer interface {
	// Checkpoints says whether sb's machine can be suspended with its
	// memory: "" when it can, else why not (for show and --help).
	Checkpoints(sb Sandbox) string
	// Checkpoint saves the running machine's memory and stops it, and
	// says how large the checkpoint is. On an error nothing of it is
	// kept, and the machine may still run: the caller stops it.
	Checkpoint(ctx context.Context, id ID) (quantity.Bytes, error)
	// Restore starts the machine of spec from its checkpoint and waits
	// until it is ready, as Start does. A checkpoint that cannot be
	// restored is dropped and the machine started cold from its volume:
	// cold then says why (for the audit log); "" when it was restored.
	// The checkpoint is gone afterwards either way.
	Restore(ctx context.Context, spec Spec) (cold string, err error)
}

// Forker is the capability of a driver that can fork a running machine
// (SPEC S3, the isolated tier under gVisor): save it with its memory while
// it runs on, and make new machines that go on from that save, each on a
// copy of its volume.
type Forker interface {
	Checkpointer
	// Fork saves the running machine of src, which runs on, and makes one
	// machine per spec, not started, on a copy of src's volume and with
	// its spec's environment; each one's Restore starts it from the save.
	// It says how large the save is. On an error nothing of the forks is
	// left, and src runs.
	Fork(ctx context.Context, src ID, specs []Spec) (quantity.Bytes, error)
}
