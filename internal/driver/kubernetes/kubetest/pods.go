package kubetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// podRunner is the part of the kubelet stand-in that runs pods under
// podman (RunPods). Like a kubelet it runs a bound pod's init containers
// one by one to completion, then its containers, and reports what they
// do; unlike one it pulls no image (an image the podman root lacks is
// ErrImageNeverPull), restarts nothing (every pod is treated as
// restartPolicy Never, init containers too), runs no liveness or startup
// probe, sets no service environment variables, mounts no
// service-account token, gives pods podman's DNS (not a cluster's), gives
// each init container an address of its own (the pod's IP is its first
// container's; later containers join that one's network), and collects
// no garbage: only a pod's deletion removes its containers. Errors
// running podman are retried by the work queue and shown in the pod's
// status and events.
type podRunner struct {
	pm       podmanCmd
	runtimes map[string]string
	server   string // this server's mark on what it makes in the root
	dir      string // pods' directories: <dir>/<uid>
	dc       dynamic.Interface
	enqueue  func(key string)
	ctx      context.Context // the stand-in's: ends at Stop
	wg       sync.WaitGroup  // watchers, probers, teardowns

	mu     sync.Mutex
	pods   map[types.UID]*podRun
	ended  []*podRun         // deleted pods, for PodLogs
	claims map[string]string // podman volume name → its host directory
	seq    int
}

// podRun is one pod as the runner has it. Its fields are guarded by
// podRunner.mu; work on one pod is serialised by the work queue, its
// watchers and probers only set what they observe.
type podRun struct {
	key       string // namespace/name
	uid       types.UID
	seq       int
	dir       string
	ctx       context.Context
	cancel    context.CancelFunc
	startTime metav1.Time

	volumes    map[string]*podVolume // nil until set up
	tmpfs      []string
	sandboxErr string               // why the pod's sandbox cannot be made: PodReadyToStartContainers False
	waiting    map[string]waitState // containers that could not be made, by name
	ctrs       map[string]*ctrRun
	order      []string // container names as made, init containers first
	ip         string
	stopping   bool
	stopped    bool
	logs       string // what the containers logged, kept at teardown
	events     map[string]bool
}

type waitState struct{ reason, message string }

// ctrRun is one container made for a pod.
type ctrRun struct {
	name, id, imageID string
	init              bool
	startedAt         metav1.Time
	done              bool
	exitCode          int32
	reason, message   string
	finishedAt        metav1.Time
	ready             bool
}

// nodeIP is the node's address, as registerNode gives it.
const nodeIP = "127.0.0.1"

// now is the time as the API keeps it, in seconds, so that a status made
// again compares equal to the one written.
func now() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

