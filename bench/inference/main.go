// Command inference measures what the gateway adds to a streamed model
// request under concurrency (SPEC S14; issue 21's goal: p50 ≤ 1 ms and
// p99 ≤ 5 ms added over the upstream at 64 concurrent streams).
//
//	go run ./bench/inference [-berth BINARY] [-base BINARY] [-model BINARY] [-n 5] [-requests 256] [-paced-requests 64] [-clients 1,64] [-load burst,paced]
//
// It builds berth and berth-model from this tree (or runs -berth and
// -model: older builds, to compare), starts berth-model (the scripted
// model server) as a process of its own on loopback, and a scratch `berth
// serve` on an SQLite file of its own whose inference catalog
// (BERTH_INFERENCE_FILE) has one OpenAI-compatible provider: that
// berth-model. Then it sends the same streamed Chat Completions request
// straight to berth-model (the baseline) and through the gateway with a
// user's key, alternating the two in the same run, and times each
// request to its first byte and to the end of its stream.
//
// Two loads, each at every -clients count:
//
//   - burst: rounds in which every client sends at the same instant,
//     straight to the upstream, then through the gateway (the order
//     swapped every round). The upstream answers at once, so only the
//     gateway's own work is measured, and the clients' requests land
//     together: on two cores they queue for the CPU.
//   - paced: berth-model answers as a model does, its first event
//     -first late and each next one -every after it (run with
//     -pace); each client sends its own requests one after another,
//     alternating direct and through the gateway, the clients spread
//     over one answer's time: that many agents working at once.
//
// With -base, a second gateway of another build (an older berth, to
// compare) stands beside the first in front of the same berth-model, and
// its requests take turns with the other two paths'.
//
// A run is -requests requests per path (-paced-requests in the paced
// load; at least 4 per client either way); its p50
// and p99 added latency are the gateway's percentile minus the
// upstream's. The figures are the medians over -n runs, printed as a
// table with the machine's load (/proc/loadavg) beside each, and handed
// to bench/all with report.Emit.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/scratch"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

func main() {
	berth := flag.String("berth", "", "the berth binary to run (default: built from this tree)")
	base := flag.String("base", "", "another berth binary to measure in the same runs, beside -berth (an older build)")
	model := flag.String("model", "", "the berth-model binary to run (default: built from this tree)")
	n := flag.Int("n", 5, "runs of each point; the figures are their medians")
	requests := flag.Int("requests", 256, "burst: requests per path in a run (at least 4 per client)")
	pacedRequests := flag.Int("paced-requests", 64, "paced: requests per path in a run (at least 4 per client)")
	clientList := flag.String("clients", "1,64", "concurrent clients, comma-separated")
	loads := flag.String("load", "burst,paced", "loads: burst, paced")
	first := flag.Duration("first", 200*time.Millisecond, "paced: how late berth-model's first event comes")
	every := flag.Duration("every", 10*time.Millisecond, "paced: the time between berth-model's next events")
	flag.Parse()
	var clients []int
	for f := range strings.SplitSeq(*clientList, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			fmt.Fprintf(os.Stderr, "bench: -clients: %q is not a count\n", f)
			os.Exit(2)
		}
		clients = append(clients, c)
	}
	if *n < 1 || *requests < 1 || *pacedRequests < 1 {
		fmt.Fprintln(os.Stderr, "bench: -n, -requests and -paced-requests must be at least 1")
		os.Exit(2)
	}
	if err := run(*berth, *base, *model, *n, [2]int{*requests, *pacedRequests}, clients, strings.Split(*loads, ","), *first, *every); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// inferenceFile is the gateway's catalog: berth-model at %s as an
// OpenAI-compatible provider.
const inferenceFile = `providers:
  - {name: upstream, kind: openai, url: "%s/v1", credential_env: BENCH_UPSTREAM_KEY}
models:
  - {id: bench, provider: upstream, max_tokens: 64000, price: {input: 3, output: 15, cache_read: 0.3}}
`

// body is the request both paths are sent: a streamed Chat Completion,
// as OpenCode and Pi send them.
const body = `{"model":"bench","stream":true,"max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`

