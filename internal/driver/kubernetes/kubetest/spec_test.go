package kubetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

// hardenedPod is a pod shaped like the driver's: the hardening of SPEC S5
// on the pod and its one container.
func hardenedPod() *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr(int64(1001)), RunAsGroup: ptr(int64(1001)), FSGroup: ptr(int64(1001)), RunAsNonRoot: ptr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "sandbox", Image: "localhost/img:1", WorkingDir: "/work",
				Command: []string{"/bin/run", "$(GREETING) world"}, Args: []string{"--key=$(API_KEY)", "$$(API_KEY)"},
				Env: []corev1.EnvVar{
					{Name: "API_KEY", Value: "berth_sandboxkey_SECRET"},
					{Name: "AUTHORIZED_KEYS", Value: "ssh-ed25519 AAAA one\nssh-ed25519 BBBB two"},
					{Name: "GREETING", Value: "hello"},
					{Name: "REF", Value: "key is $(API_KEY), $(UNDEFINED) stays, $$ is one"},
				},
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res},
				SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem: ptr(true), AllowPrivilegeEscalation: ptr(false), Privileged: ptr(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// TestCreateArgs: the podman argv of a hardened container carries each
// setting the way a kubelet applies it, and no value of the container's
// environment: values go to the env file, a value with a line break by
// name through podman's own environment.
func TestCreateArgs(t *testing.T) {
	pod := hardenedPod()
	cs := createSpec{
		name: "kubetest-ns_p_sandbox_uid-1", labels: map[string]string{"kubetest-uid": "uid-1", "kubetest-pod": "p"},
		runtime: "runc", hostname: "dev", envFile: "/scratch/.env-1", imageUser: "1001:1001",
		mounts: []hostMount{{src: "/scratch/home", dst: "/home/berth"}, {src: "/scratch/info", dst: "/etc/info", ro: true}},
	}
	args, file, byName, err := createArgs(pod, &pod.Spec.Containers[0], cs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create", "--pull=never", "--name", "kubetest-ns_p_sandbox_uid-1",
		"--label", "kubetest-pod=p", "--label", "kubetest-uid=uid-1",
		"--runtime", "runc", "--hostname", "dev",
		"--user", "1001:1001", "--group-add", "1001",
		"--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--cpus", "1.5", "--memory", "2147483648b", "--cpu-shares", "1536",
		"--workdir", "/work",
		"--volume", "/scratch/home:/home/berth", "--volume", "/scratch/info:/etc/info:ro",
		"--env", "AUTHORIZED_KEYS", "--env-file", "/scratch/.env-1",
		"--entrypoint", `["/bin/run","hello world"]`, "localhost/img:1",
		"--key=berth_sandboxkey_SECRET", "$(API_KEY)",
	}
	if diff := cmp.Diff(want, args); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	// The command and args are the pod's own, $(VAR)s expanded as a
	// kubelet does: a value there is the pod's doing. Everything before
	// them holds none.
	argv := strings.Join(args[:slices.Index(args, "--entrypoint")], "\x00")
	for _, e := range pod.Spec.Containers[0].Env {
		for line := range strings.Lines(e.Value) {
			if strings.Contains(argv, strings.TrimSpace(line)) {
				t.Errorf("argv holds the value of %s", e.Name)
			}
		}
	}
	wantFile := "API_KEY=berth_sandboxkey_SECRET\nGREETING=hello\nREF=key is berth_sandboxkey_SECRET, $(UNDEFINED) stays, $ is one\n"
	if string(file) != wantFile {
		t.Errorf("env file\n%q, want\n%q", file, wantFile)
	}
	if want := []string{"AUTHORIZED_KEYS=ssh-ed25519 AAAA one\nssh-ed25519 BBBB two"}; !slices.Equal(byName, want) {
		t.Errorf("by name %q, want %q", byName, want)
	}
}

// TestCreateArgsDefaults: a container with no security context runs as
// a kubelet without SeccompDefault runs it, unconfined; one joining the
// first container's network says so.
func TestCreateArgsDefaults(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img", Args: []string{"a"}}}}}
	args, file, byName, err := createArgs(pod, &pod.Spec.Containers[0], createSpec{name: "n", runtime: "/opt/runsc", network: "container:abc"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create", "--pull=never", "--name", "n", "--runtime", "/opt/runsc", "--network", "container:abc",
		"--security-opt", "seccomp=unconfined", "img", "a"}
	if diff := cmp.Diff(want, args); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	if len(file) != 0 || byName != nil {
		t.Errorf("env file %q, by name %q; want none", file, byName)
	}
}

// TestCreateArgsRefused: what the stand-in cannot do is refused by name,
// never silently dropped.
func TestCreateArgsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*corev1.Pod)
		user string
		want string
	}{
		"valueFrom": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "1", "env X: valueFrom is not supported"},
		"envFrom": {func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "X"}}
		}, "1", "envFrom is not supported"},
		"root image under runAsNonRoot": {func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}
		}, "", "image will run as root"},
		"named image user under runAsNonRoot": {func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}
		}, "berth", "non-numeric user (berth)"},
		"localhost seccomp": {func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}
		}, "1", "seccompProfile Localhost"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			tc.edit(pod)
			_, _, _, err := createArgs(pod, &pod.Spec.Containers[0], createSpec{name: "n", runtime: "runc", imageUser: tc.user})
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// TestFormatMap: the downward-API rendering of a map is the kubelet's:
// sorted key="value" lines, values quoted as Go's %q, no final newline.
func TestFormatMap(t *testing.T) {
	got := formatMap(map[string]string{"b": "two", "a": "1", "c": "say \"hi\"\nbye\t\\ ü"})
	want := "a=\"1\"\nb=\"two\"\nc=\"say \\\"hi\\\"\\nbye\\t\\\\ ü\""
	if got != want {
		t.Errorf("formatMap\n%s\nwant\n%s", got, want)
	}
	if formatMap(nil) != "" {
		t.Errorf("formatMap(nil) = %q", formatMap(nil))
	}
}
