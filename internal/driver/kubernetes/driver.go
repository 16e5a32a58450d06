package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/warm"
)

// Driver runs sandboxes as agent-sandbox objects in one namespace.
type Driver struct {
	cfg    Config
	client dynamic.Interface
	log    *slog.Logger
}

var (
	_ sandbox.Driver  = (*Driver)(nil)
	_ reach.Reacher   = (*Driver)(nil)
	_ sandbox.Expirer = (*Driver)(nil)
	_ warm.Pools      = (*Driver)(nil)
	_ sandbox.Watcher = (*Driver)(nil)

	_ sandbox.InMachineRuns = (*Driver)(nil)
)

// New returns a Driver that reaches the API server through client.
func New(cfg Config, client dynamic.Interface, log *slog.Logger) *Driver {
	return &Driver{cfg: cfg.withDefaults(), client: client, log: log}
}

func (d *Driver) sandboxes() dynamic.ResourceInterface {
	return d.client.Resource(sandboxGVR).Namespace(d.cfg.Namespace)
}

func (d *Driver) claims() dynamic.ResourceInterface {
	return d.client.Resource(claimGVR).Namespace(d.cfg.Namespace)
}

// RunsInMachine says the driver's agent runs run whole in their pod
// (sandbox.InMachineRuns): a pod cannot mount the gateway's checkout, and
// the gateway does not read pods' logs.
func (d *Driver) RunsInMachine() {}

// Start makes the sandbox's Sandbox, claims one from the class's pool
// (spec.Bootstrap), or sets an existing one running again; with
// spec.Replace the existing pod spec is first rewritten (a resume after
// expiry brings a new key). It returns once the sandbox is ready: Ready
// with a pod IP, and an engineer's sshd greeting; an agent run's once
// started (waitReady).
func (d *Driver) Start(ctx context.Context, spec sandbox.Spec) error {
	sb := spec.Sandbox
	if err := checkRun(spec.Run); err != nil {
		return err
	}
	cur, err := d.find(ctx, sb.ID)
	switch {
	case errors.Is(err, fault.NotFound) && !spec.Bootstrap.IsZero():
		if err := d.claim(ctx, spec); err != nil {
			return err
		}
	case errors.Is(err, fault.NotFound) && sb.FromPool && d.claimed(ctx, sb.ID):
		// A restart interrupted the wait for the claim: wait again.
	case errors.Is(err, fault.NotFound):
		if spec.Env == nil {
			return fault.Errorf(fault.NotFound, "kubernetes: %s has no Sandbox and no environment to make one", sb.ID)
		}
		if err := d.create(ctx, spec); err != nil {
			return err
		}
	case err != nil:
		return err
	case spec.Replace && spec.Env != nil:
		if err := d.replace(ctx, cur, spec); err != nil {
			return err
		}
	default:
		patch := map[string]any{"operatingMode": modeRunning}
		if !spec.Bootstrap.IsZero() {
			// A pool sandbox's new pod fetches its environment again,
			// with a token that reaches it through its claim.
			if err := d.refreshToken(ctx, sb.ID, cur.Name, spec.Bootstrap); err != nil {
				return err
			}
		}
		if spec.Replace {
			patch["shutdownTime"] = expiry(sb.ExpiresAt)
		}
		if err := d.patchSpec(ctx, cur.Name, patch); err != nil {
			return err
		}
	}
	return d.waitReady(ctx, spec)
}

// checkRun refuses the agent runs this driver cannot run: only in-machine
// runs, of berth's own contract or of a kelos image's (which berth-init,
// copied in from the init image, wraps).
func checkRun(run *sandbox.RunSpec) error {
	switch {
	case run == nil:
		return nil
	case !run.InMachine:
		return fault.Errorf(fault.Unavailable, "kubernetes: an agent run here must run whole in its pod (RunSpec.InMachine): a pod cannot mount the gateway's checkout")
	case run.Contract != "" && run.Contract != sandbox.ContractBerth && run.Contract != sandbox.ContractKelos:
		return fault.Errorf(fault.Unavailable, "kubernetes: agent run contract %q is not supported (berth's and kelos are)", run.Contract)
	}
	return nil
}