func run(berth, base, model string, n int, requests [2]int, clients []int, loads []string, first, every time.Duration) error {
	dir, err := os.MkdirTemp("", "berth-bench-inference-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if berth == "" || model == "" {
		if berth, model, err = build(dir, berth, model); err != nil {
			return err
		}
	}
	b := &bench{hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, DisableCompression: true}}}
	for _, load := range loads {
		var pace []string
		perRun := requests[0]
		switch load {
		case "burst":
		case "paced":
			pace = []string{"-pace", first.String() + "," + every.String()}
			perRun = requests[1]
		default:
			return fmt.Errorf("-load: unknown load %q (burst, paced)", load)
		}
		stop, err := b.start(dir, berth, base, model, load, pace)
		if err != nil {
			return err
		}
		fmt.Printf("\n%s load: streamed Chat Completions, berth-model at %s (SQLite gateways); medians of %d runs of %d requests a path\n",
			load, b.upstream, n, perRun)
		fmt.Printf("%-8s %-10s %-6s %12s %12s %12s %12s %10s   %s\n", "clients", "to", "berth", "direct p50", "added p50", "direct p99", "added p99", "ratio p50", "loadavg")
		for _, c := range clients {
			if err := b.point(load, c, n, perRun); err != nil {
				stop()
				return fmt.Errorf("%s, %d clients: %w", load, c, err)
			}
		}
		stop()
	}
	return nil
}

type bench struct {
	hc       *http.Client
	upstream string
	gws      []gateway // berth's, then -base's
}

// gateway is one scratch gateway in front of berth-model, and the key
// its requests are sent with.
type gateway struct{ name, url, key string }

// start runs berth-model (with args) and a scratch gateway in front of
// it, and returns what stops both.
func (b *bench) start(dir, berth, base, model, name string, args []string) (func(), error) {
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := scratch.FreePort()
	if err != nil {
		return nil, err
	}
	b.upstream = "http://127.0.0.1:" + port
	logf, err := os.Create(filepath.Join(dir, "model.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(model, append([]string{"-addr", "127.0.0.1:" + port, "-scenario", "text"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start berth-model: %w", err)
	}
	stopModel := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	if err := b.waitModel(); err != nil {
		stopModel()
		return nil, err
	}
	file := filepath.Join(dir, "inference.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, inferenceFile, b.upstream), 0o644); err != nil {
		stopModel()
		return nil, err
	}
	var started []*scratch.Gateway
	stop := func() {
		for _, g := range started {
			g.Stop()
		}
		stopModel()
	}
	b.gws = nil
	for i, bin := range []string{berth, base} {
		if bin == "" {
			continue
		}
		name := []string{"new", "base"}[i]
		g, err := scratch.Start(bin, filepath.Join(dir, name), filepath.Join(dir, name+".db"),
			"BERTH_INFERENCE_FILE="+file, "BERTH_LOG_LEVEL=warn", "BENCH_UPSTREAM_KEY=none")
		if err != nil {
			stop()
			return nil, err
		}
		started = append(started, g)
		key, err := userKey(g)
		if err != nil {
			stop()
			return nil, err
		}
		b.gws = append(b.gws, gateway{name: name, url: g.URL, key: key})
	}
	// Every path once, to see that they answer.
	for p := range b.paths() {
		if _, _, err := b.send(p); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// waitModel waits for berth-model to answer.
func (b *bench) waitModel() error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodHead, b.upstream+"/", nil)
		if resp, err := b.hc.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
	}
	return errors.New("berth-model did not answer in 30s")
}

// userKey bootstraps the gateway and returns the key of an administrator
// of the first organisation: a person's key, as an engineer's CLI sends.
func userKey(g *scratch.Gateway) (string, error) {
	op, err := g.Bootstrap()
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	c := client.New(g.URL, op, nil)
	orgs, err := c.Orgs(ctx)
	if err != nil || len(orgs) == 0 {
		return "", fmt.Errorf("organisations: %v", err)
	}
	u, err := c.CreateUser(ctx, orgs[0].ID, api.CreateUser{Name: "bench", Role: "admin"})
	if err != nil {
		return "", err
	}
	k, err := c.CreateKey(ctx, api.CreateKey{User: u.ID, Name: "bench"})
	if err != nil {
		return "", err
	}
	return k.Secret, nil
}

// paths counts the ways a request goes: 0 straight to berth-model, 1 + i
// through gateway i.
func (b *bench) paths() int { return 1 + len(b.gws) }

// send sends the request on path p (see paths), and returns the time to
// its first byte and to the end of its stream.
func (b *bench) send(p int) (ttfb, total time.Duration, err error) {
	url, key := b.upstream+"/v1/chat/completions", "none"
	if p > 0 {
		url, key = b.gws[p-1].url+"/v1/chat/completions", b.gws[p-1].key
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	one := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, one); err != nil {
		return 0, 0, fmt.Errorf("read the answer: %w", err)
	}
	ttfb = time.Since(start)
	rest, err := io.ReadAll(resp.Body)
	total = time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(rest, []byte("[DONE]")) {
		return 0, 0, fmt.Errorf("path %d: status %d: %s", p, resp.StatusCode, append(one, rest...))
	}
	return ttfb, total, nil
}

// samples are one run's times by path (see paths).
type samples struct {
	mu           sync.Mutex
	first, total [3][]time.Duration
	errs         []error
}

