package kubetest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
)

// The tests in this file run pods on a real kube-apiserver through the
// kubelet stand-in with RunPods, under real podman, with no controller:
// they create the pods themselves. They need BERTH_TEST_KUBE and
// BERTH_TEST_PODMAN (a root holding localhost/berth-sandbox:latest).

const testImage = "localhost/berth-sandbox:latest"

var podServer struct {
	once sync.Once
	srv  *Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if podServer.srv != nil {
		podServer.srv.Stop()
	}
	os.Exit(code)
}

// gates returns the binaries' directory and the podman root, skipping the
// test without both.
func gates(t *testing.T) (bin, root string) {
	t.Helper()
	bin, root = os.Getenv(EnvBinaries), os.Getenv(EnvPodman)
	if bin == "" || root == "" {
		t.Skipf("runs pods under podman on a real kube-apiserver: set %s (scripts/build-kube) and %s (a podman root with %s)",
			EnvBinaries, EnvPodman, testImage)
	}
	return bin, root
}

// startPodServer starts an API server with the kubelet stand-in running
// pods under podman.
func startPodServer(bin, root string) (*Server, error) {
	crds, err := CRDDir(os.Getenv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := Start(ctx, bin, crds)
	if err != nil {
		return nil, err
	}
	pm := Podman{Root: root}
	if runsc := os.Getenv("BERTH_TEST_RUNSC"); runsc != "" {
		pm.Runtimes = map[string]string{"gvisor": runsc}
	}
	if err := srv.startKubelet(RunPods(pm)); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// pods is the shared server with pods run under podman, and a namespace
// of the test's own there.
func pods(t *testing.T) (*Server, dynamic.Interface, string) {
	t.Helper()
	bin, root := gates(t)
	podServer.once.Do(func() { podServer.srv, podServer.err = startPodServer(bin, root) })
	if podServer.err != nil {
		t.Fatal(podServer.err)
	}
	dc, err := dynamic.NewForConfig(podServer.srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ns = fmt.Sprintf("%.40s-%d", ns, time.Now().UnixNano()%100000)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := dc.Resource(nsGVR).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return podServer.srv, dc, ns
}

// shell is a container of the test image running script under sh as the
// image's user.
func shell(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: testImage, Command: []string{"/bin/sh", "-c", script}}
}

// create makes the pod, once admission has the namespace's default
// ServiceAccount (the stand-in makes it a moment after the namespace).
func create(t *testing.T, dc dynamic.Interface, ns, name string, spec corev1.PodSpec, meta ...func(*metav1.ObjectMeta)) types.UID {
	t.Helper()
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	// As the driver's pods: a token would be a projected volume, which
	// the stand-in does not mount.
	pod.Spec.AutomountServiceAccountToken = ptr(false)
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
	}
	for _, m := range meta {
		m(&pod.ObjectMeta)
	}
	u, err := toUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := dc.Resource(podGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
		if err == nil {
			return got.GetUID()
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("create pod %s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getPod(t *testing.T, dc dynamic.Interface, ns, name string) (*corev1.Pod, bool) {
	t.Helper()
	u, err := dc.Resource(podGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod, true
}

// waitPod polls the pod until ok holds, failing with its status and logs
// after d.
func waitPod(t *testing.T, srv *Server, dc dynamic.Interface, ns, name string, d time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pod, found := getPod(t, dc, ns, name)
		if found && ok(pod) {
			return pod
		}
		// An ended pod changes no more.
		ended := found && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
		if ended || time.Now().After(deadline) {
			st := "gone"
			if found {
				b, _ := json.Marshal(pod.Status)
				st = string(b)
			}
			t.Fatalf("waited for pod %s to be %s (at most %s); status %s\nlogs:\n%s", name, what, d, st, srv.PodLogs(ns, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func phase(p corev1.PodPhase) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool { return pod.Status.Phase == p }
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// containers lists what the stand-in has in the podman root for a pod.
func containers(t *testing.T, srv *Server, uid types.UID) []string {
	t.Helper()
	ids, err := srv.kubelet.runner.pm.ids(t.Context(), false, labelUID+"="+string(uid))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// deletePod deletes the pod and waits until the API has it no more.
func deletePod(t *testing.T, dc dynamic.Interface, ns, name string) {
	t.Helper()
	if err := dc.Resource(podGVR).Namespace(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, found := getPod(t, dc, ns, name); found; _, found = getPod(t, dc, ns, name) {
		if time.Now().After(deadline) {
			t.Fatalf("pod %s was not deleted", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGone waits for the stand-in to have removed the pod's containers.
func waitGone(t *testing.T, srv *Server, uid types.UID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ids := containers(t, srv, uid); len(ids) > 0; ids = containers(t, srv, uid) {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted pod's containers are still in podman: %v", ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPodInitContainerSharesEmptyDir: an init container runs to
// completion before the container, and what it writes to an emptyDir the
// container reads, on disk and in memory (a tmpfs); the emptyDirs are as
// the kubelet makes them with fsGroup (world-writable, root's, group
// fsGroup, setgid), and the pod ends Succeeded with both containers
// terminated Completed.
func TestPodInitContainerSharesEmptyDir(t *testing.T) {
	srv, dc, ns := pods(t)
	mount := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}, {Name: "mem", MountPath: "/mem"}}
	init := shell("writer", "echo made-by-init > /shared/note; echo in-memory > /mem/note")
	init.VolumeMounts = mount
	main := shell("reader", "cat /shared/note /mem/note; stat -c 'mode=%a owner=%u group=%g' /shared /mem; stat -f -c 'fs=%T' /mem; "+
		"getent hosts host.containers.internal >/dev/null && echo host-by-name")
	main.VolumeMounts = mount
	create(t, dc, ns, "init", corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(1001)), FSGroup: ptr(int64(2345))},
		InitContainers:  []corev1.Container{init}, Containers: []corev1.Container{main},
		Volumes: []corev1.Volume{
			{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("16Mi"))}}},
		},
	})
	pod := waitPod(t, srv, dc, ns, "init", time.Minute, "Succeeded", phase(corev1.PodSucceeded))
	logs := srv.PodLogs(ns, "init")
	// The tmpfs root is 1777 before the fsGroup change, as on a node.
	for _, want := range []string{"made-by-init\nin-memory", "mode=2777 owner=0 group=2345\nmode=3777 owner=0 group=2345", "fs=tmpfs", "host-by-name"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if i := strings.Index(logs, "init container writer"); i < 0 || i > strings.Index(logs, "container reader") {
		t.Errorf("logs do not have the init container first:\n%s", logs)
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if term := cs.State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			t.Errorf("container %s: state %+v, want terminated Completed", cs.Name, cs.State)
		}
	}
	if got := condition(pod, corev1.PodInitialized); got != corev1.ConditionTrue {
		t.Errorf("Initialized = %q, want True", got)
	}
}

// TestPodExit: a container's exit ends the pod as restartPolicy Never
// does: exit 0 Succeeded, else Failed, the container terminated with its
// code and reason; a failed init container fails the pod before the
// container is made. The pod keeps its IP.
func TestPodExit(t *testing.T) {
	srv, dc, ns := pods(t)
	for _, tc := range []struct {
		name       string
		init, main string
		phase      corev1.PodPhase
		code       int32
		reason     string
	}{
		{name: "zero", main: "exit 0", phase: corev1.PodSucceeded, reason: "Completed"},
		{name: "three", main: "exit 3", phase: corev1.PodFailed, code: 3, reason: "Error"},
		{name: "init-two", init: "exit 2", main: "echo never", phase: corev1.PodFailed, code: 2, reason: "Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := corev1.PodSpec{Containers: []corev1.Container{shell("main", tc.main)}}
			if tc.init != "" {
				spec.InitContainers = []corev1.Container{shell("setup", tc.init)}
			}
			uid := create(t, dc, ns, tc.name, spec)
			pod := waitPod(t, srv, dc, ns, tc.name, time.Minute, string(tc.phase), phase(tc.phase))
			cs := pod.Status.ContainerStatuses[0]
			if tc.init != "" {
				cs = pod.Status.InitContainerStatuses[0]
				if w := pod.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
					t.Errorf("container after a failed init: %+v, want waiting PodInitializing", pod.Status.ContainerStatuses[0].State)
				}
				if n := len(containers(t, srv, uid)); n != 1 {
					t.Errorf("%d containers in podman, want only the init container", n)
				}
			} else if pod.Status.PodIP == "" || net.ParseIP(pod.Status.PodIP) == nil {
				t.Errorf("terminated pod's IP %q, want the one it had", pod.Status.PodIP)
			}
			term := cs.State.Terminated
			if term == nil || term.ExitCode != tc.code || term.Reason != tc.reason || !strings.HasPrefix(cs.ContainerID, "podman://") {
				t.Errorf("%s: %+v (id %s), want terminated %d %s", cs.Name, cs.State, cs.ContainerID, tc.code, tc.reason)
			}
			if got := condition(pod, corev1.PodReady); got != corev1.ConditionFalse {
				t.Errorf("Ready = %q on an ended pod", got)
			}
		})
	}
}

// TestClaimVolumeOutlivesPod: a pod's persistentVolumeClaim is a podman
// volume of the namespace's claim, which a later pod of the claim sees
// with what the first wrote; fsGroup makes it the user's to write.
func TestClaimVolumeOutlivesPod(t *testing.T) {
	srv, dc, ns := pods(t)
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "home", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	u, _ := toUnstructured(pvc)
	if _, err := dc.Resource(pvcGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := func(script string) corev1.PodSpec {
		c := shell("main", script)
		c.VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/data"}}
		return corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(1001)), RunAsGroup: ptr(int64(1001)), FSGroup: ptr(int64(1001))},
			Containers:      []corev1.Container{c},
			Volumes:         []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "home"}}}},
		}
	}
	first := create(t, dc, ns, "first", spec("echo kept > /data/file"))
	waitPod(t, srv, dc, ns, "first", time.Minute, "Succeeded", phase(corev1.PodSucceeded))
	deletePod(t, dc, ns, "first")
	// An ended pod is deleted at once, its containers removed after.
	waitGone(t, srv, first)
	create(t, dc, ns, "second", spec("cat /data/file"))
	waitPod(t, srv, dc, ns, "second", time.Minute, "Succeeded", phase(corev1.PodSucceeded))
	if logs := srv.PodLogs(ns, "second"); !strings.Contains(logs, "kept") {
		t.Errorf("the second pod did not see the first's file:\n%s", logs)
	}
}

// TestDownwardAPIFollowsAnnotations: a downwardAPI volume's annotations
// and labels files are in the kubelet's format, and an annotation
// changed on the running pod reaches the container's file.
func TestDownwardAPIFollowsAnnotations(t *testing.T) {
	srv, dc, ns := pods(t)
	c := shell("main", `cat /etc/podinfo/labels; echo; echo ---
until grep -q '^token=' /etc/podinfo/annotations; do sleep 0.2; done
cat /etc/podinfo/annotations; echo; echo ---`)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo"}}
	items := []corev1.DownwardAPIVolumeFile{
		{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
	}
	create(t, dc, ns, "downward", corev1.PodSpec{
		Containers: []corev1.Container{c},
		Volumes:    []corev1.Volume{{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}}},
	}, func(m *metav1.ObjectMeta) {
		m.Labels = map[string]string{"b": "2", "a": "1"}
		m.Annotations = map[string]string{"note": `say "hi"`}
	})
	waitPod(t, srv, dc, ns, "downward", time.Minute, "Running", phase(corev1.PodRunning))
	patch := []byte(`{"metadata":{"annotations":{"token":"line one\nline two"}}}`)
	if _, err := dc.Resource(podGVR).Namespace(ns).Patch(t.Context(), "downward", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, srv, dc, ns, "downward", 15*time.Second, "Succeeded (the container saw the new annotation)", phase(corev1.PodSucceeded))
	logs := srv.PodLogs(ns, "downward")
	for _, want := range []string{"a=\"1\"\nb=\"2\"\n---", "note=\"say \\\"hi\\\"\"\ntoken=\"line one\\nline two\"\n---"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// TestPodIPAnswersOnceReady: the pod's IP is the container's on podman's
// bridge, reachable from the host; the pod is Ready only once its
// tcpSocket readiness probe passes; deleting it stops and removes its
// container, then the pod.
func TestPodIPAnswersOnceReady(t *testing.T) {
	srv, dc, ns := pods(t)
	// perl is what the image has that can listen; it starts late, so
	// the probe fails first.
	c := shell("server", `sleep 2; exec perl -MIO::Socket::INET -e '
$s = IO::Socket::INET->new(LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die "listen: $!";
while ($c = $s->accept) { print $c "hello from the pod\n"; close $c }'`)
	c.Ports = []corev1.ContainerPort{{Name: "greet", ContainerPort: 8080}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("greet")}},
		PeriodSeconds: 1,
	}
	uid := create(t, dc, ns, "server", corev1.PodSpec{Containers: []corev1.Container{c}})
	pod := waitPod(t, srv, dc, ns, "server", time.Minute, "Running", phase(corev1.PodRunning))
	if got := condition(pod, corev1.PodReady); got != corev1.ConditionFalse {
		t.Errorf("Ready = %q before anything listens, want False", got)
	}
	pod = waitPod(t, srv, dc, ns, "server", 30*time.Second, "Ready", func(p *corev1.Pod) bool { return condition(p, corev1.PodReady) == corev1.ConditionTrue })
	if !pod.Status.ContainerStatuses[0].Ready || condition(pod, corev1.ContainersReady) != corev1.ConditionTrue {
		t.Errorf("Ready pod with statuses %+v", pod.Status)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "8080"), 5*time.Second)
	if err != nil {
		t.Fatalf("dial the pod IP: %v", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if line != "hello from the pod\n" {
		t.Errorf("the pod said %q, %v", line, err)
	}

	deletePod(t, dc, ns, "server")
	// A running pod's containers go before the pod.
	if ids := containers(t, srv, uid); len(ids) != 0 {
		t.Errorf("the deleted pod's container is still in podman: %v", ids)
	}
	if _, err := os.Stat(filepath.Join(srv.kubelet.runner.dir, string(uid))); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's directory: %v, want gone", err)
	}
}

// TestContainersShareNetwork: a pod's containers share its network, as
// on a node: the second reaches the first on localhost, and both have the
// pod's hostname.
func TestContainersShareNetwork(t *testing.T) {
	srv, dc, ns := pods(t)
	server := shell("server", `hostname; exec perl -MIO::Socket::INET -e '
$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 8080, Listen => 1, ReuseAddr => 1) or die "listen: $!";
$c = $s->accept; print $c "hello neighbour\n"; close $c'`)
	client := shell("client", `hostname; until exec 3<>/dev/tcp/127.0.0.1/8080; do sleep 0.2; done 2>/dev/null; read -r line <&3; echo "got: $line"`)
	client.Command[0] = "/bin/bash"
	uid := create(t, dc, ns, "pair", corev1.PodSpec{Hostname: "twin", Containers: []corev1.Container{server, client}})
	waitPod(t, srv, dc, ns, "pair", time.Minute, "Succeeded", phase(corev1.PodSucceeded))
	logs := srv.PodLogs(ns, "pair")
	if !strings.Contains(logs, "got: hello neighbour") || strings.Count(logs, "twin\n") != 2 {
		t.Errorf("logs:\n%s", logs)
	}
	// The one whose network the other joined goes too.
	deletePod(t, dc, ns, "pair")
	waitGone(t, srv, uid)
}

// TestEnvValuesArrive: the container's environment arrives exactly as
// the pod spec has it, $(VAR) references expanded as a kubelet does, a
// value with a line break included, and no env file is left behind.
func TestEnvValuesArrive(t *testing.T) {
	srv, dc, ns := pods(t)
	vals := map[string]string{
		"PLAIN": "berth_sandboxkey_SECRET", "SPACES": "  lead and trail  ", "QUOTES": `say "hi" and 'bye'`,
		"LINES": "ssh-ed25519 AAAA one\nssh-ed25519 BBBB two\n", "HASH": "#not a comment = still value",
	}
	var env []corev1.EnvVar
	var script strings.Builder
	for _, name := range []string{"PLAIN", "SPACES", "QUOTES", "LINES", "HASH"} {
		env = append(env, corev1.EnvVar{Name: name, Value: vals[name]})
	}
	env = append(env, corev1.EnvVar{Name: "REF", Value: "$(PLAIN)/$(NOPE)/$$"})
	vals["REF"] = "berth_sandboxkey_SECRET/$(NOPE)/$"
	for name := range vals {
		fmt.Fprintf(&script, `printf '%s=%%s\n' "$(printenv %s | base64 -w0)"; `, name, name)
	}
	c := shell("main", script.String())
	c.Env = env
	uid := create(t, dc, ns, "env", corev1.PodSpec{Containers: []corev1.Container{c}})
	waitPod(t, srv, dc, ns, "env", time.Minute, "Succeeded", phase(corev1.PodSucceeded))
	got := map[string]string{}
	for line := range strings.Lines(srv.PodLogs(ns, "env")) {
		name, b64, ok := strings.Cut(strings.TrimSpace(line), "=")
		if _, want := vals[name]; !ok || !want {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		got[name] = string(b)
	}
	for name, want := range vals {
		// printenv ends the value with a newline of its own.
		if got[name] != want+"\n" {
			t.Errorf("%s = %q in the container, want %q", name, got[name], want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(srv.kubelet.runner.dir, string(uid), ".env-*"))
	if len(left) != 0 {
		t.Errorf("env files left: %v", left)
	}
}

// TestPodWaits: what keeps a pod from starting shows in its status as a
// kubelet says it: an image the root lacks (nothing is pulled), a
// RuntimeClass with no runtime.
func TestPodWaits(t *testing.T) {
	srv, dc, ns := pods(t)
	create(t, dc, ns, "no-image", corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "localhost/kubetest-no-such-image:1"}}})
	pod := waitPod(t, srv, dc, ns, "no-image", 30*time.Second, "waiting ErrImageNeverPull", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImageNeverPull"
	})
	if msg := pod.Status.ContainerStatuses[0].State.Waiting.Message; pod.Status.Phase != corev1.PodPending ||
		!strings.Contains(msg, `"localhost/kubetest-no-such-image:1" is not present with pull policy of Never`) {
		t.Errorf("phase %s, message %q", pod.Status.Phase, msg)
	}

	// Admission refuses a class the API does not have: make it, with a
	// handler the stand-in was not given.
	class := fmt.Sprintf("kubetest-missing-%d", time.Now().UnixNano()%100000)
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": class}, "handler": "missing",
	}}
	rcGVR := schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
	if _, err := dc.Resource(rcGVR).Create(t.Context(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Resource(rcGVR).Delete(context.Background(), class, metav1.DeleteOptions{}) })
	create(t, dc, ns, "no-runtime", corev1.PodSpec{RuntimeClassName: &class, Containers: []corev1.Container{shell("main", "true")}})
	pod = waitPod(t, srv, dc, ns, "no-runtime", 30*time.Second, "not ready to start containers", func(p *corev1.Pod) bool {
		return condition(p, corev1.PodReadyToStartContainers) == corev1.ConditionFalse
	})
	if w := pod.Status.ContainerStatuses[0].State.Waiting; pod.Status.Phase != corev1.PodPending || w == nil ||
		!strings.Contains(w.Message, fmt.Sprintf("no runtime for %q is configured", class)) {
		t.Errorf("phase %s, container %+v", pod.Status.Phase, pod.Status.ContainerStatuses[0].State)
	}
	events, err := dc.Resource(eventGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		r, _, _ := unstructured.NestedString(e.Object, "reason")
		reasons = append(reasons, r)
	}
	for _, want := range []string{"ErrImageNeverPull", "FailedCreatePodSandBox"} {
		if !strings.Contains(strings.Join(reasons, " "), want) {
			t.Errorf("events %v lack %s", reasons, want)
		}
	}
}

