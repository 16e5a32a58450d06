// Command claim measures, on the kubernetes driver with the real
// agent-sandbox controller, how long an engineer sandbox takes from create
// to ssh-ready when it is claimed from its class's warm pool, against a
// cold create of the same class (no pool) on the same cluster in the same
// run, and prints medians and their ratio with the machine's load.
//
// It starts everything itself: a real kube-apiserver and etcd
// (-kube, scripts/build-kube), kube-controller-manager's garbage
// collector, the real controller (-controller, scripts/build-controller)
// with kubetest's kubelet stand-in running the pods under podman (-podman-root, the images `make images` built), and a
// scratch `berth serve` (-berth) on the kubernetes driver with warm pools
// on. bench/claim.sh builds and passes all of that.
//
// What is timed, for both kinds: POST create → the API reports running,
// which the gateway says once sshd in the pod has greeted it at the pod's
// address. A claim's sandbox starts in a pod that runs already (berth-init
// trades its token for the environment, then starts sshd); a cold one
// waits for the controller to make the pod and for the pod to start. A
// claim is made only when the pool has a ready member again (that wait is
// not timed).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/scratch"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
)

const namespace = "berth-bench"

var (
	namespaces     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	pods           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	runtimeClasses = schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
)

func main() {
	n := flag.Int("n", 10, "runs of each kind")
	berthBin := flag.String("berth", "", "the berth binary")
	kube := flag.String("kube", os.Getenv(kubetest.EnvBinaries), "the directory of kube-apiserver and etcd (scripts/build-kube)")
	controller := flag.String("controller", os.Getenv(kubetest.EnvController), "the agent-sandbox controller (scripts/build-controller)")
	root := flag.String("podman-root", "", "the podman root holding the images")
	image := flag.String("image", "localhost/berth-sandbox:latest", "the class's image")
	key := flag.String("ssh-key", "", "an ssh public key file for the sandboxes")
	flag.Parse()
	if err := run(*n, *berthBin, *kube, *controller, *root, *image, *key); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int, berthBin, kube, controller, root, image, keyFile string) error {
	for flagName, v := range map[string]string{"-berth": berthBin, "-kube": kube, "-controller": controller, "-podman-root": root, "-ssh-key": keyFile} {
		if v == "" {
			return fmt.Errorf("%s is required", flagName)
		}
	}
	pub, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("-ssh-key: %w", err)
	}
	work, err := os.MkdirTemp("", "berth-bench-claim-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	ctx := context.Background()
	crds, err := kubetest.CRDDir(os.Getenv)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	srv, err := kubetest.Start(sctx, kube, crds)
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	defer srv.Stop()
	if err := srv.StartController(sctx, controller, kubetest.RunPods(kubetest.Podman{Root: root, Runtimes: map[string]string{"runc": "runc"}})); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	// Terminated sandboxes' pods go, as on a cluster, and take no CPU
	// from the runs after them.
	if err := srv.StartGarbageCollector(sctx); err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		return err
	}
	for gvr, obj := range map[schema.GroupVersionResource]map[string]any{
		namespaces:     {"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}},
		runtimeClasses: {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "runc"}, "handler": "runc"},
	} {
		if _, err := dc.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(srv.Kubeconfig()), 0o600); err != nil {
		return err
	}
	classes := filepath.Join(work, "classes.yaml")
	if err := os.WriteFile(classes, []byte(fmt.Sprintf(`sandboxes:
  - {name: warm, image: %[1]s, isolation: standard, cpu: "1", memory: 1Gi, purposes: [engineer], warm: 2}
  - {name: cold, image: %[1]s, isolation: standard, cpu: "1", memory: 1Gi, purposes: [engineer]}
`, image)), 0o600); err != nil {
		return err
	}
	// Pods reach the gateway on the host's bridge address.
	port, err := scratch.FreePort()
	if err != nil {
		return err
	}
	g, err := scratch.StartAt(berthBin, filepath.Join(work, "gateway"), "", "", port,
		"BERTH_SANDBOX_DRIVER=kubernetes", "KUBECONFIG="+kubeconfig, "BERTH_SANDBOX_NAMESPACE="+namespace,
		"BERTH_SANDBOX_RUNTIME_STANDARD=runc", "BERTH_SANDBOX_WARM=on", "BERTH_SANDBOXES_FILE="+classes,
		"BERTH_SWEEP_INTERVAL=1s", "BERTH_LOG_LEVEL=warn", "BERTH_SANDBOX_PUBLIC_URL=http://host.containers.internal:"+port)
	if err != nil {
		return err
	}
	defer g.Stop()
	secret, err := g.Bootstrap()
	if err != nil {
		return err
	}
	c := client.New(g.URL, secret, nil)
	ssh := []string{strings.TrimSpace(string(pub))}

	var warm, cold []time.Duration
	var loads report.Loads
	for i := range n {
		loads.Sample()
		if err := poolReady(ctx, dc, 2*time.Minute); err != nil {
			return err
		}
		d, fromPool, err := create(ctx, c, api.CreateSandbox{Name: fmt.Sprintf("warm-%d", i), Class: "warm", SSHKeys: ssh})
		if err != nil {
			return fmt.Errorf("warm create %d: %w\n%s", i, err, g.Output())
		}
		if !fromPool {
			return fmt.Errorf("warm create %d was not claimed from the pool", i)
		}
		warm = append(warm, d)
		if d, _, err = create(ctx, c, api.CreateSandbox{Name: fmt.Sprintf("cold-%d", i), Class: "cold", SSHKeys: ssh}); err != nil {
			return fmt.Errorf("cold create %d: %w\n%s", i, err, g.Output())
		}
		cold = append(cold, d)
		fmt.Fprintf(os.Stderr, "run %d/%d: warm claim %v, cold create %v (load %s)\n", i+1, n, warm[i], cold[i], scratch.LoadAvg())
	}
	w, cd := stats.Median(warm), stats.Median(cold)
	fmt.Printf("create→ssh-ready on kubernetes (real agent-sandbox controller, pods under podman), median of %d, load %s\n", n, scratch.LoadAvg())
	fmt.Printf("%-22s %10s\n", "warm-pool claim", w.Round(time.Millisecond))
	fmt.Printf("%-22s %10s\n", "cold create", cd.Round(time.Millisecond))
	fmt.Printf("%-22s %10.2f\n", "ratio (claim / cold)", float64(w)/float64(cd))
	loads.Sample()
	return report.Emit(report.Figure{Bench: "claim", Name: "engineer create → ssh-ready, claimed from a warm pool (kubernetes)",
		Value: w.Round(time.Millisecond).String(), Baseline: cd.Round(time.Millisecond).String() + " (cold create, same class)",
		Ratio: float64(w) / float64(cd), Goal: "≤ 0.25", N: n, Load: loads.String()})
}

