package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
)

// EnvController names the real agent-sandbox controller's binary, as
// scripts/build-controller prints it. Tests that need the controller skip
// without it.
const EnvController = "BERTH_TEST_CONTROLLER"

// controllerLog is the controller's log file in the server's directory.
const controllerLog = "agent-sandbox-controller.log"

// StartController starts the real agent-sandbox controller from binary
// against the server, with the extensions (templates, warm pools, claims)
// on, and a kubelet stand-in (kubelet.go) for the pods it makes: by
// default one that only reports them running, with RunPods one that runs
// them under podman. Stop ends both, before the API server.
//
// The controller runs from a scratch working directory with a kubeconfig
// of its own, no leader election, no webhooks (so v1alpha1 stays
// unusable: notes/kubernetes.md) and no metrics or probe listeners. It
// reads its allowlist of label domains for claims' pod metadata from the
// fixed path /etc/sandbox-config/allowed-label-domains once at start-up;
// tests never write /etc, so it runs with its default, sandbox.users.io
// only, as a fresh install does: a claim carrying other labels (berth's
// berth.dev/*) ends Ready=False, reason InvalidMetadata.
func (s *Server) StartController(ctx context.Context, binary string, opts ...ControllerOption) error {
	if err := s.startKubelet(opts...); err != nil {
		return err
	}

	if err := s.runClient(binary, controllerLog, "--extensions", "--leader-elect=false", "--enable-webhook=false", "--manage-webhook-certs=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0"); err != nil {
		return err
	}
	s.controller = s.procs[len(s.procs)-1]
	return s.waitController(ctx)
}

// startKubelet starts the kubelet stand-in; Stop ends it.
func (s *Server) startKubelet(opts ...ControllerOption) error {
	var cfg controllerConfig
	for _, o := range opts {
		o(&cfg)
	}
	dc, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	kctx, cancel := context.WithCancel(context.Background())
	k, done, err := startKubelet(kctx, dc, cfg, s.dir)
	if err != nil {
		cancel()
		return err
	}
	s.kubelet = k
	s.stopKubelet = func() { cancel(); <-done }
	return nil
}

// PodLogs is what the containers of the pods named namespace/pod logged
// (stdout and stderr as podman keeps them), each pod of the name in turn,
// oldest first, init containers first, each under a line naming it: for
// a failing test's message. "" when the stand-in ran none (without
// RunPods it runs none).
func (s *Server) PodLogs(namespace, pod string) string {
	if s.kubelet == nil || s.kubelet.runner == nil {
		return ""
	}
	return s.kubelet.runner.podLogs(namespace, pod)
}

// runClient runs binary as a client of the server: from a scratch working
// directory named after it, which is also its HOME and TMPDIR, with a
// kubeconfig of its own in KUBECONFIG, and nothing in its environment
// that would point it at another cluster.
func (s *Server) runClient(binary, log string, args ...string) error {
	work := filepath.Join(s.dir, filepath.Base(binary))
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(s.Kubeconfig()), 0o600); err != nil {
		return err
	}
	return s.run(binary, log, func(c *exec.Cmd) {
		c.Dir = work
		c.Env = append(withoutKube(os.Environ()), "KUBECONFIG="+kubeconfig, "HOME="+work, "TMPDIR="+work)
	}, args...)
}

// withoutKube is the environment less what would point the controller at
// another cluster.
func withoutKube(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "KUBECONFIG=") && !strings.HasPrefix(e, "KUBERNETES_") {
			out = append(out, e)
		}
	}
	return out
}

// waitController waits until the controller's sandbox workers run (its
// caches synced), or it dies.
func (s *Server) waitController(ctx context.Context) error {
	path := filepath.Join(s.dir, controllerLog)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s.controller.done() {
			return fmt.Errorf("agent-sandbox-controller exited: %s", tailOf(path, 3000))
		}
		b, _ := os.ReadFile(path)
		if workersStarted(string(b)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("agent-sandbox-controller not running after 60s: %s", tailOf(path, 3000))
}

// workersStarted reports whether controller-runtime logged the start of
// the Sandbox controller's workers.
func workersStarted(log string) bool {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "Starting workers") && strings.Contains(line, `"controller":"sandbox"`) {
			return true
		}
	}
	return false
}

// ControllerLog keeps the controller's log for a failing test: what it
// logged while t ran is logged with t's output if t fails.
func (s *Server) ControllerLog(t testing.TB) {
	t.Helper()
	if s.controller == nil {
		return
	}
	path := filepath.Join(s.dir, controllerLog)
	var from int64
	if fi, err := os.Stat(path); err == nil {
		from = fi.Size()
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil || int64(len(b)) < from {
			return
		}
		b = b[from:]
		const limit = 64 << 10
		if len(b) > limit {
			b = b[len(b)-limit:]
		}
		t.Logf("agent-sandbox-controller's log while the test ran (%s):\n%s", path, b)
	})
}

func tailOf(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
