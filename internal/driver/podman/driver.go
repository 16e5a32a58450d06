package podman

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/handoff"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
)

// Runner runs the podman binary with extra environment and returns its
// standard output; stderr is part of the error. Tests swap in a recorder.
type Runner func(ctx context.Context, env []string, args ...string) ([]byte, error)

// Driver runs sandboxes as podman containers.
type Driver struct {
	cfg  Config
	run  Runner
	log  *slog.Logger
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// ips caches running containers' addresses for Addr: asking podman
	// costs tens of milliseconds on every ssh connection. Addresses are
	// reused, so any start, stop or removal empties it.
	mu  sync.Mutex
	ips map[sandbox.ID]string
	// forking holds the names of the containers a fork under way holds
	// paused (fork.go): Tidy unpauses only what none holds, and a second
	// fork of one is refused meanwhile.
	forking map[string]bool

	pool pools // warm pools (pools.go)
	// making serialises a sandbox's create with its removal (machinelock.go).
	making machineLocks
	// hub listens for the machines' handoff receivers (handoff.go); nil:
	// every tunnel copies.
	hub *handoff.Hub
	// svc is the podman service once it answers; nil, the binary takes
	// every call (service.go). svcDone is closed once its start is over.
	svc     atomic.Pointer[service]
	svcOnce sync.Once
	svcDone chan struct{} // under mu
	real    bool          // New's: it runs the podman binary, and may start its service
}

var (
	_ sandbox.Driver       = (*Driver)(nil)
	_ reach.Reacher        = (*Driver)(nil)
	_ sandbox.Tidier       = (*Driver)(nil)
	_ sandbox.Checkpointer = (*Driver)(nil)
)

// New writes the driver's podman configuration into cfg.StateDir and
// returns a Driver that runs cfg.Binary.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	cfg = cfg.withDefaults()
	if cfg.StateDir == "" {
		return nil, errors.New("podman: no state directory")
	}
	if err := cfg.WriteConfig(); err != nil {
		return nil, err
	}
	// The env files hold sandboxes' keys: nobody but the gateway's user
	// may look in their directory, whatever made it.
	fixed, err := privateDir(cfg.envDir())
	if err != nil {
		return nil, fmt.Errorf("podman: env files: %w", err)
	}
	if fixed {
		log.Warn("the env files' directory was open to others; it is 0700 now", "dir", cfg.envDir())
	}
	d := &Driver{cfg: cfg, log: log, dial: (&net.Dialer{Timeout: time.Second}).DialContext}
	d.run = d.exec
	if err := d.loadClaims(); err != nil {
		return nil, err
	}
	if cfg.HandoffDir != "" {
		d.hub = handoff.NewHub(cfg.HandoffDir, log)
		// The machines that outlived the last gateway connect again.
		if err := d.hub.Reopen(); err != nil {
			log.Warn("some sandboxes' tunnels will copy bytes, not hand them over", "err", err)
		}
	}
	d.real = true
	return d, nil
}

// NewWithRunner returns a Driver that runs podman through run (tests).
func NewWithRunner(cfg Config, log *slog.Logger, run Runner) *Driver {
	d := &Driver{cfg: cfg.withDefaults(), run: run, log: log, dial: (&net.Dialer{Timeout: time.Second}).DialContext}
	d.pool.claims, d.pool.members = map[sandbox.ID]string{}, map[string]*member{}
	return d
}

