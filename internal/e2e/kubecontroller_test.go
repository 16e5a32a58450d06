package e2e_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
)

var (
	k8sPods           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	k8sRuntimeClasses = schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
	k8sTemplates      = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	k8sWarmPools      = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
)

// cluster is the one cluster of this package's kubernetes tests, started
// by the first that asks and stopped by TestMain: a real kube-apiserver
// and etcd, the real agent-sandbox controller (scripts/build-controller),
// kube-controller-manager's garbage collector (a deleted Sandbox's pod
// goes, a deleted pool's members go), and kubetest's kubelet stand-in,
// which runs every pod the controller makes as written, under podman in
// the tests' podman root, at an address on podman's bridge that the
// gateway dials as it would a pod network's. What the stand-in is not: a
// scheduler (it binds every pod to its one node) or a volume provisioner
// (a claim is a podman volume, used unbound).
var cluster struct {
	once  sync.Once
	srv   *kubetest.Server
	image string       // the sandbox image with this tree's berth-init
	rmi   func() error // removes it
	err   error
}

// stopCluster stops the cluster if a test started it.
func stopCluster() {
	if cluster.srv != nil {
		cluster.srv.Stop()
	}
	if cluster.rmi != nil {
		if err := cluster.rmi(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// realCluster is the shared cluster, or a skip when this machine has not
// the API server, the controller or the podman root.
func realCluster(t *testing.T) *kubeWorld {
	t.Helper()
	root := podmanRoot(t)
	bin, ctl := os.Getenv(kubetest.EnvBinaries), os.Getenv(kubetest.EnvController)
	if bin == "" || ctl == "" {
		t.Skipf("needs the real agent-sandbox controller: set %s (scripts/build-kube) and %s (scripts/build-controller)",
			kubetest.EnvBinaries, kubetest.EnvController)
	}
	if !imageBuilt(root, sandboxImage) {
		t.Skipf("%s is not built (make images)", sandboxImage)
	}
	cluster.once.Do(func() {
		crds, err := kubetest.CRDDir(os.Getenv)
		if err != nil {
			cluster.err = err
			return
		}
		if cluster.image, cluster.rmi, err = buildWithThisBerthInit(root, sandboxImage); err != nil {
			cluster.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		began := time.Now()
		srv, err := kubetest.Start(ctx, bin, crds)
		if err != nil {
			cluster.err = fmt.Errorf("kube-apiserver: %w", err)
			return
		}
		if err := srv.StartController(ctx, ctl, kubetest.RunPods(kubetest.Podman{Root: root, Runtimes: map[string]string{"runc": "runc"}})); err != nil {
			srv.Stop()
			cluster.err = fmt.Errorf("%s=%s: %w", kubetest.EnvController, ctl, err)
			return
		}
		if err := srv.StartGarbageCollector(ctx); err != nil {
			srv.Stop()
			cluster.err = err
			return
		}
		// The tier's RuntimeClass, as an install has it (README): pods
		// naming a missing one are refused by the API server.
		dc, err := dynamic.NewForConfig(srv.Config)
		if err == nil {
			_, err = dc.Resource(k8sRuntimeClasses).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "runc"}, "handler": "runc",
			}}, metav1.CreateOptions{})
		}
		if err != nil {
			srv.Stop()
			cluster.err = err
			return
		}
		cluster.srv = srv
		fmt.Fprintf(os.Stderr, "kube-apiserver, etcd, the real agent-sandbox controller, the garbage collector and the podman kubelet up in %s\n", time.Since(began).Round(100*time.Millisecond))
	})
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	cluster.srv.ControllerLog(t)
	dc, err := dynamic.NewForConfig(cluster.srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &kubeWorld{srv: cluster.srv, dc: dc, root: root, sandboxImage: cluster.image}
}

// workstationYAML is an engineer class with a disk: on Kubernetes its
// HOME is a volume claim that outlives the pod (without a disk it is an
// emptyDir, gone with each pod: SPEC S11).
const workstationYAML = `  - name: workstation
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    disk: 1Gi
    default_ttl: 1h
    max_ttl: 4h
    purposes: [engineer]
`

// sandboxImage is berth's sandbox image as `make images` builds it.
const sandboxImage = "localhost/berth-sandbox:latest"

// kubeGateway starts a gateway of the kubernetes driver on namespace ns
// (made here) of the real cluster, with extra settings.
func (k *kubeWorld) kubeGateway(t *testing.T, ns string, extra ...string) *gateway {
	t.Helper()
	if _, err := k.dc.Resource(k8sNamespaces).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig, classes := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "classes.yaml")
	for path, content := range map[string]string{
		kubeconfig: k.srv.Kubeconfig(),
		classes:    strings.ReplaceAll(classesYAML+workstationYAML, sandboxImage, k.sandboxImage),
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, append([]string{
		"BERTH_SANDBOX_DRIVER=kubernetes",
		"KUBECONFIG=" + kubeconfig,
		"BERTH_SANDBOXES_FILE=" + classes,
		"BERTH_SANDBOX_NAMESPACE=" + ns,
		"BERTH_SANDBOX_RUNTIME_STANDARD=runc",
	}, extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range k.pods(t, ns, "") {
				t.Logf("pod %s (%s) printed:\n%s", p.GetName(), str(&p, "status", "phase"), k.srv.PodLogs(ns, p.GetName()))
			}
		}
	})
	return g
}

