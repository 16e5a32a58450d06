package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/warm"
)

// This API server runs without the agent-sandbox controller. The
// driver's tests run on the real controller, on servers of their own
// (realClient, podsClient); this one serves the few tests that need what
// the real controller cannot be made to show, each saying which in its
// doc comment: they play the controller with standIn, which turns
// Sandboxes Ready with a pod IP, suspends them, ends the pods it is told
// to, keeps warm pools filled from their templates and binds claims to a
// pool's member as the claim controller does, when the test lets it.
// Everything the driver writes is still validated by the real API server
// against the real CRDs.

var server *kubetest.Server

func TestMain(m *testing.M) {
	bin := os.Getenv(kubetest.EnvBinaries)
	if bin == "" {
		os.Exit(m.Run())
	}
	crds, err := kubetest.CRDDir(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	began := time.Now()
	server, err = kubetest.Start(ctx, bin, crds)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver from %s=%s: %v\n", kubetest.EnvBinaries, bin, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "kube-apiserver and etcd up with the agent-sandbox CRDs in %s\n", time.Since(began).Round(100*time.Millisecond))
	code := m.Run()
	server.Stop()
	// The real controller's tests start servers of their own
	// (realcontroller_test.go, realpod_test.go).
	if realServer.srv != nil {
		realServer.srv.Stop()
	}
	if podsServer.srv != nil {
		podsServer.srv.Stop()
	}
	os.Exit(code)
}

// kubeClient reaches the real API server when the test run started one
// (BERTH_TEST_KUBE), else client-go's in-memory fake, which checks no
// schema: the same tests then cover the driver's logic, not what the API
// server would accept.
func kubeClient(t *testing.T) dynamic.Interface {
	t.Helper()
	if server == nil {
		t.Logf("no real kube-apiserver (set %s to the directory scripts/build-kube prints): using client-go's fake", kubetest.EnvBinaries)
		return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			namespaceGVR: "NamespaceList", sandboxGVR: "SandboxList", templateGVR: "SandboxTemplateList",
			poolGVR: "SandboxWarmPoolList", claimGVR: "SandboxClaimList",
		})
	}
	dc, err := dynamic.NewForConfig(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

var (
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	sandboxGVR   = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	templateGVR  = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	poolGVR      = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claimGVR     = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// namespace makes a namespace of the test's own.
func namespace(t *testing.T, dc dynamic.Interface) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if _, err := dc.Resource(namespaceGVR).Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// standIn plays the agent-sandbox controller in one namespace.
type standIn struct {
	dc dynamic.Interface
	ns string
	// podIP is the address every pod gets.
	podIP string

	mu       sync.Mutex
	finished map[string]string // Sandbox name → reason, for pods that end
	seq      int
	holdBind bool // claims wait unbound while set
}

// hold stops binding claims until release.
func (c *standIn) hold() (release func()) {
	c.mu.Lock()
	c.holdBind = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.holdBind = false
		c.mu.Unlock()
	}
}

// start runs the stand-in until the test ends.
func (c *standIn) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := c.pass(ctx); err != nil && ctx.Err() == nil {
				t.Logf("stand-in controller: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// finish makes a Sandbox's pod end, as a process that exits does.
func (c *standIn) finish(name, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished == nil {
		c.finished = map[string]string{}
	}
	c.finished[name] = reason
}

func (c *standIn) pass(ctx context.Context) error {
	if err := c.fillPools(ctx); err != nil {
		return err
	}
	if err := c.bindClaims(ctx); err != nil {
		return err
	}
	list, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if err := c.reconcile(ctx, &list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func cond(typ, status, reason string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": "the test plays the controller",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// reconcile sets one Sandbox's status as the controller would.
func (c *standIn) reconcile(ctx context.Context, u *unstructured.Unstructured) error {
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "operatingMode")
	c.mu.Lock()
	reason, ended := c.finished[u.GetName()]
	c.mu.Unlock()
	var want map[string]any
	switch {
	case ended:
		want = map[string]any{"conditions": []any{cond("Ready", "False", reason), cond("Finished", "True", reason)}}
	case mode == "Suspended":
		want = map[string]any{"conditions": []any{cond("Ready", "False", "SandboxSuspended"), cond("Suspended", "True", "PodTerminated")}}
	default:
		want = map[string]any{"podIPs": []any{c.podIP}, "conditions": []any{cond("Ready", "True", "DependenciesReady")}}
	}
	have, _, _ := unstructured.NestedMap(u.Object, "status")
	if sameConditions(have, want) {
		return nil
	}
	u.Object["status"] = want
	_, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the next pass
	}
	return err
}

func sameConditions(have, want map[string]any) bool {
	hc, _ := have["conditions"].([]any)
	wc, _ := want["conditions"].([]any)
	if len(hc) != len(wc) {
		return false
	}
	for i := range hc {
		h, _ := hc[i].(map[string]any)
		w, _ := wc[i].(map[string]any)
		if h["type"] != w["type"] || h["status"] != w["status"] || h["reason"] != w["reason"] {
			return false
		}
	}
	return true
}

// fillPools keeps each pool's unclaimed members at its replicas, made
// from its template, as the warm pool controller does.
func (c *standIn) fillPools(ctx context.Context) error {
	pools, err := c.dc.Resource(poolGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pools.Items {
		replicas, _, _ := unstructured.NestedInt64(p.Object, "spec", "replicas")
		tplName, _, _ := unstructured.NestedString(p.Object, "spec", "sandboxTemplateRef", "name")
		members, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "standin/pool=" + p.GetName()})
		if err != nil {
			return err
		}
		for n := int64(len(members.Items)); n < replicas; n++ {
			tpl, err := c.dc.Resource(templateGVR).Namespace(c.ns).Get(ctx, tplName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod, _, _ := unstructured.NestedMap(tpl.Object, "spec", "podTemplate")
			spec := map[string]any{"podTemplate": pod}
			if vct, ok, _ := unstructured.NestedSlice(tpl.Object, "spec", "volumeClaimTemplates"); ok {
				spec["volumeClaimTemplates"] = vct
			}
			c.mu.Lock()
			c.seq++
			name := fmt.Sprintf("%s-%05d", p.GetName(), c.seq)
			c.mu.Unlock()
			member := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"standin/pool": p.GetName()}},
				"spec":     spec,
			}}
			if _, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).Create(ctx, member, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// bindClaims adopts a ready member of the claimed pool for every unbound
// claim, as the real claim controller does (its source at the pinned
// commit): a claim whose pod labels are outside the default label
// allowlist (sandbox.users.io) is refused, Ready=False/InvalidMetadata;
// ownership moves to the claim; the Sandbox gets the claim's uid as a
// label and none of the claim's labels; the claim's status names the
// Sandbox, which keeps its pool name.
func (c *standIn) bindClaims(ctx context.Context) error {
	// Held for the whole pass: hold() then waits for a pass under way, so
	// a claim made after it returns is never bound by that pass (one
	// read the flag, then listed a claim Start made meanwhile, and bound
	// it: TestClaimWaitedForAgain failed on a loaded machine).
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holdBind {
		return nil
	}
	claims, err := c.dc.Resource(claimGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if name, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name"); name != "" {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(claim.Object, "spec", "additionalPodMetadata", "labels")
		if bad := outsideAllowlist(podLabels); bad != "" {
			claim.Object["status"] = map[string]any{"conditions": []any{cond("Ready", "False", "InvalidMetadata")}}
			if _, err := c.dc.Resource(claimGVR).Namespace(c.ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
				return err
			}
			continue
		}
		pool, _, _ := unstructured.NestedString(claim.Object, "spec", "warmPoolRef", "name")
		members, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "standin/pool=" + pool})
		if err != nil {
			return err
		}
		var member *unstructured.Unstructured
		for j := range members.Items {
			if ready(&members.Items[j]) {
				member = &members.Items[j]
				break
			}
		}
		if member == nil {
			continue // none ready yet
		}
		podMeta, _, _ := unstructured.NestedMap(claim.Object, "spec", "additionalPodMetadata")
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{
				"labels": map[string]any{"standin/pool": nil, "agents.x-k8s.io/claim-uid": string(claim.GetUID())},
				"ownerReferences": []any{map[string]any{
					"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim", "name": claim.GetName(),
					"uid": string(claim.GetUID()), "controller": true}},
			},
			"spec": map[string]any{"podTemplate": map[string]any{"metadata": podMeta}},
		})
		if _, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).Patch(ctx, member.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		claim.Object["status"] = map[string]any{
			"sandbox":    map[string]any{"name": member.GetName(), "podIPs": []any{c.podIP}},
			"conditions": []any{cond("Ready", "True", "SandboxReady")},
		}
		if _, err := c.dc.Resource(claimGVR).Namespace(c.ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// outsideAllowlist is a pod label of a claim the real controller's
// default allowlist refuses, or "".
func outsideAllowlist(labels map[string]string) string {
	for k := range labels {
		domain, _, ok := strings.Cut(k, "/")
		if !ok || (domain != "sandbox.users.io" && !strings.HasSuffix(domain, ".sandbox.users.io")) {
			return k
		}
	}
	return ""
}

func ready(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// newDriver is a driver on a namespace of the test's own, with the
// stand-in controller running there.
func newDriver(t *testing.T, dc dynamic.Interface, g *greeter) (*kubernetes.Driver, *standIn, kubernetes.Config) {
	t.Helper()
	ns := namespace(t, dc)
	ctl := &standIn{dc: dc, ns: ns, podIP: "10.244.0.7"}
	ctl.start(t)
	cfg := kubernetes.Config{Namespace: ns, Deployment: "berthtest0001", ReadyTimeout: 30 * time.Second, Dial: g.dial,
		PublicURL: "http://gateway.test:8080"}
	return kubernetes.New(cfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil))), ctl, cfg
}

// TestClaimWaitedForAgain: a gateway that stops while a pool's claim is
// unbound finds the claim at its next start and waits for it, instead of
// failing the sandbox for want of an environment. It plays the controller
// (standIn) because it needs a claim that stays unbound until the test
// says: the real controller binds a claim within milliseconds, to a ready
// pool member or to a Sandbox it makes cold, so the restart would find
// the claim bound and never take the path under test.
func TestClaimWaitedForAgain(t *testing.T) {
	dc := kubeClient(t)
	d, ctl, _ := newDriver(t, dc, newGreeter(t, nil))
	ctx := t.Context()
	p := warm.Pool{Org: "org_acme", Class: class.Class{Name: "warm", Image: "ghcr.io/acme/dev:1", CPU: 500, Memory: 1 << 30, Warm: 1}}
	if err := d.SyncPools(ctx, []warm.Pool{p}); err != nil {
		t.Fatal(err)
	}
	spec := drivertest.Spec(drivertest.Options{Image: p.Class.Image, SSHKey: sshKey})
	spec.Sandbox.Org, spec.Sandbox.Class, spec.Sandbox.FromPool = p.Org, p.Class.Name, true
	spec.Env, spec.Bootstrap = nil, secret.New("bst_ONETIME")
	release := ctl.hold()
	stopped, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := d.Start(stopped, spec); err == nil {
		t.Fatal("Start returned with the claim unbound")
	}
	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err != nil || m.Status != sandbox.MachineRunning {
		t.Fatalf("Inspect(unbound claim) = %+v, %v; want a machine on its way", m, err)
	}
	release()
	if err := d.Start(ctx, sandbox.Spec{Sandbox: spec.Sandbox}); err != nil {
		t.Fatalf("Start after the restart = %v, want it to wait for the claim", err)
	}
	if err := d.Remove(ctx, spec.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if ms, _ := d.List(ctx); len(ms) != 0 {
		t.Errorf("List after Remove = %v", ms)
	}
}