// exec runs the real binary.
func (d *Driver) exec(ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.cfg.Binary, args...)
	cmd.SysProcAttr = ownGroup()
	cmd.Env = append(d.cfg.Env(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if len(args) > 0 && args[0] == "logs" {
		// A container's stderr comes out on podman's stderr: keep both.
		cmd.Stderr = &stdout
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &podmanError{args: args, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// podmanError is a failed podman command: its verb, how it ended and what
// it said. Argv holds no secret values, so the verb is safe to show.
type podmanError struct {
	args   []string
	err    error
	stderr string
}

func (e *podmanError) Error() string {
	verb := "podman"
	if len(e.args) > 0 {
		verb += " " + e.args[0]
		if len(e.args) > 1 && (e.args[0] == "volume" || e.args[0] == "container") {
			verb += " " + e.args[1]
		}
	}
	how := e.err.Error()
	var exit *exec.ExitError
	if errors.As(e.err, &exit) && exit.ExitCode() >= 0 {
		how = "exited " + strconv.Itoa(exit.ExitCode())
	}
	msg := said(e.stderr)
	if msg == "" {
		return fmt.Sprintf("%s %s", verb, how)
	}
	return fmt.Sprintf("%s %s: %s", verb, how, msg)
}

// said is what podman (and the OCI runtime under it) said on stderr that
// says why: its error lines, without podman's "Error: " and without its
// warnings (a pull's retries, each repeating the error); else its last
// lines.
func said(stderr string) string {
	var errs []string
	for line := range strings.Lines(stderr) {
		if msg, ok := strings.CutPrefix(strings.TrimSpace(line), "Error: "); ok && msg != "" {
			errs = append(errs, msg)
		}
	}
	if len(errs) > 0 {
		return strings.Join(errs[max(0, len(errs)-2):], "; ")
	}
	var keep []string
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, "level=warning") {
			keep = append(keep, line)
		}
	}
	return lastLines(strings.Join(keep, ""), 3)
}

func (e *podmanError) Unwrap() error { return e.err }

// noSuch reports whether podman said the object does not exist.
func noSuch(err error) bool {
	var pe *podmanError
	if !errors.As(err, &pe) {
		return false
	}
	s := strings.ToLower(pe.stderr)
	return strings.Contains(s, "no such") || strings.Contains(s, "no container with name or id")
}

func lastLines(s string, n int) string {
	var keep []string
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		// aardvark-dns complains on every run without /dev/log; it means nothing.
		if line == "" || strings.Contains(line, "failed to connect to syslog") {
			continue
		}
		keep = append(keep, line)
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "; ")
}

// inspected is the part of `podman inspect` the driver reads.
type inspected struct {
	ID         string `json:"Id"`
	OCIRuntime string
	State      struct {
		Status     string
		Running    bool
		ExitCode   int
		OOMKilled  bool
		Error      string
		FinishedAt time.Time // when it last exited; zero if it never did
	}
	NetworkSettings struct {
		IPAddress string
		Networks  map[string]struct{ IPAddress string }
	}
}

func (i inspected) ip() string {
	if i.NetworkSettings.IPAddress != "" {
		return i.NetworkSettings.IPAddress
	}
	for _, n := range i.NetworkSettings.Networks {
		if n.IPAddress != "" {
			return n.IPAddress
		}
	}
	return ""
}

func (d *Driver) inspect(ctx context.Context, id sandbox.ID) (inspected, error) {
	cur, err := d.inspectName(ctx, d.nameOf(id))
	if errors.Is(err, fault.NotFound) {
		return inspected{}, fault.Errorf(fault.NotFound, "podman: container of %s", id)
	}
	return cur, err
}

// inspectName inspects the container called name.
func (d *Driver) inspectName(ctx context.Context, name string) (inspected, error) {
	if cur, ok, err := d.serviceInspect(ctx, name); ok {
		return cur, err
	}
	out, err := d.run(ctx, nil, "container", "inspect", "--format", "json", name)
	if noSuch(err) {
		return inspected{}, fault.Errorf(fault.NotFound, "podman: container %s", name)
	}
	if err != nil {
		return inspected{}, err
	}
	var got []inspected
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 1 {
		return inspected{}, fmt.Errorf("podman inspect %s: unexpected answer: %v", name, err)
	}
	return got[0], nil
}

// Start creates and starts the sandbox's container, starts it again after a
// stop, or with spec.Replace recreates it on the same volume; then it waits
// until the sandbox is ready.
func (d *Driver) Start(ctx context.Context, spec sandbox.Spec) error {
	if !spec.Bootstrap.IsZero() {
		return d.startFromPool(ctx, spec)
	}
	d.forgetAddrs()
	defer d.forgetAddrs()
	sb := spec.Sandbox
	if d.checkpoints(sb) {
		d.dropCheckpoint(d.nameOf(sb.ID)) // started afresh: what it held in memory is gone
	}
	if spec.Env != nil && !spec.Replace {
		// Most likely a new sandbox: create it without asking first, which
		// saves a podman call on the path every create takes.
		err := d.create(ctx, spec)
		if err == nil {
			if sb.Purpose == sandbox.PurposeAgent {
				return nil // podman run -d returned: it started
			}
			return d.waitReady(ctx, sb)
		}
		if !alreadyExists(err) {
			return err
		}
	}
	cur, err := d.inspect(ctx, sb.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, fault.NotFound) {
		return err
	}
	switch {
	case spec.Replace && spec.Env != nil:
		if err := d.replace(ctx, spec); err != nil {
			return err
		}
		if sb.Purpose == sandbox.PurposeAgent {
			return nil // podman run -d returned: it started
		}
	case !exists && spec.Env != nil:
		if err := d.create(ctx, spec); err != nil {
			return err
		}
	case !exists:
		return fault.Errorf(fault.NotFound, "podman: %s has no container and no environment to create one", sb.ID)
	case !cur.State.Running:
		if ending(cur.State.Status) {
			// A stop (a suspend's, a checkpoint's) is still ending it:
			// podman refuses to start a container that is stopping.
			if err := d.stopEnding(ctx, d.nameOf(sb.ID)); err != nil {
				return err
			}
		}
		if err := d.startContainer(ctx, d.nameOf(sb.ID)); err != nil {
			return err
		}
	case spec.Env == nil && d.checkpoints(sb):
		// A resume finds the machine running: a checkpoint a killed
		// gateway left under way is still saving it, and ends it when
		// done (measured: podman's start then does nothing, and the
		// machine exits under the resume). It is stopped and started
		// afresh.
		if err := d.stopEnding(ctx, d.nameOf(sb.ID)); err != nil {
			return err
		}
		if err := d.startContainer(ctx, d.nameOf(sb.ID)); err != nil {
			return err
		}
	}
	return d.waitReady(ctx, sb)
}

// stopEnding stops the container called name, which something else may
// be ending meanwhile (a checkpoint a killed gateway left under way ends
// it when done; another stop): runsc refuses podman's kill of a sandbox
// already gone ("runsc kill … 9 failed", measured in CI), so the stop
// counts as done once podman says the container can start, and is tried
// again a few times until then.
func (d *Driver) stopEnding(ctx context.Context, name string) error {
	var err error
	for try := range 5 {
		if _, err = d.run(ctx, nil, "stop", "--time", "1", name); err == nil || noSuch(err) {
			return nil
		}
		if cur, ierr := d.inspectName(ctx, name); ierr == nil && startable(cur.State.Status) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try+1) * 500 * time.Millisecond):
		}
	}
	return err
}

