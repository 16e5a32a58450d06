package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/scratch"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// rowsGateway is a scratch gateway on the fake driver holding rows
// sandboxes, and what its rounds measured.
type rowsGateway struct {
	*scratch.Gateway
	key        string
	rows       int
	list, show [][2]time.Duration // p50 and p99 of each round
	loads      report.Loads
}

// lists is the lists part: list and show latency on a gateway holding
// o.rows sandboxes against one holding o.small.
func lists(ctx context.Context, o options) error {
	if o.berth == "" {
		return fmt.Errorf("lists: -berth is required")
	}
	classes, err := filepath.Abs(o.classes)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "berth-density-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var gws []*rowsGateway
	defer func() {
		for _, g := range gws {
			g.Stop()
		}
	}()
	for _, rows := range []int{o.rows, o.small} {
		g, err := scratch.Start(o.berth, filepath.Join(dir, fmt.Sprint(rows)), filepath.Join(dir, fmt.Sprintf("%d.db", rows)),
			"BERTH_SANDBOX_DRIVER=fake", "BERTH_SANDBOXES_FILE="+classes, "BERTH_LOG_LEVEL=warn")
		if err != nil {
			return err
		}
		rg := &rowsGateway{Gateway: g, rows: rows}
		gws = append(gws, rg)
		if rg.key, err = g.Bootstrap(); err != nil {
			return err
		}
		c := client.New(g.URL, rg.key, nil)
		if err := allow(ctx, c, rows); err != nil {
			return err
		}
		began := time.Now()
		if err := fill(ctx, c, rows, 8, o.sshKey); err != nil {
			return fmt.Errorf("%d rows: %w", rows, err)
		}
		fmt.Fprintf(os.Stderr, "%d sandboxes made through the API in %v (fake driver, SQLite)\n", rows, time.Since(began).Round(time.Millisecond))
	}
	big, small := gws[0], gws[1]
	hc := &http.Client{Timeout: time.Minute}
	for i := range o.n {
		order := []*rowsGateway{big, small}
		if i%2 == 1 {
			order = []*rowsGateway{small, big}
		}
		for _, g := range order {
			g.loads.Sample()
			list, show, err := g.round(ctx, hc, o.requests)
			if err != nil {
				return fmt.Errorf("%d rows: %w", g.rows, err)
			}
			g.loads.Sample()
			g.list, g.show = append(g.list, list), append(g.show, show)
			fmt.Fprintf(os.Stderr, "round %d/%d, %5d rows: list p50 %s p99 %s, show p50 %s p99 %s, load %.2f\n",
				i+1, o.n, g.rows, ms(list[0]), ms(list[1]), ms(show[0]), ms(show[1]), report.Load())
		}
	}
	loads := append(append(report.Loads{}, big.loads...), small.loads...)
	fmt.Printf("list and show through the API, %d requests of each a round, one at a time, median of %d rounds (fake driver, SQLite)\n", o.requests, o.n)
	for _, f := range []struct {
		name   string
		rounds func(*rowsGateway) [][2]time.Duration
		which  int
		goal   string
	}{
		{"list p50", func(g *rowsGateway) [][2]time.Duration { return g.list }, 0, ""},
		{"list p99", func(g *rowsGateway) [][2]time.Duration { return g.list }, 1, "≤ 50 ms"},
		{"show p50", func(g *rowsGateway) [][2]time.Duration { return g.show }, 0, ""},
		{"show p99", func(g *rowsGateway) [][2]time.Duration { return g.show }, 1, ""},
	} {
		b, s := medianOf(f.rounds(big), f.which), medianOf(f.rounds(small), f.which)
		if err := emit(report.Figure{Name: fmt.Sprintf("%s, %d sandbox rows", f.name, big.rows), Value: ms(b),
			Baseline: fmt.Sprintf("%s (%d rows)", ms(s), small.rows), Ratio: float64(b) / float64(s), Goal: f.goal,
			N: o.n, Load: loads.String()}); err != nil {
			return err
		}
	}
	rb, err := statusField(big.PID(), "VmRSS")
	if err != nil {
		return err
	}
	rs, err := statusField(small.PID(), "VmRSS")
	if err != nil {
		return err
	}
	return emit(report.Figure{Name: fmt.Sprintf("gateway RSS after making %d sandboxes (fake driver)", big.rows), Value: mib(rb),
		Baseline: fmt.Sprintf("%s (%d rows)", mib(rs), small.rows), Ratio: rb / rs, N: 1, Load: loads.String()})
}

// fill creates n sandboxes through the API, clients at a time.
func fill(ctx context.Context, c *client.Client, n, clients int, sshKey string) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if _, err := c.CreateSandbox(ctx, api.CreateSandbox{Name: fmt.Sprintf("row-%d", i), Class: "standard", SSHKeys: []string{sshKey}}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// round times requests lists and requests shows of random sandboxes,
// alternating, one at a time, and returns the p50 and p99 of each.
func (g *rowsGateway) round(ctx context.Context, hc *http.Client, requests int) (list, show [2]time.Duration, err error) {
	var ls, ss []time.Duration
	for range requests {
		d, err := g.get(ctx, hc, "/sandbox/v1/sandboxes")
		if err != nil {
			return list, show, err
		}
		ls = append(ls, d)
		if d, err = g.get(ctx, hc, fmt.Sprintf("/sandbox/v1/sandboxes/row-%d", rand.IntN(g.rows))); err != nil {
			return list, show, err
		}
		ss = append(ss, d)
	}
	return [2]time.Duration{stats.Percentile(ls, 50), stats.Percentile(ls, 99)},
		[2]time.Duration{stats.Percentile(ss, 50), stats.Percentile(ss, 99)}, nil
}

// get times one GET, to the last byte of its answer.
func (g *rowsGateway) get(ctx context.Context, hc *http.Client, path string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return d, nil
}

// medianOf is the median of the rounds' which-th figure.
func medianOf(rounds [][2]time.Duration, which int) time.Duration {
	var ds []time.Duration
	for _, r := range rounds {
		ds = append(ds, r[which])
	}
	return stats.Median(ds)
}
