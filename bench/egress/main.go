// Command egress measures the egress proxy (internal/egress/proxy) against
// the same download made directly, in the same run, alternating the two:
// the real curl fetches SIZE MiB over HTTPS from a server of this
// process, once through the proxy (HTTPS_PROXY's CONNECT, with a
// sandbox's key and a policy naming the server) and once straight to it,
// and the rate is curl's own (speed_download: bytes over the whole
// transfer). It prints the median rates and the median of each pair's
// ratio (the two run back to back, so a machine whose speed drifts
// between pairs moves both), and with BERTH_BENCH_REPORT set hands the
// figures to bench/all. Issue 22's goal: at least 0.9 of the direct
// download.
//
// curl runs in three places, a figure each:
//   - on the host, against the server and the proxy on loopback. Beside
//     it goes the ratio the machine's cores allow at best, from the CPU
//     each download took: on a small machine the server, which stands for
//     a remote host, takes a core the proxy and curl need;
//   - in a container of the sandbox image on podman's bridge (runc), the
//     server and the proxy listening on the bridge's address;
//   - the same on the isolated tier (runsc, from BERTH_TEST_RUNSC).
//
// The containers need the podman root (BERTH_SANDBOX_PODMAN_ROOT, else
// .berth/data/podman) and the sandbox image; without them only the host's
// figure is measured.
//
// The proxy runs in this process, as the gateway runs it: what is
// measured is its CONNECT tunnel's copy, not a gateway's routing.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/proxy"
)

const host = "download.bench"

// image is the sandbox image, whose curl runs in the containers.
const image = "localhost/berth-sandbox:latest"

func main() {
	n := flag.Int("n", 7, "runs of each kind")
	size := flag.Int("size", 500, "MiB per download")
	flag.Parse()
	if err := run(*n, int64(*size)<<20); err != nil {
		fmt.Fprintln(os.Stderr, "bench/egress:", err)
		os.Exit(1)
	}
}

// client is where curl runs: on the host, or in a container of the
// sandbox image (exec names podman's exec of it), reaching the server and
// the proxy at addr.
type client struct {
	label string
	addr  string
	exec  []string
	env   []string
	// ownStack is the proxy's Caller.OwnStack, as the gateway gives it
	// for a sandbox on this runtime's tier.
	ownStack bool
}

