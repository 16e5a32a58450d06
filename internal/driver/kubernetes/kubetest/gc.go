package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// gcLog is the controller manager's log file in the server's directory.
const gcLog = "kube-controller-manager.log"

// StartGarbageCollector runs the real kube-controller-manager from the
// binaries' directory (scripts/build-kube) against the server with only
// its garbage collector on: what a deleted object owned is deleted, as on
// a cluster (a removed Sandbox's pod, a deleted warm pool's Sandboxes and
// theirs). No other controller of it runs: no scheduler, no volume
// binding, no service-account tokens. It returns once the collector's
// caches are synced; Stop ends it.
func (s *Server) StartGarbageCollector(ctx context.Context) error {
	bin := filepath.Join(s.bin, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no kube-controller-manager beside kube-apiserver (run scripts/build-kube again): %w", err)
	}
	if err := s.runClient(bin, gcLog,
		"--kubeconfig="+filepath.Join(s.dir, "kube-controller-manager", "kubeconfig"), "--controllers=garbage-collector-controller",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5"); err != nil {
		return err
	}
	p := s.procs[len(s.procs)-1]
	path := filepath.Join(s.dir, gcLog)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if p.done() {
			return fmt.Errorf("kube-controller-manager exited: %s", tailOf(path, 3000))
		}
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), "synced garbage collector") || strings.Contains(string(b), "Proceeding to collect garbage") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-controller-manager's garbage collector not synced after 60s: %s", tailOf(path, 3000))
}
