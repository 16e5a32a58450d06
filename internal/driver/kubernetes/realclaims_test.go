package kubernetes_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/warm"
)

// livePodsGreet is a stand-in sshd that greets only at the IP of a live,
// running pod of namespace ns: the driver must dial the address the
// controller copied from the pod.
func livePodsGreet(dc dynamic.Interface, ns string) func(string) bool {
	return func(ip string) bool {
		list, err := dc.Resource(podGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range list.Items {
			if p.GetDeletionTimestamp() == nil && str(&p, "status", "podIP") == ip && str(&p, "status", "phase") == "Running" {
				return true
			}
		}
		return false
	}
}

// claimOf reads the sandbox's SandboxClaim as the controller left it.
func claimOf(t *testing.T, dc dynamic.Interface, ns string, id sandbox.ID) (*unstructured.Unstructured, []metav1.Condition) {
	t.Helper()
	u, err := dc.Resource(claimGVR).Namespace(ns).Get(t.Context(), strings.ReplaceAll(string(id), "_", "-"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's SandboxClaim: %v", err)
	}
	var conds []metav1.Condition
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range raw {
		m, _ := x.(map[string]any)
		s := func(k string) string { v, _ := m[k].(string); return v }
		conds = append(conds, metav1.Condition{Type: s("type"), Status: metav1.ConditionStatus(s("status")), Reason: s("reason"), Message: s("message")})
	}
	return u, conds
}

// TestRealControllerWarmPoolClaim: on the real controller, with its
// default label allowlist, a warm class's pool fills from the template
// the driver writes, and a sandbox of the class is a SandboxClaim that
// the controller accepts (1) and binds to a pool member; the driver finds
// that member although the controller copies none of the claim's labels
// to it, so Start returns once sshd greets, the expiry is on it, and
// Inspect, List, Addr, SetExpiry and Stop reach it (2); a resume's new
// bootstrap token reaches the new pod, through the claim the controller
// writes back over the Sandbox's pod metadata (3).
func TestRealControllerWarmPoolClaim(t *testing.T) {
	dc := realClient(t)
	ctx := t.Context()
	ns := namespace(t, dc)
	g := newGreeter(t, livePodsGreet(dc, ns))
	cfg := kubernetes.Config{Namespace: ns, Deployment: "berthtest0001", ReadyTimeout: 30 * time.Second, Dial: g.dial,
		PublicURL: "http://gateway.test:8080"}
	d := kubernetes.New(cfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil)))

	p := warm.Pool{Org: "org_acme", Class: class.Class{Name: "warm", Image: "ghcr.io/acme/dev:1", CPU: 500, Memory: 1 << 30, Warm: 1}}
	if err := d.SyncPools(ctx, []warm.Pool{p}); err != nil {
		t.Fatal(err)
	}
	var pool string
	eventually(t, time.Minute, "the pool to have a ready member", func() bool {
		list, err := dc.Resource(poolGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		pool = list.Items[0].GetName()
		n, _, _ := unstructured.NestedInt64(list.Items[0].Object, "status", "readyReplicas")
		return n == 1
	})

	spec := drivertest.Spec(drivertest.Options{Image: p.Class.Image, SSHKey: sshKey})
	spec.Sandbox.Org, spec.Sandbox.Class, spec.Sandbox.FromPool = p.Org, p.Class.Name, true
	spec.Env, spec.Bootstrap = nil, secret.New("bst_FIRSTTOKEN")
	id := spec.Sandbox.ID
	started := d.Start(ctx, spec)

	var bound string
	ok := t.Run("1 the controller accepts the claim", func(t *testing.T) {
		claim, conds := claimOf(t, dc, ns, id)
		if c := meta.FindStatusCondition(conds, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("claim Ready = %+v, want True (the default allowlist admits only sandbox.users.io labels)", c)
		}
		bound = str(claim, "status", "sandbox", "name")
		if !strings.HasPrefix(bound, pool+"-") {
			t.Fatalf("claim bound to %q, want a member of pool %s (adopted warm)", bound, pool)
		}
		if pod := livePod(t, dc, ns, bound); pod == nil || pod.GetAnnotations()["berth.dev/bootstrap-token"] != "bst_FIRSTTOKEN" {
			t.Fatalf("the bound pod's annotations do not carry the claim's bootstrap token: %v", pod)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("2 the driver finds the Sandbox it claimed", func(t *testing.T) {
		if started != nil {
			t.Fatalf("Start = %v, want ready once the bound pod's sshd greets", started)
		}
		u, err := dc.Resource(sandboxGVR).Namespace(ns).Get(ctx, bound, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := u.GetLabels()["berth.dev/sandbox"]; got != string(id) {
			t.Errorf("the bound Sandbox's berth.dev/sandbox = %q, want %q", got, id)
		}
		if got := u.GetAnnotations()["berth.dev/name"]; got != spec.Sandbox.Name {
			t.Errorf("the bound Sandbox's berth.dev/name annotation = %q, want %q", got, spec.Sandbox.Name)
		}
		if st := str(u, "spec", "shutdownTime"); st != spec.Sandbox.ExpiresAt.UTC().Format(time.RFC3339) {
			t.Errorf("the bound Sandbox's shutdownTime = %q, want the expiry %s", st, spec.Sandbox.ExpiresAt.UTC().Format(time.RFC3339))
		}
		m, err := d.Inspect(ctx, id)
		if err != nil || m.Status != sandbox.MachineRunning || m.Detail != "" {
			t.Errorf("Inspect = %+v, %v; want running, bound", m, err)
		}
		ms, err := d.List(ctx)
		if err != nil || len(ms) != 1 || ms[0].ID != id || ms[0].Detail != "" {
			t.Errorf("List = %+v, %v; want the one bound sandbox", ms, err)
		}
		ip := ""
		if pod := livePod(t, dc, ns, bound); pod != nil {
			ip = str(pod, "status", "podIP")
		}
		if addr, err := d.Addr(ctx, id, 8080); err != nil || addr != ip+":8080" {
			t.Errorf("Addr = %q, %v; want the bound pod's %s:8080", addr, err, ip)
		}
		later := spec.Sandbox.ExpiresAt.Add(time.Hour)
		if err := d.SetExpiry(ctx, id, later); err != nil {
			t.Fatalf("SetExpiry: %v", err)
		}
		u, _ = dc.Resource(sandboxGVR).Namespace(ns).Get(ctx, bound, metav1.GetOptions{})
		if st := str(u, "spec", "shutdownTime"); st != later.UTC().Format(time.RFC3339) {
			t.Errorf("shutdownTime after SetExpiry = %q, want %s", st, later.UTC().Format(time.RFC3339))
		}
		if err := d.Stop(ctx, id); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		eventually(t, 30*time.Second, "the controller to delete the pod and say suspended", func() bool {
			m, err := d.Inspect(ctx, id)
			return err == nil && m.Status == sandbox.MachineStopped && livePod(t, dc, ns, bound) == nil
		})
	})
	if !ok {
		return
	}

	t.Run("3 a resume's new token reaches the pod", func(t *testing.T) {
		resume := sandbox.Spec{Sandbox: spec.Sandbox, Bootstrap: secret.New("bst_SECONDTOKEN")}
		if err := d.Start(ctx, resume); err != nil {
			t.Fatalf("resume: %v", err)
		}
		claim, _ := claimOf(t, dc, ns, id)
		if got := str(claim, "spec", "additionalPodMetadata", "annotations", "berth.dev/bootstrap-token"); got != "bst_SECONDTOKEN" {
			t.Errorf("the claim's pod annotation = %q, want the new token (the controller writes the claim's back over the Sandbox's)", got)
		}
		eventually(t, 10*time.Second, "the new pod and its Sandbox to carry the new token", func() bool {
			u, err := dc.Resource(sandboxGVR).Namespace(ns).Get(ctx, bound, metav1.GetOptions{})
			pod := livePod(t, dc, ns, bound)
			return err == nil && pod != nil && pod.GetAnnotations()["berth.dev/bootstrap-token"] == "bst_SECONDTOKEN" &&
				str(u, "spec", "podTemplate", "metadata", "annotations", "berth.dev/bootstrap-token") == "bst_SECONDTOKEN"
		})
	})

	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ms, err := d.List(ctx); err != nil || len(ms) != 0 {
		t.Errorf("List after Remove = %+v, %v; want none", ms, err)
	}
}