// podFor is the runner's record of pod, made at the first sight of it;
// nil once the pod is being torn down.
func (p *podRunner) podFor(pod *corev1.Pod) (*podRun, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.pods[pod.UID]; ok {
		if r.stopping {
			return nil, nil
		}
		return r, nil
	}
	dir := filepath.Join(p.dir, string(pod.UID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(p.ctx)
	p.seq++
	r := &podRun{
		key: pod.Namespace + "/" + pod.Name, uid: pod.UID, seq: p.seq,
		dir: dir, ctx: ctx, cancel: cancel, startTime: now(),
		waiting: map[string]waitState{}, ctrs: map[string]*ctrRun{}, events: map[string]bool{},
	}
	p.pods[pod.UID] = r
	return r, nil
}

// sync moves a bound, live pod on by what can be done now, and returns
// the status it has then.
func (p *podRunner) sync(ctx context.Context, pod *corev1.Pod) (*corev1.PodStatus, error) {
	r, err := p.podFor(pod)
	if r == nil || err != nil {
		return nil, err
	}
	err = p.step(ctx, pod, r)
	p.mu.Lock()
	defer p.mu.Unlock()
	st := r.status(pod)
	return &st, err
}

func (p *podRunner) step(ctx context.Context, pod *corev1.Pod, r *podRun) error {
	rt, ok := p.runtime(pod)
	if !ok {
		// What a kubelet whose runtime handler is missing reports; the pod
		// stays Pending.
		msg := fmt.Sprintf("Failed to create pod sandbox: no runtime for %q is configured (kubetest: not in Podman.Runtimes)", *pod.Spec.RuntimeClassName)
		p.mu.Lock()
		r.sandboxErr = msg
		p.mu.Unlock()
		p.event(ctx, pod, r, corev1.EventTypeWarning, "FailedCreatePodSandBox", msg, "")
		return nil
	}
	p.mu.Lock()
	ready := r.volumes != nil
	p.mu.Unlock()
	if !ready {
		err := p.setupVolumes(ctx, pod, r)
		p.mu.Lock()
		r.sandboxErr = ""
		if err != nil {
			r.sandboxErr = "Unable to attach or mount volumes: " + err.Error()
		}
		p.mu.Unlock()
		if err != nil {
			p.event(ctx, pod, r, corev1.EventTypeWarning, "FailedMount", "Unable to attach or mount volumes: "+err.Error(), "")
			if errors.Is(err, errConfig) {
				return nil // the spec will not change
			}
			return err
		}
	} else if err := p.writeDownward(pod, r); err != nil {
		return err
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cr := p.snapshot(r, c.Name)
		switch {
		case cr == nil:
			return p.start(ctx, pod, r, c, true, rt, "")
		case !cr.done || cr.exitCode != 0:
			return nil // running, or the pod has failed
		}
	}
	var first string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if cr := p.snapshot(r, c.Name); cr != nil {
			if first == "" {
				first = cr.id
			}
			continue
		}
		network := ""
		if first != "" {
			network = "container:" + first
		}
		if err := p.start(ctx, pod, r, c, false, rt, network); err != nil {
			return err
		}
		cr := p.snapshot(r, c.Name)
		if cr == nil {
			return nil // it waits: its status says why
		}
		if first == "" {
			first = cr.id
		}
	}
	return nil
}

// snapshot is a copy of the pod's container name, or nil.
func (p *podRunner) snapshot(r *podRun, name string) *ctrRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cr, ok := r.ctrs[name]; ok {
		c := *cr
		return &c
	}
	return nil
}

func (p *podRunner) runtime(pod *corev1.Pod) (string, bool) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "runc", true
	}
	rt, ok := p.runtimes[*pod.Spec.RuntimeClassName]
	return rt, ok
}

// errImage is an image the root does not have; the pod waits and is
// tried again, as a kubelet backs off and tries again.
var errImage = errors.New("image not present")

