// Command lists measures the answer of GET /sandbox/v1/sandboxes on a
// gateway holding many sandboxes: its size and the p50/p99 latency of one
// list with several clients at once. It compares two gateways, a baseline
// (-before) and the one under test (-after), alternating rounds between
// them so drift in the machine's load touches both alike, and prints the
// median of the rounds, the machine's load average beside each round, and
// the after/before ratios.
//
// Each gateway must be empty of sandboxes or hold -sandboxes of them; the
// program creates what is missing through the API (the fake driver makes
// that cheap). BERTH_API_KEY is an operator's key valid on both (the same
// key string is bootstrapped into each; bench/lists.sh sets that up). A
// list is one GET with no query: the whole list on a gateway without
// pagination, the first page at the default limit with it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

func main() {
	before := flag.String("before", "", "the baseline gateway's URL")
	after := flag.String("after", "", "the gateway under test's URL")
	beforeKey := flag.String("before-key-env", "BERTH_BEFORE_KEY", "the variable holding the baseline's operator key")
	afterKey := flag.String("after-key-env", "BERTH_AFTER_KEY", "the variable holding the tested gateway's operator key")
	n := flag.Int("sandboxes", 1000, "sandboxes each gateway holds")
	clients := flag.Int("clients", 8, "concurrent clients")
	lists := flag.Int("lists", 200, "lists per round, spread over the clients")
	rounds := flag.Int("rounds", 5, "rounds per gateway")
	class := flag.String("class", "standard", "the class of the sandboxes created")
	keyFile := flag.String("ssh-key", "", "an ssh public key file for the sandboxes created")
	beforeName := flag.String("before-name", "main", "what the baseline is (its revision), in the figures")
	flag.Parse()
	pub, err := os.ReadFile(*keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -ssh-key:", err)
		os.Exit(1)
	}
	gws := []target{{name: "before", url: *before, key: os.Getenv(*beforeKey)}, {name: "after", url: *after, key: os.Getenv(*afterKey)}}
	if err := run(context.Background(), gws, *beforeName, *n, *clients, *lists, *rounds, api.CreateSandbox{Class: *class, SSHKeys: []string{strings.TrimSpace(string(pub))}}); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type target struct{ name, url, key string }

// round is what one round on one gateway measured.
type round struct {
	p50, p99 time.Duration
	bytes    int64 // of one answer (every answer of a round is alike)
	load     string
}

func run(ctx context.Context, gws []target, beforeName string, n, clients, lists, rounds int, create api.CreateSandbox) error {
	for _, g := range gws {
		if g.url == "" || g.key == "" {
			return fmt.Errorf("%s: give its URL and its key's variable", g.name)
		}
		if err := fill(ctx, g, n, clients, create); err != nil {
			return fmt.Errorf("%s: %w", g.name, err)
		}
	}
	got := map[string][]round{}
	var loads report.Loads
	for i := range rounds {
		loads.Sample()
		for _, g := range gws {
			r, err := measure(ctx, g, clients, lists)
			if err != nil {
				return fmt.Errorf("%s: %w", g.name, err)
			}
			got[g.name] = append(got[g.name], r)
			fmt.Fprintf(os.Stderr, "round %d/%d %-6s p50 %7.1f ms  p99 %7.1f ms  %8d bytes  loadavg %s\n",
				i+1, rounds, g.name, ms(r.p50), ms(r.p99), r.bytes, r.load)
		}
	}
	fmt.Printf("GET /sandbox/v1/sandboxes, %d sandboxes, %d clients, %d lists a round, median of %d rounds\n", n, clients, lists, rounds)
	fmt.Printf("%-8s %10s %10s %12s\n", "gateway", "p50 ms", "p99 ms", "bytes")
	med := map[string][3]float64{}
	for _, g := range gws {
		rs := got[g.name]
		m := [3]float64{ms(stats.Median(pick(rs, func(r round) time.Duration { return r.p50 }))),
			ms(stats.Median(pick(rs, func(r round) time.Duration { return r.p99 }))),
			stats.Median(pick(rs, func(r round) float64 { return float64(r.bytes) }))}
		med[g.name] = m
		fmt.Printf("%-8s %10.1f %10.1f %12.0f\n", g.name, m[0], m[1], m[2])
	}
	b, a := med["before"], med["after"]
	fmt.Printf("after/before: p50 x%.3f, p99 x%.3f, bytes x%.3f\n", a[0]/b[0], a[1]/b[1], a[2]/b[2])
	loads.Sample()
	var errs []error
	for i, name := range []string{"p50", "p99"} {
		errs = append(errs, report.Emit(report.Figure{Bench: "lists",
			Name:  fmt.Sprintf("list %s, %d sandboxes, %d clients", name, n, clients),
			Value: fmt.Sprintf("%.1f ms", a[i]), Baseline: fmt.Sprintf("%.1f ms (%s)", b[i], beforeName),
			Ratio: a[i] / b[i], N: rounds, Load: loads.String()}))
	}
	return errors.Join(errs...)
}

func pick[T any](rs []round, f func(round) T) []T {
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fill creates sandboxes on g until it holds n, clients at a time.
func fill(ctx context.Context, g target, n, clients int, create api.CreateSandbox) error {
	c := client.New(g.url, g.key, nil)
	have, err := count(ctx, g)
	if err != nil {
		return err
	}
	if have > n {
		return fmt.Errorf("holds %d sandboxes, more than the %d asked for", have, n)
	}
	return spread(clients, have, n, func(i int) error {
		req := create
		req.Name = fmt.Sprintf("list-%d", i)
		_, err := c.CreateSandbox(ctx, req)
		return err
	})
}

// spread runs f(i) for every i from start to n-1, clients at a time, and
// returns the first error.
func spread(clients, start, n int, f func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(start))
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := f(int(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// count is how many sandboxes g lists, following its pages if it has any.
func count(ctx context.Context, g target) (int, error) {
	n := 0
	next := "/sandbox/v1/sandboxes?limit=1000"
	for next != "" {
		resp, err := get(ctx, g, next)
		if err != nil {
			return 0, err
		}
		var l struct{ Sandboxes []struct{} }
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return 0, err
		}
		n += len(l.Sandboxes)
		next = nextLink(resp.Header.Get("Link"))
	}
	return n, nil
}

// nextLink is the target of rel="next" in a Link header, "" when none.
func nextLink(h string) string {
	for part := range strings.SplitSeq(h, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if ok && strings.Contains(params, `rel="next"`) {
			return strings.Trim(strings.TrimSpace(target), "<>")
		}
	}
	return ""
}

func get(ctx context.Context, g target, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", g.url+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return resp, nil
}

// measure lists the sandboxes of g lists times, clients at once.
func measure(ctx context.Context, g target, clients, lists int) (round, error) {
	lat := make([]time.Duration, lists)
	sizes := make([]int64, lists)
	err := spread(clients, 0, lists, func(i int) error {
		start := time.Now()
		resp, err := get(ctx, g, "/sandbox/v1/sandboxes")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		sizes[i], err = io.Copy(io.Discard, resp.Body)
		lat[i] = time.Since(start)
		return err
	})
	if err != nil {
		return round{}, err
	}
	slices.Sort(lat)
	load, _ := os.ReadFile("/proc/loadavg")
	return round{p50: lat[len(lat)/2], p99: lat[(len(lat)*99+99)/100-1], bytes: int64(stats.Median(pickInt(sizes))),
		load: strings.Join(strings.Fields(string(load))[:3], " ")}, nil
}

func pickInt(s []int64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}
