package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
	"berth.dev/berth/internal/modelserver"
)

var (
	k8sNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	k8sSandboxes  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
)

// TestAgentRunOnKubernetes runs a real Claude Code task on the kubernetes
// driver: `berth serve` against a real kube-apiserver with the
// agent-sandbox CRDs, and the test in the two parts no cluster here can
// play, said plainly: the agent-sandbox controller (it sets Ready) and the
// kubelet (it runs the pod template the driver wrote, as written, under
// podman: the runner's image with berth-init as its entrypoint, the env
// and arguments of the template, a read-only root, /work, /tmp and HOME
// empty). The pod gets nothing from the host: it clones through the
// gateway, asks for its task, streams its output and reports its exit with
// its work as a git bundle, all with its sandbox's key, which pushes
// nothing (issue 14, item 4): the agent pushes its branch itself mid-run,
// git says remote rejected, and the branch is only ever the gateway's
// landing of a clean run's bundle; a run that fails after such a push
// leaves no branch.
func TestAgentRunOnKubernetes(t *testing.T) {
	bin := os.Getenv(kubetest.EnvBinaries)
	if bin == "" {
		t.Skipf("set %s to the directory scripts/build-kube prints to run the kubernetes end-to-end test", kubetest.EnvBinaries)
	}
	root := podmanRoot(t)
	image := agentImage("claude-code")
	if !imageBuilt(root, image) {
		t.Skipf("%s is not built (make images)", image)
	}
	crds, err := kubetest.CRDDir(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := kubetest.Start(ctx, bin, crds)
	cancel()
	if err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	t.Cleanup(srv.Stop)
	dc, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	k := &kubeWorld{srv: srv, dc: dc, image: withThisBerthInit(t, root, image)}

	t.Run("clean run", func(t *testing.T) {
		g, ns := k.gateway(t, "berth-e2e", pushingScript(t, modelserver.Turn{Text: modelserver.DoneText}))
		bare := g.seedRepo("acme/app")
		sb, obj, pod, end := k.run(t, g, ns, "fix-k8s", "Write f.txt and commit it.")
		if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
			log, _ := g.berthErr("sandbox", "logs", sb.Name)
			t.Fatalf("sandbox %s (%s), run %+v; run log:\n%s\npod:\n%s", end.State, end.Reason, end.Run, log, g.podmanMay("logs", pod))
		}
		run := end.Run
		g.runLogHas(t, sb.Name, 10*time.Second, "[remote rejected]", agentPushRefused)
		if run.Branch != "berth/fix-k8s" || run.Commit == "" {
			t.Fatalf("run pushed %q at %q", run.Branch, run.Commit)
		}
		if got := gitIn(t, bare, "rev-parse", "refs/heads/berth/fix-k8s"); got != run.Commit {
			t.Errorf("berth/fix-k8s is at %q, the run says %s", got, run.Commit)
		}
		if got := gitIn(t, bare, "show", run.Commit+":f.txt"); got != "hi" {
			t.Errorf("f.txt in the landed commit holds %q", got)
		}
		if files := gitIn(t, bare, "ls-tree", "-r", "--name-only", run.Commit); strings.Contains(files, ".berth-prompt.txt") {
			t.Errorf("the prompt file was committed: %s", files)
		}
		// berth-init writes its last line once the gateway has answered its
		// exit report, which may be after the run's end is visible here.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			pl := g.podmanMay("logs", pod)
			if strings.Contains(pl, "handing the gateway berth/fix-k8s") && strings.Contains(pl, "the gateway concluded the run succeeded") {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the pod's log does not say it handed its work over and the gateway landed it:\n%s", pl)
				break
			}
		}
		if want := (api.Tokens{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}); run.Usage != want {
			t.Errorf("the agent reported %+v through its pod's stream, want the model server's %+v", run.Usage, want)
		}
		if m := run.Metered; m == nil || m.Requests < 2 {
			t.Errorf("metered %+v, want the run's calls", m)
		} else {
			checkDifference(t, "claude-code", int64(m.Requests), run.Difference)
		}
		if log, _ := g.berthErr("sandbox", "logs", sb.Name); !strings.Contains(string(log), `"type":"result"`) {
			t.Errorf("the run log holds no result line:\n%s", log)
		}
		// Terminated: the driver deleted its Sandbox.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			_, err := dc.Resource(k8sSandboxes).Namespace(ns).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Sandbox of a terminated run is still there (%v)", err)
			}
		}
	})

	t.Run("failed run", func(t *testing.T) {
		g, ns := k.gateway(t, "berth-e2e-failed", pushingScript(t,
			modelserver.Turn{Error: &modelserver.Failure{Status: 400, Message: "mock: scripted failure after the push"}}))
		bare := g.seedRepo("acme/app")
		sb, _, _, end := k.run(t, g, ns, "pushy-k8s", "Push your branch yourself, then stop.")
		log := g.runLogHas(t, sb.Name, 10*time.Second, "[remote rejected]", agentPushRefused)
		if end.State != "failed" || end.Run == nil || end.Run.State != "failed" || end.Run.ExitCode == nil || *end.Run.ExitCode == 0 {
			t.Errorf("sandbox %s (%s), run %+v; want failed with the agent's exit code\nlog:\n%s", end.State, end.Reason, end.Run, log)
		}
		if at := gitIn(t, bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/pushy-k8s"); at != "" {
			t.Errorf("a failed run left berth/pushy-k8s at %s", at)
		}
	})
}

