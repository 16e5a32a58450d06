// Package kubetest runs a real kube-apiserver and etcd on loopback for
// integration tests, with the agent-sandbox CRDs applied
// (notes/kubernetes.md §3). The binaries come from scripts/build-kube,
// which builds them from the Go module proxy and caches them by version;
// BERTH_TEST_KUBE names their directory. There is no scheduler, and of
// the controller manager only the garbage collector runs, when a test
// asks (StartGarbageCollector). The real agent-sandbox controller runs beside them when a
// test run asks (StartController, BERTH_TEST_CONTROLLER), with a kubelet
// stand-in for its pods, which with RunPods (BERTH_TEST_PODMAN) runs them
// under podman; otherwise tests play the controller's part themselves,
// and say so.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// EnvBinaries names the directory holding kube-apiserver and etcd.
const EnvBinaries = "BERTH_TEST_KUBE"

// EnvCRDs overrides where the agent-sandbox CRDs are read from; the
// default is the copy in the repository,
// internal/driver/kubernetes/testdata/crds.
const EnvCRDs = "BERTH_TEST_KUBE_CRDS"

const token = "kubetest-token"

// Server is a running kube-apiserver with its etcd.
type Server struct {
	// Config reaches the server as a member of system:masters.
	Config *rest.Config
	dir    string
	bin    string // the binaries' directory (EnvBinaries)
	procs  []*proc
	logs   []*os.File
	// controller is the agent-sandbox controller's process once started;
	// kubelet is the kubelet stand-in, which stopKubelet ends
	// (controller.go).
	controller  *proc
	kubelet     *kubelet
	stopKubelet func()
}

// proc is a process the server started; exited is closed once it ends.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Start starts etcd and kube-apiserver from the binaries in bin on free
// loopback ports, with state in a temporary directory, and applies the
// CRDs in crds. Stop ends both.
func Start(ctx context.Context, bin, crds string) (*Server, error) {
	dir, err := os.MkdirTemp("", "berth-kubetest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if err := s.start(ctx, bin); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.applyCRDs(ctx, crds); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	client, peer, metrics, secure := ports[0], ports[1], ports[2], ports[3]
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",kubetest-admin,kubetest-admin-uid,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), b, 0o600); err != nil {
			return err
		}
	}
	url := func(p int) string { return "http://127.0.0.1:" + strconv.Itoa(p) }
	if err := s.run(filepath.Join(bin, "etcd"), "etcd.log", nil,
		"--name", "kubetest", "--data-dir", filepath.Join(s.dir, "etcd"),
		"--listen-client-urls", url(client), "--advertise-client-urls", url(client),
		"--listen-peer-urls", url(peer), "--initial-advertise-peer-urls", url(peer),
		"--initial-cluster", "kubetest="+url(peer), "--listen-metrics-urls", url(metrics),
		"--unsafe-no-fsync"); err != nil {
		return err
	}
	if err := s.run(filepath.Join(bin, "kube-apiserver"), "kube-apiserver.log", nil,
		"--etcd-servers="+url(client),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(secure),
		"--endpoint-reconciler-type=none", "--cert-dir="+filepath.Join(s.dir, "certs"),
		"--token-auth-file="+filepath.Join(s.dir, "tokens.csv"), "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(s.dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(s.dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--enable-priority-and-fairness=false", "--profiling=false"); err != nil {
		return err
	}
	s.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(secure), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400,
	}
	return s.waitReady(ctx)
}

// run starts path with args, its output in the file log of the server's
// directory; setup, if any, adjusts the command first.
func (s *Server) run(path, log string, setup func(*exec.Cmd), args ...string) error {
	f, err := os.Create(filepath.Join(s.dir, log))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if setup != nil {
		setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", filepath.Base(path), err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	s.procs = append(s.procs, p)
	s.logs = append(s.logs, f)
	return nil
}

// waitReady waits for /readyz, or for a process to die.
func (s *Server) waitReady(ctx context.Context) error {
	tr, err := rest.TransportFor(s.Config)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range s.procs {
			if p.done() {
				return fmt.Errorf("%s exited: %s", filepath.Base(p.cmd.Path), s.tail())
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Config.Host+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready after 90s: %s", s.tail())
}

// tail is the end of the API server's log, for errors.
func (s *Server) tail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "kube-apiserver.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// applyCRDs creates every CRD in dir and waits until each is Established.
func (s *Server) applyCRDs(ctx context.Context, dir string) error {
	dc, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("no CRDs in %s (%s)", dir, EnvCRDs)
	}
	var names []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create CRD %s: %w", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range names {
		for {
			u, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err == nil && established(u) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Discovery and the CRD handler catch up a moment after Established.
	time.Sleep(500 * time.Millisecond)
	return nil
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// Kubeconfig is a kubeconfig file's content that reaches the server.
func (s *Server) Kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: kubetest, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: kubetest, user: {token: %q}}]
contexts: [{name: kubetest, context: {cluster: kubetest, user: kubetest}}]
current-context: kubetest
`, s.Config.Host, token)
}

// Stop ends the kubelet stand-in and the controller if started, then
// the API server, then etcd, and removes their state.
func (s *Server) Stop() {
	if s.stopKubelet != nil {
		s.stopKubelet()
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	for _, f := range s.logs {
		f.Close()
	}
	os.RemoveAll(s.dir)
}

// CRDDir is where the agent-sandbox CRDs are: EnvCRDs, else
// internal/driver/kubernetes/testdata/crds under the module's root.
func CRDDir(getenv func(string) string) (string, error) {
	if d := getenv(EnvCRDs); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "internal", "driver", "kubernetes", "testdata", "crds"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// freePorts returns n loopback ports nobody listened on a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		_, p, _ := strings.Cut(l.Addr().String(), ":")
		port, _ := strconv.Atoi(p)
		ports = append(ports, port)
	}
	return ports, nil
}