func (d *Driver) create(ctx context.Context, spec sandbox.Spec) error {
	obj, err := toUnstructured(SandboxObject(d.cfg, spec))
	if err != nil {
		return err
	}
	if _, err := d.sandboxes().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: create Sandbox %s: %w", obj.GetName(), err)
	}
	return nil
}

// replace rewrites the pod spec of a Sandbox, which the controller only
// applies to a new pod: a running one is suspended first.
func (d *Driver) replace(ctx context.Context, cur Sandbox, spec sandbox.Spec) error {
	if cur.Spec.OperatingMode != modeSuspended {
		if err := d.patchSpec(ctx, cur.Name, map[string]any{"operatingMode": modeSuspended}); err != nil {
			return err
		}
		if err := d.waitSuspended(ctx, cur.Name); err != nil {
			return err
		}
	}
	want := SandboxObject(d.cfg, spec)
	return d.patchSpec(ctx, cur.Name, map[string]any{
		"podTemplate": want.Spec.PodTemplate, "shutdownTime": want.Spec.ShutdownTime, "operatingMode": modeRunning,
	})
}

// waitSuspended waits until the controller says the pod is gone.
func (d *Driver) waitSuspended(ctx context.Context, name string) error {
	return d.waitSandbox(ctx, name, "the pod of Sandbox "+name+" to stop", func(sb Sandbox) bool {
		return meta.IsStatusConditionTrue(sb.Status.Conditions, condSuspended)
	})
}

// waitSandbox polls the Sandbox name until ok says so.
func (d *Driver) waitSandbox(ctx context.Context, name, what string, ok func(Sandbox) bool) error {
	return d.poll(ctx, func() (bool, error) {
		u, err := d.sandboxes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("kubernetes: get Sandbox %s: %w", name, err)
		}
		var sb Sandbox
		if err := fromUnstructured(u, &sb); err != nil {
			return false, err
		}
		return ok(sb), nil
	}, func() string { return what })
}

func (d *Driver) patchSpec(ctx context.Context, name string, spec map[string]any) error {
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if _, err := d.sandboxes().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fault.Errorf(fault.NotFound, "kubernetes: Sandbox %s", name)
		}
		return fmt.Errorf("kubernetes: patch Sandbox %s: %w", name, err)
	}
	return nil
}

