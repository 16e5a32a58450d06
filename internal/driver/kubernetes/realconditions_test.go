package kubernetes_test

import (
	"context"
	"log/slog"
	"net"
	"slices"
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
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/warm"
)

// realDriver is a driver on a namespace of the test's own on the real
// controller's API server, waiting at most timeout for a sandbox.
func realDriver(t *testing.T, timeout time.Duration, dial func(context.Context, string, string) (net.Conn, error)) (*kubernetes.Driver, kubernetes.Config) {
	dc := realClient(t)
	cfg := kubernetes.Config{Namespace: namespace(t, dc), Deployment: "berthtest0001", ReadyTimeout: timeout, Dial: dial,
		PublicURL: "http://gateway.test:8080"}
	return kubernetes.New(cfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil))), cfg
}

// TestRealControllerClaimRefusedAtOnce: a claim the real controller
// refuses fails Start at once, in berth's words with the controller's
// reason and message (they become the sandbox's failure reason), instead
// of after the whole ready timeout: a pool without its template
// (TemplateNotFound), no pool (WarmPoolNotFound), and the claim exactly
// as the driver writes it on a pool without its template, whatever the
// controller says first (InvalidMetadata while the claim's pod labels are
// outside the controller's allowlist). The first two claims are made
// beforehand without pod labels, so the metadata check passes.
func TestRealControllerClaimRefusedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pool       bool
		preclaim   bool
		wantReason []string
	}{
		{"no template", true, true, []string{"TemplateNotFound"}},
		{"no pool", false, true, []string{"WarmPoolNotFound"}},
		{"as written", true, false, []string{"TemplateNotFound", "InvalidMetadata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := realClient(t)
			d, cfg := realDriver(t, 2*time.Minute, newGreeter(t, nil).dial)
			ctx := t.Context()
			p := warm.Pool{Org: "org_acme", Class: class.Class{Name: "warm", Image: "ghcr.io/acme/dev:1", CPU: 500, Memory: 1 << 30, Warm: 1}}
			spec := drivertest.Spec(drivertest.Options{Image: p.Class.Image, SSHKey: sshKey})
			spec.Sandbox.Org, spec.Sandbox.Class, spec.Sandbox.FromPool = p.Org, p.Class.Name, true
			spec.Env, spec.Bootstrap = nil, secret.New("bst_ONETIME")
			if tc.pool {
				create(t, dc.Resource(poolGVR).Namespace(cfg.Namespace), kubernetes.PoolObject(cfg, p))
			}
			if tc.preclaim {
				claim := kubernetes.ClaimObject(cfg, spec)
				claim.Spec.AdditionalPodMetadata.Labels = nil
				create(t, dc.Resource(claimGVR).Namespace(cfg.Namespace), claim)
			}

			began := time.Now()
			err := d.Start(ctx, spec)
			took := time.Since(began)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			t.Logf("Start after %s: %v", took.Round(time.Millisecond), err)
			if took > 30*time.Second {
				t.Errorf("Start took %s to fail, want it at once (the ready timeout is %s)", took, cfg.ReadyTimeout)
			}
			u, gerr := dc.Resource(claimGVR).Namespace(cfg.Namespace).Get(ctx, "sbx-"+strings.TrimPrefix(string(spec.Sandbox.ID), "sbx_"), metav1.GetOptions{})
			if gerr != nil {
				t.Fatalf("the claim: %v", gerr)
			}
			var conds []metav1.Condition
			raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range raw {
				m := c.(map[string]any)
				msg, _ := m["message"].(string)
				conds = append(conds, metav1.Condition{Type: m["type"].(string), Status: metav1.ConditionStatus(m["status"].(string)),
					Reason: m["reason"].(string), Message: msg})
			}
			ready := meta.FindStatusCondition(conds, "Ready")
			if ready == nil {
				t.Fatalf("the claim has no Ready condition (%v); Start said %v", conds, err)
			}
			if !slices.Contains(tc.wantReason, ready.Reason) {
				t.Errorf("the controller's reason %q, want one of %v", ready.Reason, tc.wantReason)
			}
			msg := err.Error()
			for _, want := range []string{"agent-sandbox controller", ready.Reason, ready.Message} {
				if !strings.Contains(msg, want) {
					t.Errorf("Start = %q, want it to name %q", msg, want)
				}
			}
		})
	}
}