// startable reports whether podman's status of a container lets podman
// start it.
func startable(status string) bool {
	switch status {
	case "created", "configured", "initialized", "exited", "stopped":
		return true
	}
	return false
}

// replace makes the sandbox's container anew from spec, on its volume:
// whatever container has its name is removed first. Another podman may be
// making one meanwhile (a killed gateway's `podman run`, which outlives
// it): its container is removed too, a few times at most; podman's
// container lock lets a removal wait for a run's create and start.
func (d *Driver) replace(ctx context.Context, spec sandbox.Spec) error {
	name := d.cfg.name(spec.Sandbox.ID)
	var err error
	for range 3 {
		if _, err = d.run(ctx, nil, "rm", "--force", "--time", "0", name); err != nil && !noSuch(err) {
			// A killed podman's half-made container can still hold its
			// root filesystem (measured under load: "removing container
			// root filesystem: 1 error occurred"): the next try finds
			// it let go.
			d.log.WarnContext(ctx, "a container to replace was not removed: trying again", "sandbox", spec.Sandbox.ID, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		if err = d.create(ctx, spec); !alreadyExists(err) {
			return err
		}
	}
	return err
}

// create makes the volume (kept if it exists: a replaced container keeps
// its home) and runs the container. A run that fails leaves no container
// behind: a half-created one would block the name (notes/podman.md §9).
func (d *Driver) create(ctx context.Context, spec sandbox.Spec) error {
	sb := spec.Sandbox
	defer d.making.lock(sb.ID)()
	if spec.Run != nil {
		// An agent run has no home volume: the checkout is its only mount.
		if spec.Run.Network == "open" {
			d.log.WarnContext(ctx, "an agent run on an open network holds the sandbox's key and can reach anything")
		}
	} else if err := d.makeVolume(ctx, sb); err != nil {
		return err
	}
	return d.makeMachine(ctx, spec, true)
}

// makeMachine makes the sandbox's container on its volume, which exists,
// and starts it when start says so (else a restore starts it later: a
// fork's). A container that was not made whole is removed.
func (d *Driver) makeMachine(ctx context.Context, spec sandbox.Spec, start bool) error {
	sb := spec.Sandbox
	name := d.cfg.name(sb.ID)
	env, handoffDir := spec.Env, ""
	if spec.Run == nil && sb.Purpose == sandbox.PurposeEngineer {
		if handoffDir = d.openHandoff(ctx, name); handoffDir != "" {
			env = maps.Clone(env)
			env[handoff.EnvSocket] = handoffSocket
		}
	}
	argv := func(multiline []string, envFile string) []string {
		if spec.Run != nil {
			return AgentArgs(d.cfg, sb, *spec.Run, multiline, envFile)
		}
		return RunArgs(d.cfg, sb, multiline, envFile, handoffDir)
	}
	var ok bool
	var err error
	if start {
		ok, err = d.serviceRun(ctx, argv(nil, ""), env)
	} else {
		run := argv
		argv = func(multiline []string, envFile string) []string {
			// `podman run --detach …` made but not started.
			return append([]string{"create"}, run(multiline, envFile)[2:]...)
		}
	}
	if !ok {
		err = d.runBinary(ctx, sb.ID, env, argv)
	}
	if err != nil {
		if alreadyExists(err) {
			return err // another container by that name: not ours to remove
		}
		if spec.Run != nil {
			err = d.networkMissing(*spec.Run, err)
		}
		// Don't let ctx's cancellation stop the clean-up.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, rmErr := d.run(cctx, nil, "rm", "--force", "--time", "0", name); rmErr != nil && !noSuch(rmErr) {
			d.log.WarnContext(ctx, "could not remove a container that failed to start", "sandbox", sb.ID, "err", rmErr)
		}
		return err
	}
	return nil
}

// runBinary is `podman run` by the binary, argv's: single-line values
// from an env file that lives only while podman reads it, the others
// through podman's own environment, names only in argv.
func (d *Driver) runBinary(ctx context.Context, id sandbox.ID, env map[string]string, argv func(multiline []string, envFile string) []string) error {
	file, multiline := splitEnv(env)
	var procEnv []string
	for _, k := range multiline {
		if reserved(k) {
			return fmt.Errorf("podman: the value of %s has a line break, which podman cannot pass to a container", k)
		}
		procEnv = append(procEnv, k+"="+env[k])
	}
	envFile, err := writeEnvFile(d.cfg.envDir(), id, file)
	if err != nil {
		return fmt.Errorf("podman: env file: %w", err)
	}
	_, err = d.run(ctx, procEnv, argv(multiline, envFile.name())...)
	// podman run -d has returned: the container is made (or never will
	// be), and its environment is in podman's store. The key goes from the
	// disk now, not after a clean-up.
	if rmErr := envFile.remove(); rmErr != nil {
		d.log.WarnContext(ctx, "env file not removed", "sandbox", id, "err", rmErr)
	}
	return err
}

// reserved names are podman's own environment: a multi-line value under
// one of them cannot be passed.
func reserved(k string) bool {
	switch k {
	case "PATH", "HOME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF":
		return true
	}
	return false
}

// alreadyExists reports whether podman refused to make an object because
// one of that name exists.
func alreadyExists(err error) bool {
	var pe *podmanError
	return errors.As(err, &pe) && (strings.Contains(pe.stderr, "already exists") || strings.Contains(pe.stderr, "already in use"))
}

// waitReady returns once the sandbox is ready (SPEC S10): an engineer's
// when sshd answers with its greeting on the container's address, an
// agent's once its container runs. A container that stops meanwhile is an
// error carrying its exit code and last words.
//
// podman is asked for the address once: each of its calls costs tens of
// milliseconds, longer than sshd takes to come up. The greeting is then
// tried every few milliseconds (a refused dial costs microseconds), and
// podman asked again only now and then, to notice a container that died.
func (d *Driver) waitReady(ctx context.Context, sb sandbox.Sandbox) error {
	_, err := d.waitGreeting(ctx, d.nameOf(sb.ID), sb.Purpose)
	return err
}

// waitGreeting is waitReady for the container called name; it returns
// the container's address (none for an agent's).
func (d *Driver) waitGreeting(ctx context.Context, name string, purpose sandbox.Purpose) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	var ip string
	lastInspect := time.Time{}
	for {
		if ip == "" || time.Since(lastInspect) >= readyRecheck {
			cur, err := d.inspectName(ctx, name)
			if err != nil {
				return "", err
			}
			lastInspect = time.Now()
			if !cur.State.Running {
				return "", fmt.Errorf("its process exited %d before it was ready%s", cur.State.ExitCode, d.lastWordsOf(ctx, name, cur))
			}
			if purpose == sandbox.PurposeAgent {
				return "", nil
			}
			ip = cur.ip()
		}
		if ip != "" && d.greets(ctx, net.JoinHostPort(ip, strconv.Itoa(sshPort))) {
			return ip, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("sshd did not answer on port %d within %s", sshPort, d.cfg.ReadyTimeout)
		case <-time.After(readyPoll):
		}
	}
}