// create makes a sandbox, waits until the API says running, and
// terminates it; it returns the create→running time and whether it came
// from the pool.
func create(ctx context.Context, c *client.Client, req api.CreateSandbox) (time.Duration, bool, error) {
	start := time.Now()
	sb, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return 0, false, err
	}
	defer c.Terminate(context.WithoutCancel(ctx), sb.ID)
	for sb.State == "starting" {
		time.Sleep(10 * time.Millisecond)
		if sb, err = c.Sandbox(ctx, sb.ID); err != nil {
			return 0, false, err
		}
	}
	d := time.Since(start)
	if sb.State != "running" {
		return 0, false, fmt.Errorf("sandbox %s is %s: %s", sb.Name, sb.State, sb.Reason)
	}
	return d, sb.FromPool, nil
}

// poolReady waits until the pool has a member whose pod is ready and
// unclaimed.
func poolReady(ctx context.Context, dc dynamic.Interface, within time.Duration) error {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, err := dc.Resource(pods).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: "berth.dev/pool=true"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.GetDeletionTimestamp() == nil && p.GetAnnotations()["berth.dev/bootstrap-token"] == "" && ready(&p) {
				return nil
			}
		}
	}
	return fmt.Errorf("the warm pool had no ready member within %s", within)
}

func ready(p *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}