// pods are the live pods of namespace ns (not being deleted) matching
// the label selector.
func (k *kubeWorld) pods(t *testing.T, ns, selector string) []unstructured.Unstructured {
	t.Helper()
	list, err := k.dc.Resource(k8sPods).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var live []unstructured.Unstructured
	for _, p := range list.Items {
		if p.GetDeletionTimestamp() == nil {
			live = append(live, p)
		}
	}
	return live
}

// sandboxObject is sandbox id's Sandbox, or nil once there is none.
func (k *kubeWorld) sandboxObject(t *testing.T, ns, id string) *unstructured.Unstructured {
	t.Helper()
	list, err := k.dc.Resource(k8sSandboxes).Namespace(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "berth.dev/sandbox=" + id})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	return &list.Items[0]
}

func str(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

// eventually polls ok until it holds, failing the test after d.
func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEngineerOnRealController is an engineer sandbox's whole life on the
// kubernetes driver, with the real agent-sandbox controller making its
// pod and a real sshd in it: created, ssh'd into through the gateway with
// the real OpenSSH client, extended (shutdownTime moves), suspended (the
// pod goes, the home stays), resumed, expired while the gateway is down
// (the cluster ends it on its own), resumed after expiry with a new key
// that reaches the pod, and terminated.
func TestEngineerOnRealController(t *testing.T) {
	k := realCluster(t)
	ns := "berth-e2e-engineer"
	g := k.kubeGateway(t, ns)
	alice := g.newMember(t, "alice")
	pub, err := os.ReadFile(alice.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := alice.api.CreateSandbox(t.Context(), api.CreateSandbox{Name: "dev", Class: "workstation", SSHKeys: []string{strings.TrimSpace(string(pub))}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	sshIn := func(command string) string {
		t.Helper()
		return strings.TrimSpace(alice.run(berthBin, "sandbox", "ssh", "dev", "-i", alice.key, "--", command))
	}
	if got := sshIn("id -un; echo $BERTH_SANDBOX_NAME; echo kept > ~/kept.txt"); got != "berth\ndev" {
		t.Fatalf("berth sandbox ssh dev: %q, want the sandbox user in dev", got)
	}
	obj := k.sandboxObject(t, ns, string(sb.ID))
	if obj == nil {
		t.Fatal("no Sandbox for a running sandbox")
	}
	if pods := k.pods(t, ns, "berth.dev/sandbox="+string(sb.ID)); len(pods) != 1 {
		t.Fatalf("%d live pods of the sandbox, want 1", len(pods))
	}

	// Extended: the cluster's own end of the sandbox moves with it.
	before := str(obj, "spec", "shutdownTime")
	alice.run(berthBin, "sandbox", "extend", "dev", "--ttl", "3h")
	shown, err := alice.api.Sandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := shown.ExpiresAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	eventually(t, 10*time.Second, "shutdownTime to move to the new expiry", func() bool {
		return str(k.sandboxObject(t, ns, string(sb.ID)), "spec", "shutdownTime") == want
	})
	if want == before {
		t.Fatalf("extend left the expiry at %s", before)
	}

	// Suspended: the controller deletes the pod; the home is kept.
	alice.run(berthBin, "sandbox", "suspend", "dev")
	g.waitState(alice.api, sb.ID, "suspended", time.Minute)
	eventually(t, 30*time.Second, "the suspended sandbox's pod to go", func() bool {
		return len(k.pods(t, ns, "berth.dev/sandbox="+string(sb.ID))) == 0
	})
	alice.run(berthBin, "sandbox", "resume", "dev")
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	if got := sshIn("cat ~/kept.txt"); got != "kept" {
		t.Errorf("after resume ~/kept.txt holds %q, want the file written before suspend", got)
	}
	oldKey := sshIn("echo $BERTH_API_KEY")

	// Expired with the gateway down: the cluster ends the sandbox itself
	// at shutdownTime (Retain: the pod goes, the Sandbox and its volume
	// stay). BERTH_TEST_MIN_TTL lets the lifetime be this short.
	alice.run(berthBin, "sandbox", "extend", "dev", "--ttl", "8s", "--shorten")
	shown, err = alice.api.Sandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	want = shown.ExpiresAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	eventually(t, 10*time.Second, "shutdownTime to move to the short expiry", func() bool {
		return str(k.sandboxObject(t, ns, string(sb.ID)), "spec", "shutdownTime") == want
	})
	g.stop()
	eventually(t, time.Minute, "the cluster to end the expired sandbox's pod with the gateway down", func() bool {
		return len(k.pods(t, ns, "berth.dev/sandbox="+string(sb.ID))) == 0
	})
	if k.sandboxObject(t, ns, string(sb.ID)) == nil {
		t.Fatal("the cluster deleted an expired engineer sandbox's Sandbox; Retain keeps it (and its home)")
	}
	g.start()
	g.waitState(alice.api, sb.ID, "expired", time.Minute)

	// Resumed after expiry: a new key, in the new pod's environment.
	alice.run(berthBin, "sandbox", "resume", "dev")
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	if got := sshIn("cat ~/kept.txt"); got != "kept" {
		t.Errorf("after expiry and resume ~/kept.txt holds %q, want it kept", got)
	}
	newKey := sshIn("echo $BERTH_API_KEY")
	if newKey == "" || newKey == oldKey {
		t.Errorf("the resumed sandbox's key is %q, the one before expiry %q: want a new one", redact(newKey), redact(oldKey))
	}

	// Terminated: the Sandbox goes, and with it the pod.
	alice.run(berthBin, "sandbox", "terminate", "dev")
	g.waitState(alice.api, sb.ID, "terminated", time.Minute)
	eventually(t, 30*time.Second, "the terminated sandbox's Sandbox and pod to go", func() bool {
		return k.sandboxObject(t, ns, string(sb.ID)) == nil && len(k.pods(t, ns, "berth.dev/sandbox="+string(sb.ID))) == 0
	})
}

// redact shows a key's first characters only.
func redact(key string) string {
	if len(key) > 12 {
		return key[:12] + "…"
	}
	return key
}

// TestWarmPoolOnRealController is a warm class of two on the real
// controller: the pool fills with running pods, a create claims a ready
// one (ssh works through the gateway at once), the pool makes a new
// member, a new image for the class reaches only members made after the
// change (OnReplenish), and warm: 0 deletes the pool and its members.
func TestWarmPoolOnRealController(t *testing.T) {
	k := realCluster(t)
	ns := "berth-e2e-warm"
	g := k.kubeGateway(t, ns, "BERTH_SANDBOX_WARM=on")
	classes := func(image string, warm int) {
		t.Helper()
		if _, err := g.operator.ApplyClasses(t.Context(), "", strings.NewReader(fmt.Sprintf(`sandboxes:
  - name: pooled
    image: %s
    isolation: standard
    cpu: "1"
    memory: 1Gi
    default_ttl: 1h
    max_ttl: 4h
    purposes: [engineer]
    warm: %d
`, image, warm))); err != nil {
			t.Fatal(err)
		}
	}
	image := k.sandboxImage
	classes(image, 2)
	members := func() []unstructured.Unstructured {
		var ready []unstructured.Unstructured
		for _, p := range k.pods(t, ns, "berth.dev/pool=true") {
			if p.GetAnnotations()["berth.dev/bootstrap-token"] == "" && str(&p, "status", "phase") == "Running" && podReady(&p) {
				ready = append(ready, p)
			}
		}
		return ready
	}
	eventually(t, 2*time.Minute, "the pool to fill with two running members", func() bool { return len(members()) == 2 })
	first := map[string]bool{}
	for _, p := range members() {
		first[p.GetName()] = true
	}

	alice := g.newMember(t, "alice")
	pub, err := os.ReadFile(alice.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	sb, err := alice.api.CreateSandbox(t.Context(), api.CreateSandbox{Name: "warm", Class: "pooled", SSHKeys: []string{strings.TrimSpace(string(pub))}})
	if err != nil {
		t.Fatal(err)
	}
	sb = g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	t.Logf("claimed from the pool and ssh-ready in %s", time.Since(began).Round(time.Millisecond))
	if !sb.FromPool {
		t.Errorf("a create of a warm class with a ready pool did not claim: %+v", sb)
	}
	if got := strings.TrimSpace(alice.run(berthBin, "sandbox", "ssh", "warm", "-i", alice.key, "--", "id -un; echo $BERTH_SANDBOX_NAME")); got != "berth\nwarm" {
		t.Errorf("ssh into the claimed sandbox: %q, want its user in it with its own environment", got)
	}
	claimed := k.sandboxObject(t, ns, string(sb.ID))
	if claimed == nil || !first[claimed.GetName()] {
		t.Errorf("the claimed sandbox's Sandbox is %v, want one of the ready members %v", claimed, first)
	}

	// Suspended and resumed: the claimed Sandbox's new pod fetches the
	// environment again with a new one-time token, which reaches it
	// through the claim (the old one is spent).
	alice.run(berthBin, "sandbox", "suspend", "warm")
	g.waitState(alice.api, sb.ID, "suspended", time.Minute)
	eventually(t, 30*time.Second, "the suspended claimed sandbox's pod to go", func() bool {
		return !hasPod(k.pods(t, ns, ""), claimed.GetName())
	})
	alice.run(berthBin, "sandbox", "resume", "warm")
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	if got := strings.TrimSpace(alice.run(berthBin, "sandbox", "ssh", "warm", "-i", alice.key, "--", "echo $BERTH_SANDBOX_NAME")); got != "warm" {
		t.Errorf("ssh into the resumed claimed sandbox: %q", got)
	}

	// The pool makes up for the member it lost, with the template's image.
	eventually(t, 2*time.Minute, "the pool to refill to two", func() bool { return len(members()) == 2 })

	// A new image: the template says it at once; members made before the
	// change keep theirs until claimed (OnReplenish).
	tag := "localhost/berth-e2e-sandbox:" + strings.ToLower(rand.Text()[:8])
	if out, err := podmanOn(k.root, "tag", image, tag).CombinedOutput(); err != nil {
		t.Fatalf("podman tag: %v: %s", err, out)
	}
	// untag with the name given: without one podman removes every name
	// of the image, the cluster's own among them (tag is its image too).
	t.Cleanup(func() { _ = podmanOn(k.root, "untag", tag, tag).Run() })
	classes(tag, 2)
	eventually(t, 30*time.Second, "the template to name the new image", func() bool {
		list, err := k.dc.Resource(k8sTemplates).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		ctrs, _, _ := unstructured.NestedSlice(list.Items[0].Object, "spec", "podTemplate", "spec", "containers")
		return len(ctrs) == 1 && ctrs[0].(map[string]any)["image"] == tag
	})
	for _, p := range members() {
		if img := podImage(&p); img != image {
			t.Errorf("member %s runs %s before any claim, want the old image (OnReplenish)", p.GetName(), img)
		}
	}
	sb2, err := alice.api.CreateSandbox(t.Context(), api.CreateSandbox{Name: "warm2", Class: "pooled", SSHKeys: []string{strings.TrimSpace(string(pub))}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb2.ID, "running", 2*time.Minute)
	eventually(t, 2*time.Minute, "a member of the new image", func() bool {
		for _, p := range members() {
			if podImage(&p) == tag {
				return true
			}
		}
		return false
	})

	// warm: 0 deletes the pool and its members; claimed sandboxes stay.
	classes(tag, 0)
	eventually(t, time.Minute, "the pool and its members to go", func() bool {
		list, err := k.dc.Resource(k8sWarmPools).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && len(members()) == 0
	})
	if got := strings.TrimSpace(alice.run(berthBin, "sandbox", "ssh", "warm", "-i", alice.key, "--", "id -un")); got != "berth" {
		t.Errorf("a claimed sandbox after its pool went: ssh says %q", got)
	}
}

// hasPod reports whether pods hold one named name.
func hasPod(pods []unstructured.Unstructured, name string) bool {
	for _, p := range pods {
		if p.GetName() == name {
			return true
		}
	}
	return false
}

func podReady(p *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

func podImage(p *unstructured.Unstructured) string {
	ctrs, _, _ := unstructured.NestedSlice(p.Object, "spec", "containers")
	if len(ctrs) == 0 {
		return ""
	}
	img, _ := ctrs[0].(map[string]any)["image"].(string)
	return img
}

// TestEditorForwardingOnRealController is TestEditorForwarding on the
// kubernetes driver: the engineer sandbox's pod runs this tree's
// berth-init and sshd under podman, and the real OpenSSH client reaches
// it through the gateway's tunnel to the pod with the key of create
// --ssh-key, forwards (-L, -D, -R), shares one ControlMaster and is
// refused an agent and X11.
func TestEditorForwardingOnRealController(t *testing.T) {
	k := realCluster(t)
	g := k.kubeGateway(t, "berth-e2e-forward")
	alice := g.newMember(t, "alice")
	sb := alice.engineerWithKeyElsewhere(g, "dev", "standard")
	editorChecks(t, g, alice, sb)
}