// start makes, starts and watches one container. An error is tried
// again; a container that cannot be made for good waits with a reason.
func (p *podRunner) start(ctx context.Context, pod *corev1.Pod, r *podRun, c *corev1.Container, init bool, runtime, network string) error {
	field := fmt.Sprintf("spec.containers{%s}", c.Name)
	if init {
		field = fmt.Sprintf("spec.initContainers{%s}", c.Name)
	}
	wait := func(reason string, err error) {
		p.mu.Lock()
		r.waiting[c.Name] = waitState{reason, err.Error()}
		p.mu.Unlock()
		p.event(ctx, pod, r, corev1.EventTypeWarning, reason, err.Error(), field)
	}
	if err := checkProbes(c); err != nil {
		wait("CreateContainerConfigError", err)
		return nil
	}
	img, ok, err := p.pm.image(ctx, c.Image)
	if err != nil {
		return err
	}
	if !ok {
		wait("ErrImageNeverPull", fmt.Errorf("Container image %q is not present with pull policy of Never (kubetest pulls nothing: build it into the podman root)", c.Image))
		return errImage
	}
	p.mu.Lock()
	ms, err := mounts(c, r.volumes)
	p.mu.Unlock()
	if err != nil {
		wait("CreateContainerConfigError", err)
		return nil
	}
	env, err := os.CreateTemp(r.dir, ".env-*")
	if err != nil {
		return err
	}
	env.Close()
	defer os.Remove(env.Name())
	spec := createSpec{
		name: p.containerName(pod, c.Name), labels: p.labels(pod, c.Name), runtime: runtime,
		network: network, hostname: hostname(pod), mounts: ms, envFile: env.Name(), imageUser: img.User,
	}
	args, file, byName, err := createArgs(pod, c, spec)
	if err != nil {
		wait("CreateContainerConfigError", err)
		return nil
	}
	if err := os.WriteFile(env.Name(), file, 0o600); err != nil {
		return err
	}
	out, err := p.pm.run(ctx, byName, args...)
	var pe *podmanError
	if errors.As(err, &pe) && strings.Contains(pe.stderr, "already in use") {
		// A try that podman finished after we gave up on it: it is ours
		// (the name holds the pod's uid).
		if _, rmErr := p.pm.run(ctx, nil, "rm", "--force", "--time", "0", spec.name); rmErr == nil {
			out, err = p.pm.run(ctx, byName, args...)
		}
	}
	os.Remove(env.Name())
	if err != nil {
		wait("CreateContainerError", err)
		return err
	}
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return fmt.Errorf("podman create %s: no container id", spec.name)
	}
	cr := &ctrRun{name: c.Name, id: fields[len(fields)-1], init: init, imageID: imageID(c.Image, img)}
	p.mu.Lock()
	delete(r.waiting, c.Name)
	r.ctrs[c.Name] = cr
	r.order = append(r.order, c.Name)
	p.mu.Unlock()
	if !init && network == "" {
		// The pod's address first, as a pod sandbox has it before its
		// containers run: even a container that exits at once keeps it.
		if _, err := p.pm.run(ctx, nil, "init", cr.id); err != nil {
			p.startFailed(ctx, pod, r, cr, field, err)
			return nil
		}
		st, err := p.pm.inspect(ctx, cr.id)
		if err != nil {
			return err
		}
		p.mu.Lock()
		r.ip = st.IP
		p.mu.Unlock()
	}
	if _, err := p.pm.run(ctx, nil, "start", cr.id); err != nil {
		p.startFailed(ctx, pod, r, cr, field, err)
		return nil
	}
	p.mu.Lock()
	cr.startedAt = now()
	if c.ReadinessProbe == nil {
		cr.ready = true
	}
	p.mu.Unlock()
	p.event(ctx, pod, r, corev1.EventTypeNormal, "Started", "Started container "+c.Name, field)
	p.watch(r, cr)
	if c.ReadinessProbe != nil {
		p.probe(r, cr, c)
	}
	return nil
}

// startFailed ends a container that would not start, as a runtime's
// StartError does under restartPolicy Never: terminated, exit code 128.
func (p *podRunner) startFailed(ctx context.Context, pod *corev1.Pod, r *podRun, cr *ctrRun, field string, err error) {
	t := now()
	p.mu.Lock()
	cr.done, cr.exitCode, cr.reason, cr.message = true, 128, "StartError", err.Error()
	cr.startedAt, cr.finishedAt = t, t
	p.mu.Unlock()
	p.event(ctx, pod, r, corev1.EventTypeWarning, "Failed", "Error: "+err.Error(), field)
}

func imageID(ref string, img imageInfo) string {
	if img.Digest != "" {
		name, _, _ := strings.Cut(ref, "@")
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			name = name[:i]
		}
		return name + "@" + img.Digest
	}
	return "sha256:" + img.ID
}

// containerName is the podman name of a pod's container: the prefix, the
// pod's namespace, name and uid, and the container's name.
func (p *podRunner) containerName(pod *corev1.Pod, ctr string) string {
	return prefix + pod.Namespace + "_" + pod.Name + "_" + ctr + "_" + string(pod.UID)
}

func (p *podRunner) labels(pod *corev1.Pod, ctr string) map[string]string {
	return map[string]string{
		labelServer: p.server, labelNamespace: pod.Namespace, labelPod: pod.Name,
		labelUID: string(pod.UID), labelContainer: ctr,
	}
}

