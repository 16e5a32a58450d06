package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/tunnel/tunneltest"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/warm"
)

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk alice@laptop"

// greeter is a stand-in sshd on loopback: every pod's port 2222 is dialled
// here, and greets once up says so (always, when up is nil).
type greeter struct {
	addr string
	up   func(podIP string) bool
}

func newGreeter(t *testing.T, up func(string) bool) *greeter {
	t.Helper()
	addr := tunneltest.Listen(t, func(c net.Conn) { _, _ = io.WriteString(c, "SSH-2.0-standin\r\n") })
	return &greeter{addr: addr, up: up}
}

func (g *greeter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	if g.up != nil && !g.up(host) {
		return nil, fmt.Errorf("sshd of %s is not up yet", host)
	}
	return (&net.Dialer{}).DialContext(ctx, network, g.addr)
}

// cluster is a gateway on the kubernetes driver: the real store, services
// and HTTP API, the real API server and the real agent-sandbox controller
// (realcontroller_test.go), on a namespace of the test's own.
type cluster struct {
	dc   dynamic.Interface
	ns   string
	st   *store.Store
	svc  *sandbox.Service
	api  *client.Client
	url  string
	kcfg kubernetes.Config
}

const clusterClasses = `sandboxes:
  - name: standard
    image: ghcr.io/acme/dev:1
    isolation: isolated
    cpu: 500m
    memory: 1Gi
    disk: 10Gi
    purposes: [engineer]
  - name: vm
    image: ghcr.io/acme/dev:1
    isolation: vm
    purposes: [engineer]
  - name: podman
    image: ` + sandboxImage + `
    isolation: standard
    cpu: 500m
    memory: 512Mi
    purposes: [engineer]
`

// newCluster starts a gateway on dc. greet is the stand-in sshd for the
// cluster's namespace; nil when the pods really run (podsClient), so the
// driver dials their real sshd.
func newCluster(t *testing.T, dc dynamic.Interface, pooled bool, greet func(ns string) *greeter) *cluster {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String()
	kcfg := kubernetes.Config{Namespace: namespace(t, dc), Deployment: "berthtest0001", ReadyTimeout: 2 * time.Minute, PublicURL: url}
	if greet != nil {
		kcfg.Dial = greet(kcfg.Namespace).dial
	}
	drv := kubernetes.New(kcfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil)))
	tmpl, err := class.ParseFile(strings.NewReader(clusterClasses))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var classes *class.Service
	accounts := account.NewService(st, st, time.Now, func(ctx context.Context, org string) error { return classes.Seed(ctx, org) }, st, log)
	runtimes := map[sandbox.Tier]string{sandbox.TierStandard: "", sandbox.TierIsolated: "gvisor"}
	svc := sandbox.NewService(st, drv, accounts, sandbox.Config{
		Driver: "kubernetes", Runtimes: runtimes, PublicURL: url, Audit: st,
	}, log, time.Now)
	pools := warm.NewService(st, svc, drv, warm.Config{On: pooled, Runtimes: runtimes}, log, time.Now)
	svc.SetWarm(pools)
	classes = class.NewService(st, accounts, pools, class.Config{Template: tmpl, Runtimes: runtimes}, log, time.Now)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	runs := agentrun.NewService(st, svc, drv, accounts, agentrun.Config{Driver: "kubernetes", PublicURL: url}, log, time.Now)
	gw := gateway.New(gateway.Options{Accounts: accounts, Sandboxes: svc, Warm: pools, Classes: classes, Runs: runs, Log: log, Version: "test", Driver: "kubernetes",
		Usage: usage.NewService(st, accounts, svc, 90*24*time.Hour, time.Now)})
	srv.Config.Handler = gw.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	_, _, _, key, err := accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{dc: dc, ns: kcfg.Namespace, st: st, svc: svc, api: client.New(url, key.Secret.Reveal(), srv.Client()), url: url, kcfg: kcfg}
}

// waitState polls the API until the sandbox is in state want.
func (c *cluster) waitState(t *testing.T, ref string, want api.State) api.Sandbox {
	t.Helper()
	return c.within(t, ref, want, 45*time.Second)
}