func run(n int, size int64) error {
	if err := measure(client{label: "on the host", addr: "127.0.0.1"}, n, size); err != nil {
		return err
	}
	root := os.Getenv("BERTH_SANDBOX_PODMAN_ROOT")
	if root == "" {
		wd, _ := os.Getwd()
		root = filepath.Join(wd, ".berth", "data", "podman")
	}
	if _, err := os.Stat(filepath.Join(root, "containers.conf")); err != nil {
		fmt.Fprintf(os.Stderr, "bench/egress: no podman root at %s (BERTH_SANDBOX_PODMAN_ROOT): no figure in a container\n", root)
		return nil
	}
	if _, err := podman(root, "image", "exists", image); err != nil {
		fmt.Fprintf(os.Stderr, "bench/egress: no %s in %s (make images): no figure in a container\n", image, root)
		return nil
	}
	runtimes := []string{"runc"}
	if runsc := os.Getenv("BERTH_TEST_RUNSC"); runsc != "" {
		runtimes = append(runtimes, runsc)
	} else {
		fmt.Fprintln(os.Stderr, "bench/egress: no BERTH_TEST_RUNSC: no figure on the isolated tier")
	}
	for _, rt := range runtimes {
		c, stop, err := container(root, rt)
		if err != nil {
			return err
		}
		err = measure(c, n, size)
		stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// podmanEnv is this process's environment with podman pointed at root.
func podmanEnv(root string) []string {
	return append(os.Environ(), "CONTAINERS_CONF="+root+"/containers.conf", "CONTAINERS_STORAGE_CONF="+root+"/storage.conf")
}

// podman runs podman on root and returns its output.
func podman(root string, args ...string) (string, error) {
	cmd := exec.Command("podman", args...)
	cmd.Env = podmanEnv(root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("podman %s: %v: %s", args[0], err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// container starts a container of the sandbox image on podman's bridge
// with runtime rt (runc, or runsc: the isolated tier), for curl to run
// in; the server and the proxy listen on the bridge's address on the host.
func container(root, rt string) (client, func(), error) {
	name := fmt.Sprintf("berth-bench-egress-%d", os.Getpid())
	label := "in a container (runc)"
	if rt != "runc" {
		label = "in a gVisor container (runsc, the isolated tier)"
	}
	// runsc counts its own threads against the pids limit.
	if _, err := podman(root, "run", "-d", "--name", name, "--runtime", rt, "--pids-limit", "256", "--network", "podman",
		"--entrypoint", "sleep", image, "infinity"); err != nil {
		return client{}, nil, err
	}
	stop := func() { _, _ = podman(root, "rm", "-f", "-t", "0", name) }
	gw, err := podman(root, "network", "inspect", "podman", "--format", "{{range .Subnets}}{{.Gateway}}{{end}}")
	if err != nil {
		stop()
		return client{}, nil, err
	}
	if _, err := netip.ParseAddr(gw); err != nil {
		stop()
		return client{}, nil, fmt.Errorf("podman's bridge has no gateway address (%q)", gw)
	}
	return client{label: label, addr: gw, exec: []string{"podman", "exec", name}, env: podmanEnv(root), ownStack: rt != "runc"}, stop, nil
}

// measure runs the pairs of downloads for one client and reports them.
func measure(c client, n int, size int64) error {
	srv, err := server(c.addr, size)
	if err != nil {
		return err
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	pol, err := egress.ParsePolicy("", []string{host + ":" + strconv.Itoa(port), c.addr + ":" + strconv.Itoa(port)})
	if err != nil {
		return err
	}
	p := &proxy.Proxy{
		Authenticate: func(_ context.Context, h string) (proxy.Caller, error) {
			if h != "Bearer berth_sk_bench" {
				return proxy.Caller{}, errors.New("unknown key")
			}
			return proxy.Caller{Sandbox: "sbx_bench", Policy: pol, OwnStack: c.ownStack}, nil
		},
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(c.addr)}, nil
		},
	}
	pl, err := net.Listen("tcp", net.JoinHostPort(c.addr, "0"))
	if err != nil {
		return err
	}
	defer pl.Close()
	go http.Serve(pl, p)
	url := fmt.Sprintf("https://%s:%d/", host, port)
	through := []string{"--proxy", "http://" + pl.Addr().String(), "--proxy-header", "Proxy-Authorization: Bearer berth_sk_bench"}
	direct := []string{"--resolve", fmt.Sprintf("%s:%d:%s", host, port, c.addr)}
	var via, straight, ratios, ceilings []float64
	var loads report.Loads
	for i := range n {
		loads.Sample()
		var pair [2]result
		for k := range 2 {
			viaProxy := (i+k)%2 == 0 // alternate which goes first
			args := direct
			if viaProxy {
				args = through
			}
			r, err := c.download(url, args, size)
			if err != nil {
				return err
			}
			if viaProxy {
				pair[0] = r
			} else {
				pair[1] = r
			}
		}
		via, straight = append(via, pair[0].rate), append(straight, pair[1].rate)
		ratios = append(ratios, pair[0].rate/pair[1].rate)
		line := fmt.Sprintf("%s, run %d/%d: %.0f vs %.0f MB/s (%.2f)", c.label, i+1, n, pair[0].rate/1e6, pair[1].rate/1e6, ratios[i])
		if c.exec == nil {
			// The ceiling is the ratio this machine's cores allow at
			// best, given the CPU each download took: the one through
			// the proxy cannot take less than all the CPU it needed
			// (server, proxy and curl) spread over every core, nor less
			// than curl's own (one thread). The server's share is a
			// remote host's in use; here it takes one of the cores the
			// proxy and curl need. (A container's curl is not this
			// process's child: its CPU is not known here.)
			need := (pair[0].self + pair[0].curl).Seconds()
			floor := max(need/float64(runtime.NumCPU()), pair[0].curl.Seconds())
			ceilings = append(ceilings, float64(size)/pair[1].rate/floor)
			line += fmt.Sprintf(", ceiling %.2f; CPU: curl %v vs %v, this process (server and proxy) %v vs %v",
				ceilings[i], ms(pair[0].curl), ms(pair[1].curl), ms(pair[0].self), ms(pair[1].self))
		}
		fmt.Fprintln(os.Stderr, line)
	}
	mv, md, mr := stats.Median(via), stats.Median(straight), stats.Median(ratios)
	fmt.Printf("a %d MiB HTTPS download %s, through the egress proxy vs straight, median of %d (the ratio is each pair's, run back to back)\n", size>>20, c.label, n)
	fmt.Printf("%-28s %10.0f MB/s %10.0f MB/s %8.2f\n", "download", mv/1e6, md/1e6, mr)
	if len(ceilings) > 0 {
		fmt.Printf("the most %d cores allow for the ratio, given the CPU each download took: %.2f\n", runtime.NumCPU(), stats.Median(ceilings))
	}
	return report.Emit(report.Figure{Bench: "egress", Name: fmt.Sprintf("HTTPS download through the egress proxy (%d MiB), curl %s", size>>20, c.label),
		Value: fmt.Sprintf("%.0f MB/s", mv/1e6), Baseline: fmt.Sprintf("%.0f MB/s (straight)", md/1e6), Ratio: mr,
		Goal: "≥ 0.9", N: n, Load: loads.String()})
}

// result is one download: curl's rate in bytes a second, and the CPU time
// curl and this process (the server, and the proxy when it carried it)
// spent on it.
type result struct {
	rate       float64
	curl, self time.Duration
}

// download fetches url with curl where the client runs.
func (c client) download(url string, args []string, size int64) (result, error) {
	argv := append(append(slices.Clone(c.exec), "curl", "-sS", "-k", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}"), append(args, url)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if c.env != nil {
		cmd.Env = c.env
	}
	before := selfCPU()
	out, err := cmd.Output()
	self := selfCPU() - before
	if err != nil {
		return result{}, fmt.Errorf("curl %s: %w", strings.Join(args, " "), err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != strconv.FormatInt(size, 10) {
		return result{}, fmt.Errorf("curl fetched %q, want %d bytes", out, size)
	}
	rate, err := strconv.ParseFloat(f[1], 64)
	return result{rate: rate, curl: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), self: self}, err
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// selfCPU is the CPU time this process has spent, user and system.
func selfCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// server serves size zero bytes over HTTPS on addr, with a
// certificate of its own (curl -k: this measures bytes, not trust).
func server(addr string, size int64) (net.Listener, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(addr, "0"), &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 256<<10)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; {
			m := min(left, int64(len(zeros)))
			if _, err := w.Write(zeros[:m]); err != nil {
				return
			}
			left -= m
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	return ln, nil
}