// TestRuntimeClass: a pod's runtimeClassName picks the OCI runtime podman
// runs it on: gVisor's runsc for the class mapped to it.
func TestRuntimeClass(t *testing.T) {
	srv, dc, ns := pods(t)
	if os.Getenv("BERTH_TEST_RUNSC") == "" {
		t.Skip("set BERTH_TEST_RUNSC to a runsc binary (scripts/build-runsc) to run a pod on gVisor")
	}
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "gvisor"}, "handler": "runsc",
	}}
	rcGVR := schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
	if _, err := dc.Resource(rcGVR).Create(t.Context(), rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	class := "gvisor"
	create(t, dc, ns, "gvisor", corev1.PodSpec{RuntimeClassName: &class, Containers: []corev1.Container{shell("main", "uname -r")}})
	waitPod(t, srv, dc, ns, "gvisor", time.Minute, "Succeeded", phase(corev1.PodSucceeded))
	if logs := srv.PodLogs(ns, "gvisor"); !strings.Contains(logs, "gvisor") {
		t.Errorf("uname -r on runtime class gvisor said:\n%s", logs)
	}
}

// TestStopRemovesEverything: Stop removes every container and volume the
// stand-in made in the podman root, with the API server already gone.
func TestStopRemovesEverything(t *testing.T) {
	bin, root := gates(t)
	srv, err := startPodServer(bin, root)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Stop()
		}
	}()
	dc, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "stop"
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := dc.Resource(nsGVR).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "data", "namespace": ns},
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
	}}
	if _, err := dc.Resource(pvcGVR).Namespace(ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := shell("main", "sleep 600")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	// The second container is in the first's network: podman removes the
	// first only after it.
	create(t, dc, ns, "running", corev1.PodSpec{
		Containers: []corev1.Container{c, shell("side", "sleep 600")},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	})
	waitPod(t, srv, dc, ns, "running", time.Minute, "Running", phase(corev1.PodRunning))
	runner := srv.kubelet.runner
	mark := labelServer + "=" + runner.server
	if ids, _ := runner.pm.ids(t.Context(), false, mark); len(ids) != 2 {
		t.Fatalf("containers of the server: %v, want 2", ids)
	}
	// The API server and etcd go first: the cleanup needs only podman.
	for i := len(srv.procs) - 1; i >= 0; i-- {
		_ = srv.procs[i].cmd.Process.Kill()
		<-srv.procs[i].exited
	}
	srv.Stop()
	stopped = true
	ctx := context.Background()
	if ids, err := runner.pm.ids(ctx, false, mark); err != nil || len(ids) != 0 {
		t.Errorf("containers after Stop: %v, %v", ids, err)
	}
	if vols, err := runner.pm.ids(ctx, true, mark); err != nil || len(vols) != 0 {
		t.Errorf("volumes after Stop: %v, %v", vols, err)
	}
}
