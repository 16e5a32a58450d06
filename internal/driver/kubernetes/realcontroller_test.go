package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// The tests in this file run against the real agent-sandbox controller
// (scripts/build-controller, BERTH_TEST_CONTROLLER) on an API server of
// their own, so it never meets the stand-in of controller_test.go; pods
// are run by kubetest's kubelet stand-in, which reports them Running and
// Ready without running a process.

// realServer is the API server with the real controller beside it,
// started by the first test that asks; TestMain stops it.
var realServer struct {
	once sync.Once
	srv  *kubetest.Server
	err  error
}

// realClient reaches the API server the real controller watches,
// skipping the test unless both BERTH_TEST_KUBE and BERTH_TEST_CONTROLLER
// are set.
func realClient(t *testing.T) dynamic.Interface {
	t.Helper()
	bin, ctl := os.Getenv(kubetest.EnvBinaries), os.Getenv(kubetest.EnvController)
	if bin == "" || ctl == "" {
		t.Skipf("needs the real agent-sandbox controller: set %s (scripts/build-kube) and %s (scripts/build-controller)",
			kubetest.EnvBinaries, kubetest.EnvController)
	}
	realServer.once.Do(func() {
		realServer.srv, realServer.err = startReal(bin, ctl)
		if realServer.err == nil {
			realServer.err = addRuntimeClass(realServer.srv, "gvisor", "runsc")
		}
	})
	if realServer.err != nil {
		t.Fatal(realServer.err)
	}
	return clientOf(t, realServer.srv)
}

// startReal starts an API server with the real controller beside it, its
// kubelet stand-in set by opts.
func startReal(bin, ctl string, opts ...kubetest.ControllerOption) (*kubetest.Server, error) {
	crds, err := kubetest.CRDDir(os.Getenv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	srv, err := kubetest.Start(ctx, bin, crds)
	if err != nil {
		return nil, err
	}
	if err := srv.StartController(ctx, ctl, opts...); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("%s=%s: %w", kubetest.EnvController, ctl, err)
	}
	fmt.Fprintf(os.Stderr, "kube-apiserver, etcd and the real agent-sandbox controller up in %s\n", time.Since(began).Round(100*time.Millisecond))
	return srv, nil
}

// addRuntimeClass makes the RuntimeClass name, as a cluster that runs
// pods on that runtime has it: without it the API server refuses the pods
// of a template naming it (berth's isolated tier names "gvisor"). The
// kubelet stand-in that runs no process ignores the handler.
func addRuntimeClass(srv *kubetest.Server, name, handler string) error {
	dc, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		return err
	}
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": name}, "handler": handler,
	}}
	gvr := schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
	if _, err := dc.Resource(gvr).Create(context.Background(), rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("RuntimeClass %s: %w", name, err)
	}
	return nil
}

// clientOf reaches srv for t, keeping the controller's log of t's time
// for its failure.
func clientOf(t *testing.T, srv *kubetest.Server) dynamic.Interface {
	t.Helper()
	srv.ControllerLog(t)
	dc, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// livePod is the pod of the Sandbox name that is not being deleted, or nil.
func livePod(t *testing.T, dc dynamic.Interface, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dc.Resource(podGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if u.GetDeletionTimestamp() != nil {
		return nil
	}
	return u
}

// eventually polls ok until it holds, failing the test after d.
func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRealControllerEngineerLifecycle: on the real controller an engineer
// sandbox made by the driver gets its pod (the pod template as written,
// owned by the Sandbox), is ready once that pod runs and sshd greets at
// the pod IP the controller reported, suspends (the controller deletes
// the pod, keeps the Sandbox), resumes into a new pod, and is removed.
func TestRealControllerEngineerLifecycle(t *testing.T) {
	dc := realClient(t)
	ctx := t.Context()
	ns := namespace(t, dc)
	g := newGreeter(t, livePodsGreet(dc, ns))
	cfg := kubernetes.Config{Namespace: ns, Deployment: "berthtest0001", ReadyTimeout: time.Minute, Dial: g.dial,
		PublicURL: "http://gateway.test:8080"}
	d := kubernetes.New(cfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil)))

	spec := engineerSpec()
	spec.Sandbox.CreatedAt = time.Now()
	spec.Sandbox.ExpiresAt = time.Now().Add(time.Hour)
	id := spec.Sandbox.ID
	name := "sbx-abcdefghij0123456789"
	if err := d.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	pod := livePod(t, dc, ns, name)
	if pod == nil {
		t.Fatal("ready, but no pod of the Sandbox")
	}
	owners := pod.GetOwnerReferences()
	if len(owners) != 1 || owners[0].Kind != "Sandbox" || owners[0].Name != name {
		t.Errorf("pod owners %+v, want the Sandbox %s", owners, name)
	}
	if got := pod.GetLabels()["berth.dev/sandbox"]; got != string(id) {
		t.Errorf("pod label berth.dev/sandbox = %q, want %q (copied from the pod template)", got, id)
	}
	if got := str(pod, "spec", "nodeName"); got != kubetest.NodeName {
		t.Errorf("pod on node %q, want %q", got, kubetest.NodeName)
	}
	if ctrs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers"); len(ctrs) != 1 || ctrs[0].(map[string]any)["image"] != spec.Sandbox.Image {
		t.Errorf("pod containers %v, want one of %s", ctrs, spec.Sandbox.Image)
	}
	m, err := d.Inspect(ctx, id)
	if err != nil || m.Status != sandbox.MachineRunning {
		t.Fatalf("Inspect after Start = %+v, %v; want running", m, err)
	}
	firstUID, firstIP := pod.GetUID(), str(pod, "status", "podIP")

	if err := d.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the controller to delete the pod and say suspended", func() bool {
		m, err := d.Inspect(ctx, id)
		return err == nil && m.Status == sandbox.MachineStopped && !m.FinishedAt.IsZero() && livePod(t, dc, ns, name) == nil
	})
	if _, err := dc.Resource(sandboxGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Sandbox after suspend: %v", err)
	}

	if err := d.Start(ctx, spec); err != nil {
		t.Fatalf("resume: %v", err)
	}
	pod = livePod(t, dc, ns, name)
	if pod == nil || pod.GetUID() == firstUID {
		t.Fatalf("resumed without a new pod (first %s at %s)", firstUID, firstIP)
	}
	if m, err := d.Inspect(ctx, id); err != nil || m.Status != sandbox.MachineRunning {
		t.Fatalf("Inspect after resume = %+v, %v; want running", m, err)
	}

	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Sandbox to go", func() bool {
		_, err := dc.Resource(sandboxGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := d.Inspect(ctx, id); !errors.Is(err, fault.NotFound) {
		t.Errorf("Inspect after Remove: %v, want not found", err)
	}
	// Without kube-controller-manager nothing collects the pod the removed
	// Sandbox owned; a real cluster's garbage collector does.
}