func (s *samples) note(i int, f, t time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	s.first[i], s.total[i] = append(s.first[i], f), append(s.total[i], t)
}

// burst sends rounds in which every client sends at once, each path in
// turn, the first path another every round.
func (b *bench) burst(clients, requests int) *samples {
	s := &samples{}
	rounds := max(4, (requests+clients-1)/clients)
	for r := range rounds {
		for i := range b.paths() {
			p := (r + i) % b.paths()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() { f, t, err := b.send(p); s.note(p, f, t, err) })
			}
			wg.Wait()
		}
	}
	return s
}

// paced has each client send its own requests, alternating the paths,
// the clients' starts spread over spread.
func (b *bench) paced(clients, requests int, spread time.Duration) *samples {
	s := &samples{}
	each := max(4, (requests+clients-1)/clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			time.Sleep(spread * time.Duration(c) / time.Duration(clients))
			for i := range b.paths() * each {
				p := (i + c) % b.paths()
				f, t, err := b.send(p)
				s.note(p, f, t, err)
			}
		})
	}
	wg.Wait()
	return s
}

// added is one run's figures to one point of the answer, through
// gateway g.
type added struct{ d50, d99, g50, g99 time.Duration }

func addedOf(d [3][]time.Duration, g int) added {
	return added{stats.Percentile(d[0], 50), stats.Percentile(d[0], 99), stats.Percentile(d[1+g], 50), stats.Percentile(d[1+g], 99)}
}

// point measures one load at one count of clients, n runs.
func (b *bench) point(load string, clients, n, requests int) error {
	before := scratch.LoadAvg()
	var runs [2][2][]added // by gateway, then [0] to the first byte, [1] to the end
	for range n {
		var s *samples
		if load == "burst" {
			b.burst(clients, clients) // warm every path's connections
			s = b.burst(clients, requests)
		} else {
			s = b.paced(clients, requests, 200*time.Millisecond)
		}
		if len(s.errs) > 0 {
			return fmt.Errorf("%d requests failed: %w", len(s.errs), s.errs[0])
		}
		for g := range b.gws {
			runs[g][0] = append(runs[g][0], addedOf(s.first, g))
			runs[g][1] = append(runs[g][1], addedOf(s.total, g))
		}
	}
	load2 := before + " → " + scratch.LoadAvg()
	for i, to := range []string{"first byte", "end"} {
		for g, gw := range b.gws {
			med := func(f func(added) time.Duration) time.Duration {
				var ds []time.Duration
				for _, a := range runs[g][i] {
					ds = append(ds, f(a))
				}
				return stats.Median(ds)
			}
			d50, d99 := med(func(a added) time.Duration { return a.d50 }), med(func(a added) time.Duration { return a.d99 })
			a50 := med(func(a added) time.Duration { return a.g50 - a.d50 })
			a99 := med(func(a added) time.Duration { return a.g99 - a.d99 })
			ratio := float64(d50+a50) / float64(d50)
			fmt.Printf("%-8d %-10s %-6s %9.2f ms %+9.2f ms %9.2f ms %+9.2f ms %10.2f   %s\n", clients, to, gw.name, ms(d50), ms(a50), ms(d99), ms(a99), ratio, load2)
			if g > 0 {
				continue // bench/all's table holds this tree's figures
			}
			for _, f := range []report.Figure{
				{Name: fmt.Sprintf("model stream, %s, %d client(s): added to the %s, p50", load, clients, to),
					Value: fmt.Sprintf("%+.2f ms", ms(a50)), Baseline: fmt.Sprintf("upstream %.2f ms", ms(d50)), Ratio: ratio, Goal: "≤ 1 ms added"},
				{Name: fmt.Sprintf("model stream, %s, %d client(s): added to the %s, p99", load, clients, to),
					Value: fmt.Sprintf("%+.2f ms", ms(a99)), Baseline: fmt.Sprintf("upstream %.2f ms", ms(d99)), Ratio: float64(d99+a99) / float64(d99), Goal: "≤ 5 ms added"},
			} {
				f.Bench, f.N, f.Load = "inference", n, load2
				if err := report.Emit(f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// build builds what is not given from the tree the bench is in.
func build(dir, berth, model string) (string, string, error) {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	for _, b := range []struct {
		bin *string
		pkg string
	}{{&berth, "berth"}, {&model, "berth-model"}} {
		if *b.bin != "" {
			continue
		}
		*b.bin = filepath.Join(dir, b.pkg)
		cmd := exec.Command("go", "build", "-o", *b.bin, "./cmd/"+b.pkg)
		cmd.Dir, cmd.Stderr = filepath.Dir(strings.TrimSpace(string(mod))), os.Stderr
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("build %s: %w", b.pkg, err)
		}
	}
	return berth, model, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