// waitReady returns once the sandbox is ready (SPEC S10): the Ready
// condition with a pod IP, and for an engineer sshd's greeting there (a
// pool's pod is ready before its sshd runs). A pod that finishes first is
// an error with the controller's words, and so is a claim the controller
// refused (claimRefused): no wait mends either. A wait that runs out says
// what was still missing: no Sandbox bound, the Ready condition's reason,
// or sshd not greeting at the pod IP.
//
// An agent run is ready once started: the Ready condition alone (it
// serves no port), or a pod already finished, which did start: a quick
// run can end between two polls, and Start then returns at once rather
// than wait for a Ready that never comes. Inspect reports that machine
// stopped and Final, and the service ends the run from what berth-init
// reported to the gateway.
func (d *Driver) waitReady(ctx context.Context, spec sandbox.Spec) error {
	sb := spec.Sandbox
	claimed := !spec.Bootstrap.IsZero() || sb.FromPool
	missing := "its Sandbox"
	return d.poll(ctx, func() (bool, error) {
		if claimed {
			if err := d.claimRefused(ctx, sb.ID); err != nil {
				return false, err
			}
		}
		cur, err := d.find(ctx, sb.ID)
		if errors.Is(err, fault.NotFound) && claimed {
			missing = "the controller to bind its SandboxClaim to a Sandbox"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		m := machine(sb.ID, cur)
		ready := meta.FindStatusCondition(cur.Status.Conditions, condReady)
		if spec.Run != nil {
			return m.Final || (ready != nil && ready.Status == metav1.ConditionTrue), nil
		}
		if m.Final {
			return false, fmt.Errorf("its pod finished before it was ready: %s", m.Detail)
		}
		switch {
		case ready == nil:
			missing = "the controller to report on Sandbox " + cur.Name
			return false, nil
		case ready.Status != metav1.ConditionTrue:
			missing = "Sandbox " + cur.Name + " to be Ready (" + describe(ready) + ")"
			return false, nil
		case len(cur.Status.PodIPs) == 0:
			missing = "a pod IP on Sandbox " + cur.Name
			return false, nil
		}
		if sb.Purpose != sandbox.PurposeEngineer {
			return true, nil
		}
		if sb.FromPool && cur.Spec.ShutdownTime == nil && !sb.ExpiresAt.IsZero() {
			// Taken from the pool: the sandbox carries its expiry from now on.
			if err := d.SetExpiry(ctx, sb.ID, sb.ExpiresAt); err != nil {
				return false, err
			}
		}
		addr := net.JoinHostPort(cur.Status.PodIPs[0], strconv.Itoa(sshPort))
		if err := d.greets(ctx, addr); err != nil {
			missing = "sshd to greet at " + addr + ": Sandbox " + cur.Name + " is Ready, but " + err.Error()
			return false, nil
		}
		return true, nil
	}, func() string { return missing })
}

// poll calls done until it says so, fails, or ReadyTimeout passes; the
// timeout's error names what it waited for, as what says at that moment.
func (d *Driver) poll(ctx context.Context, done func() (bool, error), what func() string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes: waited %s for %s", d.cfg.ReadyTimeout, what())
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// greets says why no ssh server answers at addr, or nil when one does.
func (d *Driver) greets(ctx context.Context, addr string) error {
	conn, err := d.cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("nothing answers there (%w)", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	switch {
	case err != nil:
		return fmt.Errorf("it sent no greeting (%w)", err)
	case !strings.HasPrefix(line, "SSH-"):
		return fmt.Errorf("its greeting %.40q is not ssh's", line)
	}
	return nil
}

// find returns the Sandbox of a sandbox, made directly or bound to its
// claim: a claimed one keeps its pool's name, so it is found by label, or
// through the claim until the driver has labelled it (bound).
func (d *Driver) find(ctx context.Context, id sandbox.ID) (Sandbox, error) {
	list, err := d.sandboxes().List(ctx, metav1.ListOptions{LabelSelector: d.selector(id)})
	if err != nil {
		return Sandbox{}, fmt.Errorf("kubernetes: list Sandboxes of %s: %w", id, err)
	}
	if len(list.Items) == 0 {
		return d.bound(ctx, id)
	}
	var sb Sandbox
	if err := fromUnstructured(&list.Items[0], &sb); err != nil {
		return Sandbox{}, err
	}
	return sb, nil
}

// selector selects this deployment's objects, or one sandbox's of them.
func (d *Driver) selector(id sandbox.ID) string {
	s := labelDeployment + "=" + d.cfg.Deployment
	if id != "" {
		s += "," + labelSandbox + "=" + string(id)
	} else {
		s += "," + labelSandbox
	}
	return s
}

// Stop suspends the sandbox: the controller deletes its pod and keeps its
// volume claim and the Sandbox.
func (d *Driver) Stop(ctx context.Context, id sandbox.ID) error {
	cur, err := d.find(ctx, id)
	if err != nil {
		return err
	}
	return d.patchSpec(ctx, cur.Name, map[string]any{"operatingMode": modeSuspended})
}

// Remove deletes the sandbox's claim and Sandbox; the volume claim goes
// with the Sandbox (its owner). Gone already is not an error.
func (d *Driver) Remove(ctx context.Context, id sandbox.ID) error {
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	// A claimed Sandbox not labelled yet is labelled first, so it goes
	// below with the claim gone (no garbage collector need follow it).
	if _, err := d.find(ctx, id); err != nil && !errors.Is(err, fault.NotFound) {
		return err
	}
	if err := d.claims().Delete(ctx, objectName(id), opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: delete SandboxClaim of %s: %w", id, err)
	}
	list, err := d.sandboxes().List(ctx, metav1.ListOptions{LabelSelector: d.selector(id)})
	if err != nil {
		return fmt.Errorf("kubernetes: list Sandboxes of %s: %w", id, err)
	}
	for _, u := range list.Items {
		if err := d.sandboxes().Delete(ctx, u.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kubernetes: delete Sandbox %s: %w", u.GetName(), err)
		}
	}
	return nil
}

// claimed reports whether the sandbox has a claim on a pool.
func (d *Driver) claimed(ctx context.Context, id sandbox.ID) bool {
	_, err := d.claims().Get(ctx, objectName(id), metav1.GetOptions{})
	return err == nil
}

// Inspect reports the sandbox's condition. A claim the controller has not
// bound yet is a machine on its way.
func (d *Driver) Inspect(ctx context.Context, id sandbox.ID) (sandbox.Machine, error) {
	cur, err := d.find(ctx, id)
	if errors.Is(err, fault.NotFound) && d.claimed(ctx, id) {
		return sandbox.Machine{ID: id, Status: sandbox.MachineRunning, Detail: "claimed from the warm pool, not bound yet"}, nil
	}
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machine(id, cur), nil
}

// machine reads the controller's conditions: a finished pod is final (it
// cannot restart, SPEC S11), expired and suspended sandboxes are stopped,
// anything else runs or is on its way. A stopped machine finished when
// the condition that says so last changed: when the controller saw the
// pod end or go (the driver reads no pods, so no container's exit time).
func machine(id sandbox.ID, sb Sandbox) sandbox.Machine {
	m := sandbox.Machine{ID: id, Status: sandbox.MachineRunning}
	ready := meta.FindStatusCondition(sb.Status.Conditions, condReady)
	finished := meta.FindStatusCondition(sb.Status.Conditions, condFinished)
	switch {
	case finished != nil && finished.Status == metav1.ConditionTrue:
		m.Status, m.Final, m.Detail, m.FinishedAt = sandbox.MachineStopped, true, describe(finished), finished.LastTransitionTime.Time
		if finished.Reason != reasonPodSucceeded {
			m.ExitCode = 1
		}
	case ready != nil && (ready.Reason == reasonPodSucceeded || ready.Reason == reasonPodFailed):
		m.Status, m.Final, m.Detail, m.FinishedAt = sandbox.MachineStopped, true, describe(ready), ready.LastTransitionTime.Time
		if ready.Reason == reasonPodFailed {
			m.ExitCode = 1
		}
	case ready != nil && ready.Reason == reasonSandboxExpired:
		m.Status, m.Detail, m.FinishedAt = sandbox.MachineStopped, "expired: the cluster stopped it at its shutdownTime", ready.LastTransitionTime.Time
	case sb.Spec.OperatingMode == modeSuspended:
		m.Status, m.Detail = sandbox.MachineStopped, "suspended"
		if c := meta.FindStatusCondition(sb.Status.Conditions, condSuspended); c != nil && c.Status == metav1.ConditionTrue {
			m.FinishedAt = c.LastTransitionTime.Time
		}
	}
	return m
}

// Watch tells changed of each of the deployment's sandboxes whose Sandbox
// stopped (finished, expired, suspended) or was deleted, from a watch on
// Sandboxes by the deployment's labels (the role may watch them; it reads
// no pods). A watch the API server closes is taken up again from the last
// version seen; one that fails, or that is too old to take up (410
// Gone), is the error: the service sweeps, and watches again.
func (d *Driver) Watch(ctx context.Context, changed func(sandbox.ID)) error {
	opts := metav1.ListOptions{LabelSelector: d.selector(""), Limit: 1}
	list, err := d.sandboxes().List(ctx, opts)
	if err != nil {
		return fmt.Errorf("kubernetes: list Sandboxes: %w", err)
	}
	rv := list.GetResourceVersion()
	for {
		opened := time.Now()
		w, err := d.sandboxes().Watch(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kubernetes: watch Sandboxes: %w", err)
		}
		rv, err = d.follow(ctx, w, rv, changed)
		w.Stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case time.Since(opened) < time.Second:
			return errors.New("kubernetes: the watch on Sandboxes closed at once")
		}
	}
}

// follow reads one watch until it closes, and returns the last resource
// version it saw.
func (d *Driver) follow(ctx context.Context, w watch.Interface, rv string, changed func(sandbox.ID)) (string, error) {
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return rv, nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return rv, nil
			}
			ev = e
		}
		if ev.Type == watch.Error {
			return rv, fmt.Errorf("kubernetes: watch Sandboxes: %w", apierrors.FromObject(ev.Object))
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		rv = u.GetResourceVersion()
		id := sandbox.ID(u.GetLabels()[labelSandbox])
		if id == "" || ev.Type == watch.Bookmark {
			continue
		}
		var sb Sandbox
		if ev.Type == watch.Deleted || (fromUnstructured(u, &sb) == nil && machine(id, sb).Status != sandbox.MachineRunning) {
			changed(id)
		}
	}
}