// withThisBerthInit is image with the berth-init of this tree as its
// entrypoint, under a tag of the test's own (removed at its end): a pod
// runs berth-init's in-machine run, and it must be the one under test, not
// the one the shared image was built with.
func withThisBerthInit(t *testing.T, root, image string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", "berth-init"), "berth.dev/berth/cmd/berth-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build berth-init: %v\n%s", err, out)
	}
	if err := os.Symlink("berth-init", filepath.Join(dir, "bin", "git-credential-berth")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "Containerfile")
	if err := os.WriteFile(file, []byte("FROM "+image+"\nCOPY bin/ /usr/local/bin/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "localhost/berth-e2e-agent:" + hex.EncodeToString(b)
	if out, err := podmanOn(root, "build", "--quiet", "--pull=never", "-t", tag, "-f", file, dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() {
		if out, err := podmanOn(root, "rmi", tag).CombinedOutput(); err != nil {
			t.Logf("podman rmi %s: %v: %s", tag, err, out)
		}
	})
	return tag
}

// kubeWorld is a real kube-apiserver for gateways of the kubernetes
// driver, whose pods the test runs.
type kubeWorld struct {
	srv   *kubetest.Server
	dc    dynamic.Interface
	image string
}

// gateway starts a gateway of the kubernetes driver on namespace ns (made
// here), serving inference, with extra settings, and returns it and ns.
func (k *kubeWorld) gateway(t *testing.T, ns, inference string, extra ...string) (*gateway, string) {
	t.Helper()
	if _, err := k.dc.Resource(k8sNamespaces).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig, inferenceFile := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "inference.yaml")
	for path, content := range map[string]string{kubeconfig: k.srv.Kubeconfig(), inferenceFile: inference} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return startGateway(t, append([]string{
		"BERTH_SANDBOX_DRIVER=kubernetes",
		"KUBECONFIG=" + kubeconfig,
		"BERTH_SANDBOX_NAMESPACE=" + ns,
		"BERTH_SANDBOX_RUNTIME_STANDARD=runc",
		"BERTH_INFERENCE_FILE=" + inferenceFile,
		"BERTH_RUNNER_IMAGES=claude-code=" + k.image,
	}, extra...)...), ns
}

