package e2e_test

import (
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
// driver: `berth serve` against the real cluster of realCluster, where
// the real agent-sandbox controller makes the pod of the Sandbox the
// driver wrote and kubetest's kubelet runs it as written under podman:
// the runner's image with berth-init as its entrypoint, the env and
// arguments of the template, a read-only root, /work, /tmp and HOME
// emptyDirs. The pod gets nothing from the host: it clones through the
// gateway, asks for its task, streams its output and reports its exit with
// its work as a git bundle, all with its sandbox's key, which pushes
// nothing (issue 14, item 4): the agent pushes its branch itself mid-run,
// git says remote rejected, and the branch is only ever the gateway's
// landing of a clean run's bundle; a run that fails after such a push
// leaves no branch.
func TestAgentRunOnKubernetes(t *testing.T) {
	k := realCluster(t)
	image := agentImage("claude-code")
	if !imageBuilt(k.root, image) {
		t.Skipf("%s is not built (make images)", image)
	}
	k.image = withThisBerthInit(t, k.root, image)
	dc := k.dc

	t.Run("clean run", func(t *testing.T) {
		g, ns := k.gateway(t, "berth-e2e", pushingScript(t, modelserver.Turn{Text: modelserver.DoneText}))
		bare := g.seedRepo("acme/app")
		sb, obj, pod, end := k.run(t, g, ns, "fix-k8s", "Write f.txt and commit it.")
		if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
			log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
			t.Fatalf("sandbox %s (%s), run %+v; run log:\n%s\npod:\n%s", end.State, end.Reason, end.Run, log, k.srv.PodLogs(ns, pod))
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
			pl := k.srv.PodLogs(ns, pod)
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
		if log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name); !strings.Contains(string(log), `"type":"result"`) {
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
	tag, remove, err := buildWithThisBerthInit(root, image)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(); err != nil {
			t.Log(err)
		}
	})
	return tag
}

// buildWithThisBerthInit builds image with this tree's berth-init under a
// new tag, and returns it with what removes it.
func buildWithThisBerthInit(root, image string) (string, func() error, error) {
	dir, err := os.MkdirTemp("", "berth-e2e-init-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", nil, err
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", "berth-init"), "berth.dev/berth/cmd/berth-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("build berth-init: %v\n%s", err, out)
	}
	if err := os.Symlink("berth-init", filepath.Join(dir, "bin", "git-credential-berth")); err != nil {
		return "", nil, err
	}
	file := filepath.Join(dir, "Containerfile")
	if err := os.WriteFile(file, []byte("FROM "+image+"\nCOPY bin/ /usr/local/bin/\n"), 0o644); err != nil {
		return "", nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "localhost/berth-e2e-init:" + hex.EncodeToString(b)
	if out, err := podmanOn(root, "build", "--quiet", "--pull=never", "-t", tag, "-f", file, dir).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("podman build %s: %v\n%s", tag, err, out)
	}
	return tag, func() error {
		if out, err := podmanOn(root, "rmi", tag).CombinedOutput(); err != nil {
			return fmt.Errorf("podman rmi %s: %v: %s", tag, err, out)
		}
		return nil
	}, nil
}

// kubeWorld is the real cluster (realCluster) for gateways of the
// kubernetes driver, and the agent image its agent runs use.
type kubeWorld struct {
	srv *kubetest.Server
	dc  dynamic.Interface
	// root is the podman root the pods run in; sandboxImage is
	// berth's sandbox image there with this tree's berth-init.
	root, sandboxImage string
	// image is the agent image of the gateways gateway starts.
	image string
}

// gateway starts a gateway of the kubernetes driver on namespace ns (made
// here) that runs claude-code in k.image, serving inference, with extra
// settings, and returns it and ns.
func (k *kubeWorld) gateway(t *testing.T, ns, inference string, extra ...string) (*gateway, string) {
	t.Helper()
	inferenceFile := filepath.Join(t.TempDir(), "inference.yaml")
	if err := os.WriteFile(inferenceFile, []byte(inference), 0o600); err != nil {
		t.Fatal(err)
	}
	return k.kubeGateway(t, ns, append([]string{"BERTH_INFERENCE_FILE=" + inferenceFile, "BERTH_RUNNER_IMAGES=claude-code=" + k.image}, extra...)...), ns
}

// checkRunPod checks the pod template the driver wrote for sandbox id's
// run, and returns its Sandbox and the pod's name (the controller names
// the pod after its Sandbox).
func (k *kubeWorld) checkRunPod(t *testing.T, ns, id string) (*unstructured.Unstructured, string) {
	t.Helper()
	obj := waitSandboxObject(t, k.dc, ns, id)
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "podTemplate", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("pod template has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	if c["image"] != k.image || c["workingDir"] != "/work" || c["command"] != nil {
		t.Errorf("container: image %v, workingDir %v, command %v; want the runner's image in /work with its own entrypoint", c["image"], c["workingDir"], c["command"])
	}
	list, _ := c["env"].([]any)
	for _, e := range list {
		kv := e.(map[string]any)
		if v := fmt.Sprint(kv["value"]); strings.Contains(v, "commit it") || strings.Contains(v, "yourself") {
			t.Errorf("the task is in the pod template (%s): the pod must ask the gateway for it", kv["name"])
		}
	}
	return obj, obj.GetName()
}

// run creates an agent sandbox of claude-code on acme/app and waits for
// it to end, its run with it. It returns the sandbox as created, its
// Sandbox object, its pod and the sandbox as it ended.
func (k *kubeWorld) run(t *testing.T, g *gateway, ns, name, task string) (api.Sandbox, *unstructured.Unstructured, string, api.Sandbox) {
	t.Helper()
	sb, err := g.operator.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app", Task: task, Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	obj, pod := k.checkRunPod(t, ns, string(sb.ID))
	end := g.waitSandbox(g.operator, sb.ID, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s; the pod printed:\n%s", sb.Name, sb.State, k.srv.PodLogs(ns, pod))
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
