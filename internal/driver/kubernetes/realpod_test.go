package kubernetes_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
	"berth.dev/berth/internal/quantity"
)

// The tests in this file run the driver against the real agent-sandbox
// controller with the pods it makes really run: kubetest's kubelet
// stand-in runs them under podman (RunPods), from the images of the
// podman root BERTH_TEST_PODMAN names, on an API server of their own. No
// Dial override: the driver reaches the real sshd at the pod IP the
// controller reported, on podman's bridge.

// sandboxImage is berth's sandbox image as the podman root has it.
const sandboxImage = "localhost/berth-sandbox:latest"

// podsServer is the API server with the real controller and pods run
// under podman, started by the first test that asks; TestMain stops it.
var podsServer struct {
	once sync.Once
	srv  *kubetest.Server
	root string
	err  error
}

// podsClient reaches the API server whose pods run under podman,
// skipping the test unless BERTH_TEST_KUBE, BERTH_TEST_CONTROLLER and
// BERTH_TEST_PODMAN are all set.
func podsClient(t *testing.T) (*kubetest.Server, dynamic.Interface) {
	t.Helper()
	bin, ctl, root := os.Getenv(kubetest.EnvBinaries), os.Getenv(kubetest.EnvController), os.Getenv(kubetest.EnvPodman)
	if bin == "" || ctl == "" || root == "" {
		t.Skipf("runs the controller's pods under podman: set %s (scripts/build-kube), %s (scripts/build-controller) and %s (a podman root with %s)",
			kubetest.EnvBinaries, kubetest.EnvController, kubetest.EnvPodman, sandboxImage)
	}
	podsServer.once.Do(func() {
		podsServer.root = root
		podsServer.srv, podsServer.err = startReal(bin, ctl, kubetest.RunPods(kubetest.Podman{Root: root}))
	})
	if podsServer.err != nil {
		t.Fatal(podsServer.err)
	}
	return podsServer.srv, clientOf(t, podsServer.srv)
}

// sshKeyPair makes a key pair for the OpenSSH client; it returns the private
// key's path and the public key.
func sshKeyPair(t *testing.T) (string, string) {
	t.Helper()
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "realpod-test", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return key, strings.TrimSpace(string(pub))
}

// ssh runs command in the sandbox at addr (host:port) with the real
// OpenSSH client, as user berth with key.
func ssh(t *testing.T, key, addr, command string) (string, error) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", "-i", key, "-p", port, "-F", "none",
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
		"berth@"+host, command)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podContainers lists the stand-in's containers of a pod in the podman
// root, by the uid label it gives them.
func podContainers(t *testing.T, uid types.UID) []string {
	t.Helper()
	return strings.Fields(podman(t, "ps", "--all", "--quiet", "--filter", "label=kubetest-uid="+string(uid)))
}

// podman runs the podman CLI on the pods' root and returns its output.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(podsServer.root, "containers.conf"),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(podsServer.root, "storage.conf"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestRealPodEngineerLifecycle: the driver's engineer path end to end on
// the real controller with a pod that really runs. Start returns once
// berth's sandbox image, run as the pod template says, greets with its
// real sshd at the pod IP the controller reported; the real OpenSSH
// client logs in with the key the spec put in the sandbox's environment
// and writes in HOME; suspend deletes the pod and its container; resume
// runs a new pod on the same claim, and HOME still has the file.
func TestRealPodEngineerLifecycle(t *testing.T) {
	t.Parallel() // waits on pods and timeouts, on a server of its own
	srv, dc := podsClient(t)
	ctx := t.Context()
	ns := namespace(t, dc)
	key, pub := sshKeyPair(t)
	cfg := kubernetes.Config{Namespace: ns, Deployment: "berthtest0001", ReadyTimeout: 2 * time.Minute,
		PublicURL: "http://gateway.test:8080"}
	d := kubernetes.New(cfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil)))

	spec := engineerSpec()
	sb := &spec.Sandbox
	sb.Image, sb.Disk = sandboxImage, 1<<30
	sb.CPU, sb.Memory = quantity.Millicores(1000), quantity.Bytes(1<<30)
	sb.CreatedAt, sb.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	spec.Env = map[string]string{
		"BERTH_SANDBOX_ID": string(sb.ID), "BERTH_SANDBOX_PURPOSE": string(sb.Purpose), "BERTH_SANDBOX_NAME": sb.Name,
		"BERTH_AUTHORIZED_KEYS": pub, "BERTH_API_KEY": "berth_sandboxkey_SECRET",
	}
	name := "sbx-abcdefghij0123456789"
	logs := func() string { return srv.PodLogs(ns, name) }

	if err := d.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v\npod logs:\n%s", err, logs())
	}
	addr, err := d.Addr(ctx, sb.ID, 2222)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ssh(t, key, addr, `echo kept > "$HOME/marker" && echo "$HOME $BERTH_SANDBOX_ID" && hostname`)
	if err != nil {
		t.Fatalf("ssh %s: %v: %s\npod logs:\n%s", addr, err, out, logs())
	}
	if want := "/home/berth " + string(sb.ID) + "\ndev\n"; out != want {
		t.Errorf("the session said %q, want %q (HOME, the sandbox's environment, spec.hostname)", out, want)
	}
	first := livePod(t, dc, ns, name)
	if first == nil {
		t.Fatal("no pod after Start")
	}
	if ids := podContainers(t, first.GetUID()); len(ids) != 1 {
		t.Fatalf("the pod's containers in podman: %v, want one", ids)
	}

	if err := d.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the suspended sandbox's pod and container to go", func() bool {
		if livePod(t, dc, ns, name) != nil {
			return false
		}
		return len(podContainers(t, first.GetUID())) == 0
	})

	if err := d.Start(ctx, spec); err != nil {
		t.Fatalf("resume: %v\npod logs:\n%s", err, logs())
	}
	second := livePod(t, dc, ns, name)
	if second == nil || second.GetUID() == first.GetUID() {
		t.Fatalf("resumed without a new pod")
	}
	addr, err = d.Addr(ctx, sb.ID, 2222)
	if err != nil {
		t.Fatal(err)
	}
	out, err = ssh(t, key, addr, `cat "$HOME/marker"`)
	if err != nil || out != "kept\n" {
		t.Fatalf("after resume, ssh %s: %v: %q, want the file HOME had\npod logs:\n%s", addr, err, out, logs())
	}

	if err := d.Remove(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// No garbage collector runs: the pod of the removed Sandbox stays, as
	// the driver's other real-controller tests say; delete it so its
	// container goes before the server's Stop.
	_ = dc.Resource(podGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
}