func describe(c *metav1.Condition) string {
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// List returns every sandbox this deployment has a Sandbox or a claim
// for; a pool's unclaimed sandboxes are nobody's and not listed.
func (d *Driver) List(ctx context.Context) ([]sandbox.Machine, error) {
	opts := metav1.ListOptions{LabelSelector: d.selector("")}
	list, err := d.sandboxes().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list Sandboxes: %w", err)
	}
	seen := map[sandbox.ID]bool{}
	var ms []sandbox.Machine
	for i := range list.Items {
		var sb Sandbox
		if err := fromUnstructured(&list.Items[i], &sb); err != nil {
			return nil, err
		}
		id := sandbox.ID(sb.Labels[labelSandbox])
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		ms = append(ms, machine(id, sb))
	}
	claims, err := d.claims().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list SandboxClaims: %w", err)
	}
	for _, u := range claims.Items {
		id := sandbox.ID(u.GetLabels()[labelSandbox])
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		switch sb, err := d.bound(ctx, id); {
		case err == nil:
			ms = append(ms, machine(id, sb))
		case errors.Is(err, fault.NotFound):
			ms = append(ms, sandbox.Machine{ID: id, Status: sandbox.MachineRunning, Detail: "claimed from the warm pool, not bound yet"})
		default:
			return nil, err
		}
	}
	return ms, nil
}

