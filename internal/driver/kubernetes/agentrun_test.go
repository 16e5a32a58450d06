package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// runDriver is a driver on the real controller whose pods' sshd never
// greets: an agent run that waited for a greeting would never be ready.
// The cluster only reads the driver's namespace.
func runDriver(t *testing.T) (*kubernetes.Driver, *cluster) {
	t.Helper()
	never := newGreeter(t, func(string) bool { return false })
	d, cfg := realDriver(t, 30*time.Second, never.dial)
	return d, &cluster{dc: realClient(t), ns: cfg.Namespace}
}

// kelosSpec is kelosRunSpec with an id of the test's own.
func kelosSpec(id sandbox.ID) sandbox.Spec {
	spec := kelosRunSpec()
	spec.Sandbox.ID = id
	spec.Sandbox.CreatedAt, spec.Sandbox.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	spec.Env["BERTH_SANDBOX_ID"] = string(id)
	return spec
}

// endPodAs reports the pod name of c's namespace ended with its container's
// exit code, as a kubelet does once the process exits: the kubelet
// stand-in of realClient's server runs no process and leaves a pod that
// ended alone.
func (c *cluster) endPodAs(t *testing.T, name string, code int32) {
	t.Helper()
	pods := c.dc.Resource(podGVR).Namespace(c.ns)
	var pod corev1.Pod
	eventually(t, 30*time.Second, "the Sandbox's pod to run", func() bool {
		u, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod) == nil && pod.Status.Phase == corev1.PodRunning
	})
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	now := metav1.Now()
	for i := range pod.Status.Conditions {
		if cd := &pod.Status.Conditions[i]; cd.Type == corev1.PodReady || cd.Type == corev1.ContainersReady {
			cd.Status, cd.Reason, cd.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
		}
	}
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready, cs.Started = false, new(bool)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", FinishedAt: now}}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.UpdateStatus(t.Context(), &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s ended: %v", name, err)
	}
}

// runSpec is agentRunSpec with an id of the test's own, expiring in an
// hour from now: the real controller ends a Sandbox past its shutdownTime.
func runSpec(id sandbox.ID) sandbox.Spec {
	spec := agentRunSpec()
	spec.Sandbox.ID = id
	spec.Sandbox.CreatedAt, spec.Sandbox.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	spec.Env["BERTH_SANDBOX_ID"] = string(id)
	return spec
}