// create makes obj, as the driver would render it, through res.
func create(t *testing.T, res dynamic.ResourceInterface, obj any) {
	t.Helper()
	m, err := kubernetes.Render(obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Create(t.Context(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRealControllerSyncPoolsLeavesItsLabels: the real controller labels
// each SandboxTemplate (agents.x-k8s.io/sandbox-template-ref-hash); a
// SyncPools with nothing changed writes neither the template nor the
// pool, and the controller's label stays.
func TestRealControllerSyncPoolsLeavesItsLabels(t *testing.T) {
	dc := realClient(t)
	d, cfg := realDriver(t, time.Minute, newGreeter(t, nil).dial)
	ctx := t.Context()
	p := warm.Pool{Org: "org_acme", Class: class.Class{Name: "warm", Image: "ghcr.io/acme/dev:1", CPU: 500, Memory: 1 << 30, Warm: 1}}
	if err := d.SyncPools(ctx, []warm.Pool{p}); err != nil {
		t.Fatal(err)
	}
	const hashLabel = "agents.x-k8s.io/sandbox-template-ref-hash"
	name := kubernetes.TemplateObject(cfg, p).Name
	templates, pools := dc.Resource(templateGVR).Namespace(cfg.Namespace), dc.Resource(poolGVR).Namespace(cfg.Namespace)
	var tpl *unstructured.Unstructured
	eventually(t, 30*time.Second, "the controller to label the template", func() bool {
		u, err := templates.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tpl = u
		return u.GetLabels()[hashLabel] != ""
	})
	pool, err := pools.Get(ctx, kubernetes.PoolObject(cfg, p).Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := d.SyncPools(ctx, []warm.Pool{p}); err != nil {
		t.Fatal(err)
	}
	after, err := templates.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != tpl.GetResourceVersion() {
		t.Errorf("the template was rewritten (resourceVersion %s -> %s; labels now %v)", tpl.GetResourceVersion(), after.GetResourceVersion(), after.GetLabels())
	}
	if after.GetLabels()[hashLabel] != tpl.GetLabels()[hashLabel] {
		t.Errorf("the controller's label %s = %q after SyncPools, want %q", hashLabel, after.GetLabels()[hashLabel], tpl.GetLabels()[hashLabel])
	}
	// The pool's status moves as it fills; its generation is its spec's.
	poolAfter, err := pools.Get(ctx, pool.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if poolAfter.GetGeneration() != pool.GetGeneration() {
		t.Errorf("the pool's spec was rewritten (generation %d -> %d)", pool.GetGeneration(), poolAfter.GetGeneration())
	}

	// A change of berth's own still reaches the template.
	p.Class.Image = "ghcr.io/acme/dev:2"
	if err := d.SyncPools(ctx, []warm.Pool{p}); err != nil {
		t.Fatal(err)
	}
	changed, err := templates.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctrs, _, _ := unstructured.NestedSlice(changed.Object, "spec", "podTemplate", "spec", "containers")
	if len(ctrs) != 1 || ctrs[0].(map[string]any)["image"] != p.Class.Image {
		t.Errorf("template containers %v after the image changed, want %s", ctrs, p.Class.Image)
	}
	if err := d.SyncPools(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRealControllerReadyWithoutSSHD: a Sandbox the real controller
// reports Ready, at whose pod IP nothing answers on sshd's port, fails
// Start at the ready timeout saying so: the address, and that the
// Sandbox is Ready, not a bare "waited for it to be ready".
func TestRealControllerReadyWithoutSSHD(t *testing.T) {
	t.Parallel() // waits on pods and timeouts, on a server of its own
	// Every dial goes to a loopback port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, closed)
	}
	d, cfg := realDriver(t, 10*time.Second, dial)
	dc := realClient(t)
	spec := drivertest.Spec(drivertest.Options{Image: "ghcr.io/acme/dev:1", SSHKey: sshKey})
	err = d.Start(t.Context(), spec)
	if err == nil {
		t.Fatal("Start succeeded with no sshd")
	}
	t.Logf("Start: %v", err)
	name := "sbx-" + strings.TrimPrefix(string(spec.Sandbox.ID), "sbx_")
	u, gerr := dc.Resource(sandboxGVR).Namespace(cfg.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	ips, _, _ := unstructured.NestedStringSlice(u.Object, "status", "podIPs")
	if len(ips) == 0 {
		t.Fatalf("the Sandbox has no pod IP; Start said %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"sshd", net.JoinHostPort(ips[0], "2222"), "Ready"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start = %q, want it to name %q", msg, want)
		}
	}
}