// SetExpiry moves the sandbox's shutdownTime, which the controller
// enforces with or without a gateway running (SPEC S11).
func (d *Driver) SetExpiry(ctx context.Context, id sandbox.ID, at time.Time) error {
	cur, err := d.find(ctx, id)
	if err != nil {
		return err
	}
	patch := map[string]any{"shutdownTime": expiry(at)}
	if cur.Spec.ShutdownPolicy == "" {
		patch["shutdownPolicy"] = policyRetain // a pool's sandbox had none
	}
	return d.patchSpec(ctx, cur.Name, patch)
}

// Ports are the pod's unprivileged ports: the gateway dials pod IPs from
// inside the cluster, never through pods/portforward (SPEC S11).
func (d *Driver) Ports() reach.PortRange { return reach.PortRange{Lo: portLo, Hi: portHi} }

// Addr returns the pod's address for port, for the gateway's tunnel.
func (d *Driver) Addr(ctx context.Context, id sandbox.ID, port int) (string, error) {
	cur, err := d.find(ctx, id)
	if err != nil {
		return "", err
	}
	m := machine(id, cur)
	if m.Status != sandbox.MachineRunning || len(cur.Status.PodIPs) == 0 {
		return "", fault.Errorf(fault.Conflict, "kubernetes: %s is not running", id)
	}
	return net.JoinHostPort(cur.Status.PodIPs[0], strconv.Itoa(port)), nil
}

// toUnstructured converts one of the driver's objects through JSON, which
// keeps the CRDs' field names exactly.
func toUnstructured(v any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "status") // the controller's to write
	return &unstructured.Unstructured{Object: integers(m).(map[string]any)}, nil
}

// integers turns JSON numbers into int64 where they are whole, as
// client-go's own decoding does: unstructured readers expect it.
func integers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

func fromUnstructured(u *unstructured.Unstructured, v any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("kubernetes: read %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// Render is obj as the driver sends it to the API server.
func Render(obj any) (map[string]any, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}