// TestAgentRunStarts: Start of an in-machine agent run writes a Sandbox
// the API server accepts, with the run's pod, and returns once the
// controller says Ready, without dialling any sshd. Inspect follows the
// pod to its end, which is final; Remove deletes the Sandbox. On the real
// controller; the pod's exit is reported as a kubelet would (endPodAs).
func TestAgentRunStarts(t *testing.T) {
	d, c := runDriver(t)
	ctx := t.Context()
	spec := runSpec("sbx_agentrunstarts0000001")
	if _, ok := any(d).(sandbox.InMachineRuns); !ok {
		t.Fatal("the kubernetes driver does not say it runs agent runs in the machine")
	}
	start, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := d.Start(start, spec); err != nil {
		t.Fatalf("Start(agent run) = %v", err)
	}
	obj := c.object(t, string(spec.Sandbox.ID))
	want := map[string]string{
		"shutdownPolicy":         "Delete",
		"restartPolicy":          "Never",
		"runtimeClassName":       "gvisor",
		"purpose label":          "agent",
		"image":                  spec.Sandbox.Image,
		"command":                "<nil>",
		"args":                   fmt.Sprint(spec.Run.Args),
		"workingDir":             "/work",
		"readOnlyRootFilesystem": "true",
		"runAsUser":              "1001",
		"volumeClaimTemplates":   "<nil>",
		"volumes":                "work 8Gi, tmp 512Mi, home 1Gi",
		"mounts":                 "work /work, tmp /tmp, home /home/berth",
	}
	ctr := container(t, obj)
	sec, _ := ctr["securityContext"].(map[string]any)
	got := map[string]string{
		"shutdownPolicy":         str(obj, "spec", "shutdownPolicy"),
		"restartPolicy":          str(obj, "spec", "podTemplate", "spec", "restartPolicy"),
		"runtimeClassName":       str(obj, "spec", "podTemplate", "spec", "runtimeClassName"),
		"purpose label":          str(obj, "spec", "podTemplate", "metadata", "labels", "berth.dev/purpose"),
		"image":                  fmt.Sprint(ctr["image"]),
		"command":                fmt.Sprint(ctr["command"]),
		"args":                   fmt.Sprint(ctr["args"]),
		"workingDir":             fmt.Sprint(ctr["workingDir"]),
		"readOnlyRootFilesystem": fmt.Sprint(sec["readOnlyRootFilesystem"]),
		"runAsUser":              fmt.Sprint(sec["runAsUser"]),
		"volumeClaimTemplates":   fmt.Sprint(obj.Object["spec"].(map[string]any)["volumeClaimTemplates"]),
	}
	vols, _, _ := unstructured.NestedSlice(obj.Object, "spec", "podTemplate", "spec", "volumes")
	var vs []string
	for _, v := range vols {
		m := v.(map[string]any)
		ed, _ := m["emptyDir"].(map[string]any)
		vs = append(vs, fmt.Sprint(m["name"], " ", ed["sizeLimit"]))
	}
	got["volumes"] = strings.Join(vs, ", ")
	var ms []string
	for _, v := range ctr["volumeMounts"].([]any) {
		m := v.(map[string]any)
		ms = append(ms, fmt.Sprint(m["name"], " ", m["mountPath"]))
	}
	got["mounts"] = strings.Join(ms, ", ")
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	env := envOf(t, obj)
	if env["BERTH_API_KEY"] != "berth_sandboxkey_SECRET" || env["BERTH_RUN_REPORT"] != "gateway" || env["HOME"] != "/home/berth" {
		t.Errorf("pod env BERTH_API_KEY=%q BERTH_RUN_REPORT=%q HOME=%q, want the key by value, gateway, /home/berth",
			env["BERTH_API_KEY"], env["BERTH_RUN_REPORT"], env["HOME"])
	}

	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err != nil || m.Status != sandbox.MachineRunning {
		t.Errorf("Inspect(started run) = %+v, %v; want running", m, err)
	}
	c.endPodAs(t, obj.GetName(), 0)
	waitMachine(t, d, spec.Sandbox.ID, func(m sandbox.Machine) bool {
		return m.Status == sandbox.MachineStopped && m.Final && m.ExitCode == 0
	}, "stopped, final, exit 0")
	if err := d.Remove(ctx, spec.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(ctx, spec.Sandbox.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("Inspect after Remove = %v, want fault.NotFound", err)
	}
	if ms, err := d.List(ctx); err != nil || len(ms) != 0 {
		t.Errorf("List after Remove = %v, %v; want nothing", ms, err)
	}
}

// TestAgentRunFinishedBeforeReady: a run whose pod ends before Start sees
// it Ready (a quick agent, a failing berth-init) has started: Start
// returns at once instead of waiting for a Ready that never comes, and
// Inspect reports the machine stopped for good. It plays the controller
// (standIn), whose first word on this pod is that it failed: the real
// controller reports Ready or Finished as the pod's status changes, so
// whether Start ever sees a Sandbox Finished before Ready there is a race
// the test cannot order.
func TestAgentRunFinishedBeforeReady(t *testing.T) {
	d, ctl, _ := newDriver(t, kubeClient(t), newGreeter(t, func(string) bool { return false }))
	ctx := t.Context()
	spec := runSpec("sbx_agentrunquick00000001")
	ctl.finish(strings.ReplaceAll(string(spec.Sandbox.ID), "_", "-"), "PodFailed")
	began := time.Now()
	if err := d.Start(ctx, spec); err != nil {
		t.Fatalf("Start(a run that already ended) = %v, want nil: it started", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("Start took %s for a finished pod", took)
	}
	m, err := d.Inspect(ctx, spec.Sandbox.ID)
	if err != nil || m.Status != sandbox.MachineStopped || !m.Final || m.ExitCode == 0 {
		t.Errorf("Inspect(failed run) = %+v, %v; want stopped, final, a non-zero exit", m, err)
	}
	if err := d.Remove(ctx, spec.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
}

// TestAgentRunRefusals: runs this driver cannot run are fault.Unavailable,
// saying why, and nothing reaches the cluster.
func TestAgentRunRefusals(t *testing.T) {
	d, c := runDriver(t)
	for name, tt := range map[string]struct {
		edit func(*sandbox.RunSpec)
		want string
	}{
		"host checkout":    {func(r *sandbox.RunSpec) { r.InMachine, r.Work = false, "/var/lib/berth/work/sbx" }, "must run whole in its pod"},
		"unknown contract": {func(r *sandbox.RunSpec) { r.Contract = "docker" }, `contract "docker" is not supported (berth's and kelos are)`},
	} {
		t.Run(name, func(t *testing.T) {
			spec := runSpec("sbx_agentrunrefused000001")
			tt.edit(spec.Run)
			err := d.Start(t.Context(), spec)
			if !errors.Is(err, fault.Unavailable) {
				t.Fatalf("Start = %v, want fault.Unavailable", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("refusal %q does not say %q", err, tt.want)
			}
			list, err := c.dc.Resource(sandboxGVR).Namespace(c.ns).List(t.Context(), metav1.ListOptions{})
			if err != nil || len(list.Items) != 0 {
				t.Errorf("%d Sandboxes after a refused run (%v), want none", len(list.Items), err)
			}
		})
	}
}

// TestKelosRunStarts: a kelos image's run is no longer refused: Start
// writes its Sandbox, init container and all, and the API server takes
// it, and the real controller makes its pod Ready.
func TestKelosRunStarts(t *testing.T) {
	d, c := runDriver(t)
	spec := kelosSpec("sbx_kelosrunstarts0000001")
	start, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := d.Start(start, spec); err != nil {
		t.Fatalf("Start(kelos run) = %v", err)
	}
	obj := c.object(t, string(spec.Sandbox.ID))
	inits, _, _ := unstructured.NestedSlice(obj.Object, "spec", "podTemplate", "spec", "initContainers")
	ctr := container(t, obj)
	if len(inits) != 1 || inits[0].(map[string]any)["name"] != "berth-init" || fmt.Sprint(ctr["command"]) != "[/berth/berth-init]" {
		t.Errorf("the stored pod has init containers %v and command %v; want berth-init copied in and run", inits, ctr["command"])
	}
	if err := d.Remove(t.Context(), spec.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
}

// waitMachine polls Inspect until ok says so.
func waitMachine(t *testing.T, d sandbox.Driver, id sandbox.ID, ok func(sandbox.Machine) bool, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := d.Inspect(t.Context(), id)
		if err == nil && ok(m) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect = %+v, %v; want %s", m, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