// runPod plays the controller (the Sandbox is Ready once its pod would
// be) and the kubelet (the pod template, run as written, under podman)
// for sandbox id, and returns its Sandbox object and the pod's name.
func (k *kubeWorld) runPod(t *testing.T, g *gateway, ns, id string) (*unstructured.Unstructured, string) {
	t.Helper()
	obj := waitSandboxObject(t, k.dc, ns, id)
	obj.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "the test plays the controller",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}
	if _, err := k.dc.Resource(k8sSandboxes).Namespace(ns).UpdateStatus(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "podTemplate", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("pod template has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	if c["image"] != k.image || c["workingDir"] != "/work" || c["command"] != nil {
		t.Errorf("container: image %v, workingDir %v, command %v; want the runner's image in /work with its own entrypoint", c["image"], c["workingDir"], c["command"])
	}
	envFile := filepath.Join(t.TempDir(), "pod.env")
	var (
		env               strings.Builder
		byName, podmanEnv []string
		home              = "/home/berth"
	)
	list, _ := c["env"].([]any)
	for _, e := range list {
		kv := e.(map[string]any)
		name, value := fmt.Sprint(kv["name"]), fmt.Sprint(kv["value"])
		if strings.Contains(value, "commit it") || strings.Contains(value, "yourself") {
			t.Errorf("the task is in the pod template (%s): the pod must ask the gateway for it", name)
		}
		if name == "HOME" {
			home = value
		}
		if strings.ContainsAny(value, "\n") {
			// An env file holds one line a variable: such a value (Pi's
			// files) reaches podman by name, from its own environment.
			byName = append(byName, "--env", name)
			podmanEnv = append(podmanEnv, name+"="+value)
			continue
		}
		fmt.Fprintf(&env, "%s=%s\n", name, value)
	}
	if err := os.WriteFile(envFile, []byte(env.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	raw, _ := c["args"].([]any)
	for _, a := range raw {
		args = append(args, fmt.Sprint(a))
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	pod := "berth-e2e-pod-" + hex.EncodeToString(b)
	t.Cleanup(func() { g.podmanMay("rm", "--force", pod) })
	kubelet := podmanOn(g.root, append(append([]string{"run", "--detach", "--name", pod,
		"--user", "1001:1001", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--tmpfs", "/work:rw,exec,mode=0755,U", "--tmpfs", "/tmp:rw,exec,mode=1777", "--tmpfs", home + ":rw,exec,mode=0700,U",
		"--workdir", "/work", "--env-file", envFile}, byName...), append([]string{k.image}, args...)...)...)
	kubelet.Env = append(kubelet.Env, podmanEnv...)
	if out, err := kubelet.CombinedOutput(); err != nil {
		t.Fatalf("podman run (the test's kubelet): %v: %s", err, out)
	}
	return obj, pod
}

// run creates an agent sandbox of claude-code on acme/app, runs its pod,
// and waits for it to end, its run with it. It returns the sandbox as
// created, its Sandbox object, its pod and the sandbox as it ended.
func (k *kubeWorld) run(t *testing.T, g *gateway, ns, name, task string) (api.Sandbox, *unstructured.Unstructured, string, api.Sandbox) {
	t.Helper()
	sb, err := g.operator.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app", Task: task, Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	obj, pod := k.runPod(t, g, ns, sb.ID)
	end := g.waitSandbox(g.operator, sb.ID, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s; the pod printed:\n%s", sb.Name, sb.State, g.podmanMay("logs", pod))
		}
		return (sb.State == "terminated" || sb.State == "failed") && sb.Run != nil && sb.Run.State != "running"
	})
	return sb, obj, pod, end
}

// waitSandboxObject waits for the Sandbox the driver makes for id.
func waitSandboxObject(t *testing.T, dc dynamic.Interface, ns, id string) *unstructured.Unstructured {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, err := dc.Resource(k8sSandboxes).Namespace(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "berth.dev/sandbox=" + id})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			return &list.Items[0]
		}
	}
	t.Fatalf("no Sandbox for %s in namespace %s", id, ns)
	return nil
}