// readyPoll is how often a starting sandbox's sshd is tried; readyRecheck
// how often podman is asked whether its container still runs meanwhile.
const (
	readyPoll    = 5 * time.Millisecond
	readyRecheck = 500 * time.Millisecond
)

// listens reports whether something accepts a connection at addr.
func (d *Driver) listens(ctx context.Context, addr string) bool {
	conn, err := d.dial(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// greets reports whether an ssh server answers at addr.
func (d *Driver) greets(ctx context.Context, addr string) bool {
	conn, err := d.dial(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-")
}

// lastWords is what a stopped container said last, for failure reasons.
func (d *Driver) lastWords(ctx context.Context, id sandbox.ID, cur inspected) string {
	return d.lastWordsOf(ctx, d.nameOf(id), cur)
}

// lastWordsOf is lastWords of the container called name.
func (d *Driver) lastWordsOf(ctx context.Context, name string, cur inspected) string {
	var parts []string
	if cur.State.OOMKilled {
		parts = append(parts, "out of memory")
	}
	if cur.State.Error != "" {
		parts = append(parts, cur.State.Error)
	}
	// podman logs interleaves both streams; the image's programs never
	// print secrets (berth-init redacts them).
	if out, err := d.run(ctx, nil, "logs", "--tail", "5", name); err == nil {
		if s := lastLines(string(out), 3); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}

// Stop stops the container and keeps it and its volume.
func (d *Driver) Stop(ctx context.Context, id sandbox.ID) error {
	d.forgetAddrs()
	defer d.forgetAddrs()
	_, err := d.run(ctx, nil, "stop", "--time", strconv.Itoa(int(d.cfg.StopTimeout.Seconds())), d.nameOf(id))
	if err == nil || noSuch(err) {
		d.dropCheckpoint(d.nameOf(id))
	}
	if noSuch(err) {
		if d.hasVolume(ctx, id) {
			return nil // only the home is left: stopped enough
		}
		return fault.Errorf(fault.NotFound, "podman: %s", id)
	}
	return err
}

// Remove deletes the container and the volume.
func (d *Driver) Remove(ctx context.Context, id sandbox.ID) error {
	defer d.making.lock(id)()
	d.forgetAddrs()
	defer d.forgetAddrs()
	name := d.nameOf(id)
	if _, err := d.run(ctx, nil, "rm", "--force", "--time", "0", name); err != nil && !noSuch(err) {
		return err
	}
	if _, err := d.run(ctx, nil, "volume", "rm", "--force", name); err != nil && !noSuch(err) {
		return err
	}
	d.dropCheckpoint(name)
	d.closeHandoff(ctx, name)
	return d.forgetClaim(ctx, id)
}

func (d *Driver) hasVolume(ctx context.Context, id sandbox.ID) bool {
	_, err := d.run(ctx, nil, "volume", "inspect", d.nameOf(id))
	return err == nil
}

// Inspect reports the container's state; a sandbox with only its volume
// left is stopped.
func (d *Driver) Inspect(ctx context.Context, id sandbox.ID) (sandbox.Machine, error) {
	cur, err := d.inspect(ctx, id)
	if errors.Is(err, fault.NotFound) {
		if d.hasVolume(ctx, id) {
			return sandbox.Machine{ID: id, Status: sandbox.MachineStopped, Detail: "only its volume is left", VolumeOnly: true}, nil
		}
		return sandbox.Machine{}, err
	}
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machine(id, cur), nil
}

// ending reports whether podman's status of a container says a stop is
// ending it: it has not exited yet, and will not start until it has.
func ending(status string) bool { return status == "stopping" }

// live reports whether podman's status of a container says it has not
// exited: running, paused (a fork's save holds it still for a moment) or
// being stopped. To the sweep it runs: whoever pauses or stops it writes
// its row.
func live(status string) bool { return status == "running" || status == "paused" || ending(status) }

func machine(id sandbox.ID, cur inspected) sandbox.Machine {
	m := sandbox.Machine{ID: id, Status: sandbox.MachineStopped, ExitCode: cur.State.ExitCode, Detail: cur.State.Status, FinishedAt: cur.State.FinishedAt}
	if cur.State.Running || live(cur.State.Status) {
		m.Status, m.ExitCode, m.FinishedAt = sandbox.MachineRunning, 0, time.Time{}
	}
	if cur.State.OOMKilled {
		m.Detail = "out of memory"
	}
	return m
}

// listed is the part of `podman ps --format json` and `podman volume ls
// --format json` the driver reads.
type listed struct {
	ID       string   `json:"Id"` // containers' (full with --no-trunc)
	Names    []string // containers'
	Name     string   // volumes'
	Labels   map[string]string
	State    string
	ExitCode int
	ExitedAt int64 // Unix seconds; podman ps says no finer
}

// List returns every sandbox this deployment has a container or a volume
// for, including half-created and exited containers.
func (d *Driver) List(ctx context.Context) ([]sandbox.Machine, error) {
	d.service() // the sweep lists first at start-up: the service is ready by the first create
	filter := "label=" + labelDeployment + "=" + d.cfg.Deployment
	out, err := d.run(ctx, nil, "ps", "--all", "--filter", filter, "--format", "json")
	if err != nil {
		return nil, err
	}
	var cs []listed
	if err := json.Unmarshal(orEmpty(out), &cs); err != nil {
		return nil, fmt.Errorf("podman ps: unexpected answer: %w", err)
	}
	seen := map[sandbox.ID]bool{}
	var ms []sandbox.Machine
	for _, c := range cs {
		id := sandbox.ID(c.Labels[labelSandbox])
		if id == "" && len(c.Names) > 0 {
			id, _ = d.claimedBy(c.Names[0]) // a warm pool's; none for an unclaimed member
		}
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		m := sandbox.Machine{ID: id, Status: sandbox.MachineStopped, ExitCode: c.ExitCode, Detail: c.State}
		switch {
		case live(c.State):
			m.Status, m.ExitCode = sandbox.MachineRunning, 0
		case c.ExitedAt > 0:
			m.FinishedAt = time.Unix(c.ExitedAt, 0)
		}
		ms = append(ms, m)
	}
	out, err = d.run(ctx, nil, "volume", "ls", "--filter", filter, "--format", "json")
	if err != nil {
		return nil, err
	}
	var vs []listed
	if err := json.Unmarshal(orEmpty(out), &vs); err != nil {
		return nil, fmt.Errorf("podman volume ls: unexpected answer: %w", err)
	}
	for _, v := range vs {
		id := sandbox.ID(v.Labels[labelSandbox])
		if id == "" {
			id, _ = d.claimedBy(v.Name)
		}
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		ms = append(ms, sandbox.Machine{ID: id, Status: sandbox.MachineStopped, Detail: "only its volume is left", VolumeOnly: true})
	}
	return ms, nil
}

func orEmpty(b []byte) []byte {
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("[]")
	}
	return b
}

// Ports are the container's unprivileged ports (SPEC S10, S11), sshd's
// 2222 among them: the gateway dials the container's address on its
// network, as Kubernetes dials a pod's, so a server the engineer starts on
// 3000 is reached as sshd is. Who may is reach's rule, the same for every
// port.
func (d *Driver) Ports() reach.PortRange { return reach.PortRange{Lo: portLo, Hi: portHi} }

// Addr returns the address a port of the sandbox listens on, for the
// gateway's tunnel: the container's address on its network.
func (d *Driver) Addr(ctx context.Context, id sandbox.ID, port int) (string, error) {
	d.mu.Lock()
	ip, ok := d.ips[id]
	d.mu.Unlock()
	if !ok {
		cur, err := d.inspect(ctx, id)
		if err != nil {
			return "", err
		}
		if ip = cur.ip(); !cur.State.Running || ip == "" {
			return "", fault.Errorf(fault.Conflict, "podman: %s is not running", id)
		}
		d.mu.Lock()
		if d.ips == nil {
			d.ips = map[sandbox.ID]string{}
		}
		d.ips[id] = ip
		d.mu.Unlock()
	}
	return net.JoinHostPort(ip, strconv.Itoa(port)), nil
}

// forgetAddrs empties the address cache.
func (d *Driver) forgetAddrs() {
	d.mu.Lock()
	clear(d.ips)
	d.mu.Unlock()
}

// networkMissing turns podman's refusal of an agent run whose allowlist
// network does not exist into the reason it fails closed (SPEC S13): the
// run does not start on another network. podman checks the network as it
// creates the container, so no call of berth's is needed beforehand.
func (d *Driver) networkMissing(run sandbox.RunSpec, err error) error {
	var pe *podmanError
	if run.Network == "open" || !errors.As(err, &pe) || !strings.Contains(pe.stderr, "network not found") {
		return err
	}
	return fault.Errorf(fault.Unavailable, "the allowlist network %s does not exist, so the run does not start (berth admin network creates it; a class may ask for an open network instead)",
		d.cfg.AgentNetwork)
}
