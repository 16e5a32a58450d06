// Command egress measures the egress proxy (internal/egress/proxy) against
// the same download made directly, in the same run, alternating the two:
// the real curl fetches SIZE MiB over HTTPS from a server on loopback,
// once through the proxy (HTTPS_PROXY's CONNECT, with a sandbox's key and
// a policy naming the server) and once straight to it, and the rate is
// curl's own (speed_download: bytes over the whole transfer). It prints
// medians and the ratio, and with BERTH_BENCH_REPORT set hands the figure
// to bench/all. Issue 22's goal: at least 0.9 of the direct download.
//
// The proxy runs in this process, as the gateway will run it: what is
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
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/proxy"
)

const host = "download.bench"

func main() {
	n := flag.Int("n", 7, "runs of each kind")
	size := flag.Int("size", 500, "MiB per download")
	flag.Parse()
	if err := run(*n, int64(*size)<<20); err != nil {
		fmt.Fprintln(os.Stderr, "bench/egress:", err)
		os.Exit(1)
	}
}

func run(n int, size int64) error {
	srv, err := server(size)
	if err != nil {
		return err
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	pol, err := egress.ParsePolicy("", []string{host + ":" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(port)})
	if err != nil {
		return err
	}
	p := &proxy.Proxy{
		Authenticate: func(_ context.Context, h string) (proxy.Caller, error) {
			if h != "Bearer berth_sk_bench" {
				return proxy.Caller{}, errors.New("unknown key")
			}
			return proxy.Caller{Sandbox: "sbx_bench", Policy: pol}, nil
		},
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(pl, p)
	url := fmt.Sprintf("https://%s:%d/", host, port)
	through := []string{"--proxy", "http://" + pl.Addr().String(), "--proxy-header", "Proxy-Authorization: Bearer berth_sk_bench"}
	direct := []string{"--resolve", fmt.Sprintf("%s:%d:127.0.0.1", host, port)}
	var via, straight []float64
	var loads report.Loads
	for i := range n {
		loads.Sample()
		for k := range 2 {
			viaProxy := (i+k)%2 == 0 // alternate which goes first
			args := direct
			if viaProxy {
				args = through
			}
			rate, err := download(url, args, size)
			if err != nil {
				return err
			}
			if viaProxy {
				via = append(via, rate)
			} else {
				straight = append(straight, rate)
			}
		}
		fmt.Fprintf(os.Stderr, "run %d/%d: %.0f vs %.0f MB/s\n", i+1, n, via[i]/1e6, straight[i]/1e6)
	}
	mv, md := stats.Median(via), stats.Median(straight)
	fmt.Printf("a %d MiB HTTPS download through the egress proxy vs straight, median of %d\n", size>>20, n)
	fmt.Printf("%-28s %10.0f MB/s %10.0f MB/s %8.2f\n", "download", mv/1e6, md/1e6, mv/md)
	return report.Emit(report.Figure{Bench: "egress", Name: fmt.Sprintf("HTTPS download through the egress proxy (%d MiB)", size>>20),
		Value: fmt.Sprintf("%.0f MB/s", mv/1e6), Baseline: fmt.Sprintf("%.0f MB/s (straight)", md/1e6), Ratio: mv / md,
		Goal: "≥ 0.9", N: n, Load: loads.String()})
}

// download fetches url with curl and returns its rate in bytes a second.
func download(url string, args []string, size int64) (float64, error) {
	cmd := exec.Command("curl", append([]string{"-sS", "-k", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}"}, append(args, url)...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("curl %s: %w", strings.Join(args, " "), err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != strconv.FormatInt(size, 10) {
		return 0, fmt.Errorf("curl fetched %q, want %d bytes", out, size)
	}
	return strconv.ParseFloat(f[1], 64)
}

// server serves size zero bytes over HTTPS on loopback, with a
// certificate of its own (curl -k: this measures bytes, not trust).
func server(size int64) (net.Listener, error) {
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
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
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