// within polls the API until the sandbox is in state want, failing the
// test when d passes first or it fails instead.
func (c *cluster) within(t *testing.T, ref string, want api.State, d time.Duration) api.Sandbox {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		sb, err := c.api.Sandbox(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == want {
			return sb
		}
		if time.Now().After(deadline) || (sb.State == "failed" && want != "failed") {
			t.Fatalf("sandbox %s is %s (%s) after %s, want %s", ref, sb.State, sb.Reason, d, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// object reads the Sandbox of a berth sandbox by its labels.
func (c *cluster) object(t *testing.T, id string) *unstructured.Unstructured {
	t.Helper()
	list, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "berth.dev/sandbox=" + id})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d Sandboxes labelled %s, want 1", len(list.Items), id)
	}
	return &list.Items[0]
}

func str(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return fmt.Sprint(v)
}

func container(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	ctrs, _, _ := unstructured.NestedSlice(u.Object, "spec", "podTemplate", "spec", "containers")
	if len(ctrs) != 1 {
		t.Fatalf("%d containers, want 1", len(ctrs))
	}
	return ctrs[0].(map[string]any)
}

func envOf(t *testing.T, u *unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	env, _ := container(t, u)["env"].([]any)
	for _, e := range env {
		m := e.(map[string]any)
		v, _ := m["value"].(string)
		out[m["name"].(string)] = v
	}
	return out
}

// TestLifecycleWritesWhatAgentSandboxExpects: create, suspend, resume,
// extend and terminate through the API leave the objects a user of
// agent-sandbox expects, as the real API server stored them after
// validating them against the CRDs, with the real controller acting on
// them (sshd's greeting comes from a loopback listener answering for the
// IP of a live, running pod).
func TestLifecycleWritesWhatAgentSandboxExpects(t *testing.T) {
	dc := realClient(t)
	c := newCluster(t, dc, false, func(ns string) *greeter { return newGreeter(t, livePodsGreet(dc, ns)) })
	ctx := t.Context()
	sb, err := c.api.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "standard", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	running := c.waitState(t, sb.ID, "running")
	obj := c.object(t, sb.ID)
	want := map[string]string{
		"name":                         strings.ReplaceAll(sb.ID, "_", "-"),
		"operatingMode":                "Running",
		"shutdownPolicy":               "Retain",
		"shutdownTime":                 running.ExpiresAt.UTC().Format(time.RFC3339),
		"runtimeClassName":             "gvisor",
		"automountServiceAccountToken": "false",
		"dnsPolicy":                    "ClusterFirst",
		"restartPolicy":                "Never",
		"pvc":                          "home 10Gi",
		"owner annotation":             running.Owner,
		"org label":                    running.Organisation,
		"project label":                running.Project,
	}
	got := map[string]string{
		"name":                         obj.GetName(),
		"operatingMode":                str(obj, "spec", "operatingMode"),
		"shutdownPolicy":               str(obj, "spec", "shutdownPolicy"),
		"shutdownTime":                 str(obj, "spec", "shutdownTime"),
		"runtimeClassName":             str(obj, "spec", "podTemplate", "spec", "runtimeClassName"),
		"automountServiceAccountToken": str(obj, "spec", "podTemplate", "spec", "automountServiceAccountToken"),
		"dnsPolicy":                    str(obj, "spec", "podTemplate", "spec", "dnsPolicy"),
		"restartPolicy":                str(obj, "spec", "podTemplate", "spec", "restartPolicy"),
		"owner annotation":             obj.GetAnnotations()["berth.dev/owner"],
		"org label":                    obj.GetLabels()["berth.dev/org"],
		"project label":                obj.GetLabels()["berth.dev/project"],
	}
	vcts, _, _ := unstructured.NestedSlice(obj.Object, "spec", "volumeClaimTemplates")
	if len(vcts) == 1 {
		v := vcts[0].(map[string]any)
		got["pvc"] = fmt.Sprint(v["metadata"].(map[string]any)["name"], " ", v["spec"].(map[string]any)["resources"].(map[string]any)["requests"].(map[string]any)["storage"])
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	ctr := container(t, obj)
	sec := ctr["securityContext"].(map[string]any)
	if fmt.Sprint(sec["allowPrivilegeEscalation"], sec["runAsNonRoot"], sec["runAsUser"], sec["capabilities"], sec["seccompProfile"]) !=
		"false true 1001 map[drop:[ALL]] map[type:RuntimeDefault]" {
		t.Errorf("container securityContext = %v", sec)
	}
	if res := fmt.Sprint(ctr["resources"]); res != "map[limits:map[cpu:500m memory:1Gi] requests:map[cpu:500m memory:1Gi]]" {
		t.Errorf("resources = %s", res)
	}
	env := envOf(t, obj)
	if env["BERTH_SANDBOX_ID"] != sb.ID || !strings.HasPrefix(env["BERTH_API_KEY"], "berth_") || env["BERTH_AUTHORIZED_KEYS"] != sshKey {
		t.Errorf("pod env lacks the sandbox's id, key or authorized keys: %v", slices.Sorted(maps.Keys(env)))
	}

	if _, err := c.api.Suspend(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if m := str(c.object(t, sb.ID), "spec", "operatingMode"); m != "Suspended" {
		t.Errorf("after suspend operatingMode = %s, want Suspended", m)
	}
	if _, err := c.api.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	c.waitState(t, sb.ID, "running")
	if m := str(c.object(t, sb.ID), "spec", "operatingMode"); m != "Running" {
		t.Errorf("after resume operatingMode = %s, want Running", m)
	}
	ext, err := c.api.Extend(ctx, sb.ID, "12h")
	if err != nil {
		t.Fatal(err)
	}
	if st := str(c.object(t, sb.ID), "spec", "shutdownTime"); st != ext.ExpiresAt.UTC().Format(time.RFC3339) || ext.ExpiresAt.Equal(running.ExpiresAt) {
		t.Errorf("after extend shutdownTime = %s, want %s", st, ext.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if _, err := c.api.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	list, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "berth.dev/sandbox=" + sb.ID})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after terminate %d Sandboxes are left (%v)", len(list.Items), err)
	}
}

// TestUnmappedTierRefused: a class whose tier has no RuntimeClass is
// refused at creation, naming the setting; nothing reaches the cluster.
func TestUnmappedTierRefused(t *testing.T) {
	c := newCluster(t, realClient(t), false, func(string) *greeter { return newGreeter(t, nil) })
	_, err := c.api.CreateSandbox(t.Context(), api.CreateSandbox{Name: "fast", Class: "vm", SSHKeys: []string{sshKey}})
	if err == nil || !strings.Contains(err.Error(), "BERTH_SANDBOX_RUNTIME_VM") {
		t.Fatalf("create on an unmapped tier = %v, want a refusal naming BERTH_SANDBOX_RUNTIME_VM", err)
	}
	list, _ := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(t.Context(), metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Errorf("%d Sandboxes made for a refused create", len(list.Items))
	}
}

// podsCluster is a gateway on the API server whose pods run under podman
// (podsClient): its sandboxes are of class "podman", berth's sandbox image
// with its real sshd. It deletes the namespace's pods at the end: no
// garbage collector removes those of a deleted Sandbox.
func podsCluster(t *testing.T) *cluster {
	t.Helper()
	_, dc := podsClient(t)
	c := newCluster(t, dc, false, nil)
	t.Cleanup(func() {
		_ = dc.Resource(podGVR).Namespace(c.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	return c
}

// endPod ends the process of a running sandbox's pod in podman, as the
// kubelet would see it exit: `podman stop` (sshd, PID 1, exits 0 on
// SIGTERM: the pod Succeeded) or `podman kill` (SIGKILL, 137: Failed).
func (c *cluster) endPod(t *testing.T, id, how string) {
	t.Helper()
	pod := livePod(t, c.dc, c.ns, c.object(t, id).GetName())
	if pod == nil {
		t.Fatalf("%s has no pod", id)
	}
	ids := podContainers(t, pod.GetUID())
	if len(ids) != 1 {
		t.Fatalf("the pod's containers in podman: %v, want one", ids)
	}
	podman(t, how, ids[0])
}

// finishedAt is when the Sandbox's Finished condition says its pod ended,
// once the controller has said so.
func (c *cluster) finishedAt(t *testing.T, id string) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, time.Minute, "the controller to say the pod finished", func() bool {
		conds, _, _ := unstructured.NestedSlice(c.object(t, id).Object, "status", "conditions")
		for _, x := range conds {
			if m, _ := x.(map[string]any); m["type"] == "Finished" && m["status"] == "True" {
				at, _ = time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
				return true
			}
		}
		return false
	})
	return at
}

// TestFinishedPodFails: a pod that ends, even cleanly, cannot restart, so
// the sweep fails its sandbox (SPEC S11). The pod runs under podman and
// its sshd exits 0; the real controller reports it.
func TestFinishedPodFails(t *testing.T) {
	t.Parallel() // waits on pods and timeouts, on a server of its own
	c := podsCluster(t)
	sb, err := c.api.CreateSandbox(t.Context(), api.CreateSandbox{Name: "dev", Class: "podman", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(t, sb.ID, "running")
	c.endPod(t, sb.ID, "stop")
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := c.svc.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, _ := c.api.Sandbox(t.Context(), sb.ID)
		if got.State == "failed" {
			if !strings.Contains(got.Reason, "PodSucceeded") {
				t.Errorf("reason %q does not say the pod finished", got.Reason)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox is %s after its pod finished, want failed", got.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAFinishedOrDeletedSandboxIsNoticedAtOnce: the driver's watch on
// Sandboxes tells the service of a pod that finished, or of a Sandbox
// deleted behind berth's back, and the service fails its sandbox within a
// couple of seconds of the controller saying so, not at the next sweep
// (an hour away here). The finished one's running time stops when the
// controller saw its pod end. The pods run under podman; the finished
// one's container is killed.
func TestAFinishedOrDeletedSandboxIsNoticedAtOnce(t *testing.T) {
	t.Parallel() // waits on pods and timeouts, on a server of its own
	c := podsCluster(t)
	ctx := t.Context()
	var ids []string
	for _, name := range []string{"fin", "gone"} {
		sb, err := c.api.CreateSandbox(ctx, api.CreateSandbox{Name: name, Class: "podman", SSHKeys: []string{sshKey}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	for _, id := range ids {
		c.waitState(t, id, "running")
	}
	fin, gone := ids[0], ids[1]

	c.endPod(t, fin, "kill")
	finished := c.finishedAt(t, fin)
	got := c.within(t, fin, "failed", 3*time.Second)
	if !strings.Contains(got.Reason, "PodFailed") {
		t.Errorf("reason %q does not say the pod failed", got.Reason)
	}
	row, err := c.st.GetSandbox(ctx, sandbox.ID(fin))
	if err != nil {
		t.Fatal(err)
	}
	if end := row.FirstRan.Add(row.Ran); finished.IsZero() || end.Sub(finished).Abs() > time.Second {
		t.Errorf("running time ends at %v, want when the controller saw the pod finish, %v", end, finished)
	}

	obj := c.object(t, gone)
	if err := c.dc.Resource(sandboxGVR).Namespace(c.ns).Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := c.within(t, gone, "failed", 3*time.Second); !strings.Contains(got.Reason, "gone") {
		t.Errorf("reason %q does not say its machine is gone", got.Reason)
	}
}

// pod is a pool member's pod as the test runs it: berth-init in its
// warm-pool mode, with the downward-API file of the pod's annotations.
type pod struct {
	dir   string
	sshd  chan struct{} // closed when berth-init execs sshd
	code  int
	stder strings.Builder
}

// runPod starts berth-init for a pod whose annotations are ann, with the
// gateway at url, as the kubelet would run the template's container.
func runPod(t *testing.T, url string, ann map[string]string, wg *sync.WaitGroup) *pod {
	t.Helper()
	p := &pod{dir: t.TempDir(), sshd: make(chan struct{})}
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		lines = append(lines, k+"="+strconv.Quote(ann[k]))
	}
	file := filepath.Join(p.dir, "annotations")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(p.dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{ // the template's environment
		"BERTH_BOOTSTRAP_FILE": file, "BERTH_BASE_URL": url, "BERTH_SANDBOX_PURPOSE": "engineer",
		"BERTH_SANDBOX_CLASS": "warm", "HOME": home, "PATH": os.Getenv("PATH"),
	}
	env := entrypoint.Env{
		Getenv: func(k string) string { return vars[k] },
		Environ: func() []string {
			var out []string
			for k, v := range vars {
				out = append(out, k+"="+v)
			}
			return out
		},
		Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &p.stder,
		Run:         (*exec.Cmd).Run,
		Exec:        func(string, []string, []string) error { close(p.sshd); return fmt.Errorf("exec recorded by the test") },
		SetStdin:    func(*os.File) error { return nil },
		WaitForStop: func() {},
	}
	wg.Go(func() { p.code = entrypoint.Main([]string{"berth-init"}, env) })
	return p
}

// TestWarmPoolClaimEndToEnd: with warm pools on, a class's pool is made
// from its template; a sandbox of the class is a SandboxClaim on it; the
// pool's pod, once bound, reads its token from its annotations and fetches
// the sandbox's environment from the gateway over HTTP with berth-init's
// own code; the sandbox is ready once its sshd greets. The pool follows
// its class to warm 0, and a gateway started with pools off deletes every
// pool. The real controller fills the pool and binds the claim; the test
// plays the kubelet for the bound pod only (runBoundPods): the kubelet
// stand-in runs no process, and the gateway listens on loopback, out of a
// podman pod's reach.
func TestWarmPoolClaimEndToEnd(t *testing.T) {
	needCommand(t, "ssh-keygen")
	var (
		mu   sync.Mutex
		pods = map[string]*pod{} // by bound Sandbox name
		wg   sync.WaitGroup
	)
	t.Cleanup(wg.Wait)
	up := func(string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pods {
			select {
			case <-p.sshd:
				return true
			default:
			}
		}
		return false
	}
	dc := realClient(t)
	c := newCluster(t, dc, true, func(string) *greeter { return newGreeter(t, up) })
	runBoundPods(t, c, func(name string, ann map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		pods[name] = runPod(t, c.url, ann, &wg)
	})
	ctx := t.Context()
	const warmClass = "sandboxes:\n  - name: warm\n    image: ghcr.io/acme/dev:1\n    isolation: standard\n    warm: 2\n    purposes: [engineer]\n"
	if _, err := c.api.ApplyClasses(ctx, "", strings.NewReader(warmClass)); err != nil {
		t.Fatal(err)
	}
	pools := func() []unstructured.Unstructured {
		list, err := c.dc.Resource(poolGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	ps := pools()
	if len(ps) != 1 {
		t.Fatalf("%d SandboxWarmPools after applying a class with warm 2, want 1", len(ps))
	}
	if r, _, _ := unstructured.NestedInt64(ps[0].Object, "spec", "replicas"); r != 2 || str(&ps[0], "spec", "updateStrategy", "type") != "OnReplenish" {
		t.Errorf("pool spec = %v, want 2 replicas, OnReplenish", ps[0].Object["spec"])
	}
	tpl, err := c.dc.Resource(templateGVR).Namespace(c.ns).Get(ctx, ps[0].GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pool's template: %v", err)
	}
	if m := str(tpl, "spec", "networkPolicyManagement"); m != "Unmanaged" {
		t.Errorf("template networkPolicyManagement = %s, want Unmanaged (the namespace's policy rules)", m)
	}

	eventually(t, time.Minute, "the pool to have 2 ready members", func() bool {
		u, err := c.dc.Resource(poolGVR).Namespace(c.ns).Get(ctx, ps[0].GetName(), metav1.GetOptions{})
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return err == nil && n == 2
	})
	sb, err := c.api.CreateSandbox(ctx, api.CreateSandbox{Name: "quick", Class: "warm", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	running := c.waitState(t, sb.ID, "running")
	if !running.FromPool {
		t.Errorf("from_pool = false for a sandbox of a warm class")
	}
	claim, err := c.dc.Resource(claimGVR).Namespace(c.ns).Get(ctx, strings.ReplaceAll(sb.ID, "_", "-"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's SandboxClaim: %v", err)
	}
	if ref := str(claim, "spec", "warmPoolRef", "name"); ref != ps[0].GetName() {
		t.Errorf("claim warmPoolRef = %s, want %s", ref, ps[0].GetName())
	}
	if _, has, _ := unstructured.NestedSlice(claim.Object, "spec", "env"); has {
		t.Errorf("the claim sets env, which cold-starts a sandbox")
	}
	obj := c.object(t, sb.ID)
	if !strings.HasPrefix(obj.GetName(), ps[0].GetName()+"-") {
		t.Errorf("the sandbox's Sandbox is %s, want a member of pool %s", obj.GetName(), ps[0].GetName())
	}
	if st := str(obj, "spec", "shutdownTime"); st != running.ExpiresAt.UTC().Format(time.RFC3339) {
		t.Errorf("adopted Sandbox shutdownTime = %s, want the expiry %s", st, running.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if env := envOf(t, obj); env["BERTH_API_KEY"] != "" || env["BERTH_SANDBOX_ID"] != "" {
		t.Errorf("the pool's pod spec carries the sandbox's own values: %v", slices.Sorted(maps.Keys(env)))
	}
	mu.Lock()
	p := pods[obj.GetName()]
	mu.Unlock()
	if p == nil {
		t.Fatal("no pod ran for the bound Sandbox")
	}
	keys, err := os.ReadFile(filepath.Join(p.dir, "home", ".ssh", "authorized_keys"))
	if err != nil || !strings.Contains(string(keys), sshKey) {
		t.Errorf("the pod's authorized_keys = %q, %v; want the key given at create", keys, err)
	}
	events, err := c.api.Audit(ctx, client.AuditOptions{Sandbox: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	var issued []string
	for _, e := range events {
		if e.Action == "credential.issue" {
			issued = append(issued, e.Target)
		}
	}
	if !slices.Contains(issued, "bootstrap token") || !slices.Contains(issued, "environment") {
		t.Errorf("credentials issued %v, want the bootstrap token and the environment", issued)
	}

	// warm 0: the pool and its template go; the claimed sandbox stays.
	if _, err := c.api.ApplyClasses(ctx, "", strings.NewReader(strings.Replace(warmClass, "warm: 2", "warm: 0", 1))); err != nil {
		t.Fatal(err)
	}
	if n := len(pools()); n != 0 {
		t.Errorf("%d pools after warm 0, want none", n)
	}
	if _, err := c.dc.Resource(templateGVR).Namespace(c.ns).Get(ctx, ps[0].GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("template after warm 0: %v, want not found", err)
	}
	if _, err := c.api.Sandbox(ctx, sb.ID); err != nil {
		t.Error(err)
	}

	// Pools back, then a gateway that starts with pools off deletes them.
	if _, err := c.api.ApplyClasses(ctx, "", strings.NewReader(warmClass)); err != nil {
		t.Fatal(err)
	}
	if n := len(pools()); n != 1 {
		t.Fatalf("%d pools after warm 2 again, want 1", n)
	}
	off := warm.NewService(c.st, nil, kubernetes.New(c.kcfg, c.dc, slog.New(slog.DiscardHandler)), warm.Config{
		On: false, Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""},
	}, slog.New(slog.DiscardHandler), time.Now)
	if err := off.SyncPools(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(pools()); n != 0 {
		t.Errorf("%d pools after a start with pools off, want none", n)
	}
	if _, err := c.api.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.dc.Resource(claimGVR).Namespace(c.ns).Get(ctx, claim.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim after terminate: %v, want not found", err)
	}
}

// runBoundPods calls run once for each pod of a Sandbox the controller
// bound to a claim in c's namespace, with the pod's annotations (the
// downward-API file's content) once they carry the claim's bootstrap
// token, until the test ends.
func runBoundPods(t *testing.T, c *cluster, run func(name string, ann map[string]string)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	started := map[string]bool{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var bound []unstructured.Unstructured
			if claims, err := c.dc.Resource(claimGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{}); err == nil {
				bound = claims.Items
			}
			for i := range bound {
				name := str(&bound[i], "status", "sandbox", "name")
				if name == "<nil>" || started[name] {
					continue
				}
				p, err := c.dc.Resource(podGVR).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || str(p, "status", "phase") != "Running" || p.GetAnnotations()["berth.dev/bootstrap-token"] == "" {
					continue
				}
				started[name] = true
				run(name, p.GetAnnotations())
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
}

func needCommand(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed", name)
	}
}