// hostname is the pod's: spec.hostname, else its name cut to 63
// characters, as a kubelet gives it.
func hostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	h := pod.Name
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// watch waits in the background for a container to end, and records how.
func (p *podRunner) watch(r *podRun, cr *ctrRun) {
	p.wg.Go(func() {
		for r.ctx.Err() == nil {
			_, werr := p.pm.runUntil(r.ctx, nil, "wait", cr.id)
			if r.ctx.Err() != nil {
				return
			}
			st, err := p.pm.inspect(r.ctx, cr.id)
			if r.ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			switch {
			case err != nil:
				cr.done, cr.exitCode, cr.reason = true, 137, "ContainerStatusUnknown"
				cr.message, cr.finishedAt = "The container could not be located when the pod was terminated", now()
			case st.Status == "exited" || st.Status == "stopped":
				cr.done, cr.exitCode, cr.message = true, int32(st.ExitCode), st.Error
				cr.reason = "Completed"
				if st.OOMKilled {
					cr.reason = "OOMKilled"
				} else if st.ExitCode != 0 {
					cr.reason = "Error"
				}
				cr.finishedAt = now()
				if !st.FinishedAt.IsZero() {
					cr.finishedAt = metav1.NewTime(st.FinishedAt.Truncate(time.Second))
				}
			}
			done := cr.done
			if done {
				cr.ready = false
			}
			p.mu.Unlock()
			if done {
				p.enqueue(r.key)
				return
			}
			if werr != nil {
				select {
				case <-r.ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	})
}

// released reports whether a pod being deleted has nothing left on the
// host; if not, it starts its teardown, which queues the pod again once
// done.
func (p *podRunner) released(pod *corev1.Pod) bool {
	p.mu.Lock()
	r, ok := p.pods[pod.UID]
	p.mu.Unlock()
	if !ok {
		return true
	}
	p.stop(r, gracePeriod(pod))
	p.mu.Lock()
	defer p.mu.Unlock()
	return r.stopped
}

// gracePeriod is what a kubelet gives a deleted pod's containers between
// SIGTERM and SIGKILL.
func gracePeriod(pod *corev1.Pod) int64 {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// forget drops a deleted pod's record, keeping its logs.
func (p *podRunner) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.pods[uid]; ok {
		delete(p.pods, uid)
		p.ended = append(p.ended, r)
	}
}

// orphans tears down the pods of key other than uid (none: every one),
// which left the API without their teardown: deleted with grace 0, or
// with their namespace.
func (p *podRunner) orphans(key string, uid types.UID) {
	p.mu.Lock()
	var gone []*podRun
	for _, r := range p.pods {
		if r.key == key && r.uid != uid {
			gone = append(gone, r)
		}
	}
	p.mu.Unlock()
	for _, r := range gone {
		p.stop(r, 0)
		p.mu.Lock()
		stopped := r.stopped
		p.mu.Unlock()
		if stopped {
			p.forget(r.uid)
		}
	}
}

// stop stops the pod's containers with grace seconds for each, keeps
// their logs, removes them and the pod's directory, then queues the pod.
func (p *podRunner) stop(r *podRun, grace int64) {
	p.mu.Lock()
	if r.stopping {
		p.mu.Unlock()
		return
	}
	r.stopping = true
	var ids []string
	for _, name := range r.order {
		ids = append(ids, r.ctrs[name].id)
	}
	p.mu.Unlock()
	r.cancel()
	p.wg.Go(func() {
		ctx := p.ctx
		var logs string
		if len(ids) > 0 {
			sctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second+callTimeout)
			_, _ = p.pm.runUntil(sctx, nil, append([]string{"stop", "--ignore", "--time", strconv.FormatInt(grace, 10)}, ids...)...)
			cancel()
			logs = p.liveLogs(ctx, r)
			// --depend: a container in another's network goes first, or
			// podman keeps the other.
			_, _ = p.pm.run(ctx, nil, append([]string{"rm", "--force", "--depend", "--ignore", "--time", "0"}, ids...)...)
		}
		for _, d := range r.tmpfs {
			_ = unmountTmpfs(d)
		}
		_ = os.RemoveAll(r.dir)
		p.mu.Lock()
		r.stopped, r.logs = true, logs
		p.mu.Unlock()
		p.enqueue(r.key)
	})
}

// podLogs is what the containers of the pods named namespace/name
// logged, oldest pod first, each pod's init containers first.
func (p *podRunner) podLogs(namespace, name string) string {
	key := namespace + "/" + name
	p.mu.Lock()
	var runs []*podRun
	for _, r := range p.ended {
		if r.key == key {
			runs = append(runs, r)
		}
	}
	for _, r := range p.pods {
		if r.key == key {
			runs = append(runs, r)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(runs, func(a, b *podRun) int { return a.seq - b.seq })
	var b strings.Builder
	for _, r := range runs {
		p.mu.Lock()
		stopped, logs := r.stopped, r.logs
		p.mu.Unlock()
		if !stopped {
			logs = p.liveLogs(p.ctx, r)
		}
		b.WriteString(logs)
	}
	return b.String()
}

// liveLogs asks podman for the logs of the pod's containers.
func (p *podRunner) liveLogs(ctx context.Context, r *podRun) string {
	p.mu.Lock()
	var ctrs []ctrRun
	for _, name := range r.order {
		ctrs = append(ctrs, *r.ctrs[name])
	}
	p.mu.Unlock()
	var b strings.Builder
	for _, c := range ctrs {
		kind := "container"
		if c.init {
			kind = "init container"
		}
		fmt.Fprintf(&b, "--- pod %s (uid %s), %s %s ---\n", r.key, r.uid, kind, c.name)
		out := p.pm.combined(ctx, "logs", c.id)
		b.WriteString(out)
		if out != "" && !strings.HasSuffix(out, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// cleanup removes every container and volume this server made in the
// root, whether or not the API server still answers, and unmounts what
// is still mounted; run once the stand-in has stopped.
func (p *podRunner) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if ids, err := p.pm.ids(ctx, false, labelServer+"="+p.server); err == nil && len(ids) > 0 {
		_, _ = p.pm.run(ctx, nil, append([]string{"rm", "--force", "--depend", "--ignore", "--time", "0"}, ids...)...)
	}
	if vols, err := p.pm.ids(ctx, true, labelServer+"="+p.server); err == nil && len(vols) > 0 {
		_, _ = p.pm.run(ctx, nil, append([]string{"volume", "rm", "--force"}, vols...)...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.pods {
		for _, d := range r.tmpfs {
			_ = unmountTmpfs(d)
		}
	}
}

// event records a pod's event as a kubelet does, once per reason and
// message; best effort.
func (p *podRunner) event(ctx context.Context, pod *corev1.Pod, r *podRun, typ, reason, msg, field string) {
	p.mu.Lock()
	seen := r.events[reason+"\x00"+msg]
	r.events[reason+"\x00"+msg] = true
	p.mu.Unlock()
	if seen {
		return
	}
	t := metav1.Now()
	ev := &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s.%x", pod.Name, t.UnixNano()), Namespace: pod.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, FieldPath: field,
		},
		Reason: reason, Message: msg, Type: typ, Count: 1, FirstTimestamp: t, LastTimestamp: t,
		Source:              corev1.EventSource{Component: "kubelet", Host: NodeName},
		ReportingController: "kubelet", ReportingInstance: NodeName,
	}
	u, err := toUnstructured(ev)
	if err != nil {
		return
	}
	_, _ = p.dc.Resource(eventGVR).Namespace(pod.Namespace).Create(ctx, u, metav1.CreateOptions{})
}

// newPodRunner checks the podman root and makes a runner whose pods'
// directories are under dir.
func newPodRunner(ctx context.Context, pm Podman, dc dynamic.Interface, dir string, enqueue func(string)) (*podRunner, error) {
	cmd := podmanCmd{root: pm.Root}
	if err := cmd.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &podRunner{
		pm: cmd, runtimes: pm.Runtimes, server: strings.ToLower(rand.Text()[:10]), dir: dir, dc: dc, enqueue: enqueue, ctx: ctx,
		pods: map[types.UID]*podRun{}, claims: map[string]string{},
	}, nil
}
