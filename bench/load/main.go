// Command load measures sandbox creates through the API under 1, 8, 32 and
// 64 concurrent clients, on SQLite and on PostgreSQL with one replica and
// with two, and prints creates per second, p50 and p99 latency and the
// count of answers 500 (which must be 0), each figure beside its baseline
// of the same run: N clients against 1 client (throughput must not fall as
// clients grow), and, with -base, this build against another.
//
// Every point (a database, a build, a number of clients) gets a scratch
// gateway (`berth serve`, the fake driver, so only the gateway and its
// database count) on a fresh database, makes -creates engineer sandboxes
// in one organisation, and stops. A run measures every point once, the
// builds' points side by side in alternating order; the figures are
// medians over -runs runs, the ratios medians of each run's ratio, and
// every point prints the machine's load (/proc/loadavg) beside it.
// bench/load.sh builds the binaries and runs this.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/scratch"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

func main() {
	o := options{}
	flag.StringVar(&o.berth, "berth", "", "the berth binary measured")
	flag.StringVar(&o.base, "base", "", "a baseline berth binary measured in the same runs (optional)")
	flag.StringVar(&o.baseName, "base-name", "base", "what to call the baseline in the output")
	clients := flag.String("clients", "1,8,32,64", "numbers of concurrent clients; the first is the baseline of the others")
	dbs := flag.String("databases", "sqlite,postgres-1,postgres-2", "databases: sqlite, postgres-1 (one replica), postgres-2 (two)")
	flag.IntVar(&o.creates, "creates", 500, "creates per point")
	flag.IntVar(&o.runs, "runs", 3, "runs; the figures are their medians")
	flag.StringVar(&o.postgres, "postgres", os.Getenv("BERTH_TEST_POSTGRES"), "a PostgreSQL URL whose database takes a schema per point (PostgreSQL is skipped without one)")
	flag.StringVar(&o.classes, "classes", "examples/sandboxes.yaml", "the sandboxes file the gateways seed classes from")
	flag.Parse()
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(fmt.Errorf("-clients: %q is not a positive number", s))
		}
		o.clients = append(o.clients, n)
	}
	for _, d := range strings.Split(*dbs, ",") {
		d = strings.TrimSpace(d)
		if _, ok := replicasOf[d]; !ok {
			fail(fmt.Errorf("-databases: unknown %q", d))
		}
		if strings.HasPrefix(d, "postgres") && o.postgres == "" {
			fmt.Fprintf(os.Stderr, "bench: %s skipped: no -postgres (BERTH_TEST_POSTGRES)\n", d)
			continue
		}
		o.databases = append(o.databases, d)
	}
	if o.berth == "" {
		fail(errors.New("-berth is required"))
	}
	if err := run(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type options struct {
	berth, base, baseName string
	clients               []int
	databases             []string
	creates, runs         int
	postgres, classes     string
}

// replicasOf is how many gateways share each kind of database.
var replicasOf = map[string]int{"sqlite": 1, "postgres-1": 1, "postgres-2": 2}

// point is what one point measured.
type point struct {
	rate          float64 // creates per second
	p50, p99, max time.Duration
	status        map[int]int // answers other than 201, by status (0: no answer)
}

type key struct {
	db, build string
	clients   int
}

func run(o options) error {
	builds := []string{"this"}
	bins := map[string]string{"this": o.berth}
	if o.base != "" {
		builds = append(builds, o.baseName)
		bins[o.baseName] = o.base
	}
	classes, err := filepath.Abs(o.classes)
	if err != nil {
		return err
	}
	res := map[key][]point{}
	pointLoads := map[key]report.Loads{} // each point's, before and after it
	var loads []float64                  // the 1-minute load after each point
	for r := range o.runs {
		fmt.Fprintf(os.Stderr, "run %d/%d, load %s\n", r+1, o.runs, scratch.LoadAvg())
		order := slices.Clone(builds)
		if r%2 == 1 {
			// Alternate so drift in the machine's load touches both alike.
			slices.Reverse(order)
		}
		for _, db := range o.databases {
			// Each point of one build beside the other's, so the builds
			// see the same load.
			for _, n := range o.clients {
				for _, b := range order {
					k := key{db, b, n}
					l := pointLoads[k]
					l.Sample()
					p, err := measure(bins[b], classes, db, o.postgres, n, o.creates)
					if err != nil {
						return fmt.Errorf("%s, %s, %d clients: %w", db, b, n, err)
					}
					l.Sample()
					pointLoads[k] = l
					res[k] = append(res[k], p)
					if l, err := strconv.ParseFloat(strings.Fields(scratch.LoadAvg() + " ")[0], 64); err == nil {
						loads = append(loads, l)
					}
					fmt.Fprintf(os.Stderr, "  %-10s %-6s %3d clients: %7.1f creates/s, p50 %7.1f ms, p99 %7.1f ms, worst %7.1f ms%s, load %s\n",
						db, b, n, p.rate, ms(p.p50), ms(p.p99), ms(p.max), statusText(p.status), scratch.LoadAvg())
				}
			}
		}
	}
	summarise(o, builds, res, loads)
	return emit(o, builds, res, pointLoads)
}

func summarise(o options, builds []string, res map[key][]point, loads []float64) {
	first := o.clients[0]
	fmt.Printf("creates through the API, %d per point, median of %d runs (fake driver)\n", o.creates, o.runs)
	if len(loads) > 0 {
		fmt.Printf("machine load (1 min) after the points: %.2f to %.2f, median %.2f, on %d cores\n",
			slices.Min(loads), slices.Max(loads), stats.Median(loads), runtime.NumCPU())
	}
	for _, db := range o.databases {
		for _, b := range builds {
			fmt.Printf("\n%s, %s\n", db, b)
			fmt.Printf("%8s %10s %9s %9s %9s %14s %14s %14s %6s %6s\n", "clients", "creates/s", "p50 ms", "p99 ms", "worst ms",
				fmt.Sprintf("rate/%d-client", first), fmt.Sprintf("p50/%d-client", first), fmt.Sprintf("p99/%d-client", first), "500s", "503s")
			for _, n := range o.clients {
				ps, bs := res[key{db, b, n}], res[key{db, b, first}]
				c500, c503 := 0, 0
				for _, p := range ps {
					c500 += p.status[http.StatusInternalServerError]
					c503 += p.status[http.StatusServiceUnavailable]
				}
				fmt.Printf("%8d %10.1f %9.1f %9.1f %9.1f %14.2f %14.2f %14.2f %6d %6d\n", n,
					stats.Median(rates(ps)), ms(stats.Median(p50s(ps))), ms(stats.Median(p99s(ps))), ms(worst(ps)),
					ratio(ps, bs, func(p point) float64 { return p.rate }),
					ratio(ps, bs, func(p point) float64 { return float64(p.p50) }),
					ratio(ps, bs, func(p point) float64 { return float64(p.p99) }), c500, c503)
			}
		}
		if len(builds) < 2 {
			continue
		}
		fmt.Printf("\n%s, %s / %s\n", db, builds[0], builds[1])
		fmt.Printf("%8s %10s %9s %9s\n", "clients", "creates/s", "p50", "p99")
		for _, n := range o.clients {
			ps, bs := res[key{db, builds[0], n}], res[key{db, builds[1], n}]
			fmt.Printf("%8d %10.2f %9.2f %9.2f\n", n,
				ratio(ps, bs, func(p point) float64 { return p.rate }),
				ratio(ps, bs, func(p point) float64 { return float64(p.p50) }),
				ratio(ps, bs, func(p point) float64 { return float64(p.p99) }))
		}
	}
}

// ratio is the median over runs of f(ps[i]) / f(bs[i]): each figure
// against its baseline of the same run.
func ratio(ps, bs []point, f func(point) float64) float64 {
	var rs []float64
	for i := range min(len(ps), len(bs)) {
		rs = append(rs, f(ps[i])/f(bs[i]))
	}
	return stats.Median(rs)
}

// worst is the slowest create of any run.
func worst(ps []point) time.Duration {
	var w time.Duration
	for _, p := range ps {
		w = max(w, p.max)
	}
	return w
}

func rates(ps []point) []float64 {
	var out []float64
	for _, p := range ps {
		out = append(out, p.rate)
	}
	return out
}

func p50s(ps []point) []time.Duration {
	var out []time.Duration
	for _, p := range ps {
		out = append(out, p.p50)
	}
	return out
}

func p99s(ps []point) []time.Duration {
	var out []time.Duration
	for _, p := range ps {
		out = append(out, p.p99)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func statusText(s map[int]int) string {
	if len(s) == 0 {
		return ""
	}
	var parts []string
	for _, code := range slices.Sorted(func(yield func(int) bool) {
		for c := range s {
			if !yield(c) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%d×%d", s[code], code))
	}
	return ", not created: " + strings.Join(parts, " ")
}

// measure starts the point's gateways on a fresh database, makes creates
// sandboxes with n clients spread over them, and stops them.
func measure(bin, classes, db, pgURL string, n, creates int) (point, error) {
	dir, err := os.MkdirTemp("", "berth-load-")
	if err != nil {
		return point{}, err
	}
	defer os.RemoveAll(dir)
	dbURL := filepath.Join(dir, "berth.db")
	if db != "sqlite" {
		u, _, drop, err := scratch.Schema(context.Background(), pgURL, "bench_load_")
		if err != nil {
			return point{}, err
		}
		defer drop()
		dbURL = u
	}
	var gws []*scratch.Gateway
	defer func() {
		for _, g := range gws {
			g.Stop()
		}
	}()
	for i := range replicasOf[db] {
		g, err := scratch.Start(bin, filepath.Join(dir, strconv.Itoa(i)), dbURL,
			"BERTH_SANDBOX_DRIVER=fake", "BERTH_SANDBOXES_FILE="+classes, "BERTH_LOG_LEVEL=warn")
		if err != nil {
			return point{}, err
		}
		gws = append(gws, g)
	}
	key, err := gws[0].Bootstrap()
	if err != nil {
		return point{}, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 2 * time.Minute}
	ctx := context.Background()
	var (
		next   atomic.Int64
		lat    = make([]time.Duration, creates)
		ok     = make([]bool, creates)
		mu     sync.Mutex
		status = map[int]int{}
		wg     sync.WaitGroup
	)
	began := time.Now()
	for c := range n {
		cl := client.New(gws[c%len(gws)].URL, key, hc)
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(creates) {
					return
				}
				start := time.Now()
				_, err := cl.CreateSandbox(ctx, api.CreateSandbox{Name: fmt.Sprintf("load-%d", i), Class: "standard", SSHKeys: []string{sshKey}})
				lat[i], ok[i] = time.Since(start), err == nil
				if err != nil {
					code := 0
					if e, is := errors.AsType[*api.Error](err); is {
						code = e.Status
					}
					mu.Lock()
					status[code]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	var done []time.Duration
	for i, d := range lat {
		if ok[i] {
			done = append(done, d)
		}
	}
	if len(done) == 0 {
		return point{}, fmt.Errorf("no create succeeded: %v", status)
	}
	for _, g := range gws {
		log := g.Output()
		if n := strings.Count(log, `"level":"ERROR"`); n > 0 {
			fmt.Fprintf(os.Stderr, "  (gateway %s logged %d errors; first: %s)\n", g.URL, n, firstError(log))
		}
	}
	return point{rate: float64(len(done)) / took.Seconds(), p50: stats.Percentile(done, 50), p99: stats.Percentile(done, 99),
		max: slices.Max(done), status: status}, nil
}

func firstError(log string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, `"level":"ERROR"`) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// sshKey is the sandboxes' public key; the fake driver never uses it.
const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl load"

// emit hands bench/all this build's figures: creates/s at each number
// of clients, each against its baseline (the other build's with -base,
// else the first number of clients'), the p99 at the most clients against
// the first's, and the answers 500 (which must be none), per database.
func emit(o options, builds []string, res map[key][]point, loads map[key]report.Loads) error {
	this, first, most := builds[0], o.clients[0], slices.Max(o.clients)
	var errs []error
	for _, db := range o.databases {
		var dbLoads report.Loads
		c500 := 0
		for _, n := range o.clients {
			ps := res[key{db, this, n}]
			f := report.Figure{Bench: "load", Name: fmt.Sprintf("creates/s, %s, %d client%s", db, n, plural(n)),
				Value: fmt.Sprintf("%.0f /s", stats.Median(rates(ps))), N: o.runs, Load: loads[key{db, this, n}].String()}
			rate := func(p point) float64 { return p.rate }
			switch {
			case len(builds) > 1:
				bs := res[key{db, builds[1], n}]
				f.Baseline = fmt.Sprintf("%.0f /s (%s)", stats.Median(rates(bs)), builds[1])
				f.Ratio = ratio(ps, bs, rate)
			case n != first:
				bs := res[key{db, this, first}]
				f.Baseline = fmt.Sprintf("%.0f /s (%d client%s)", stats.Median(rates(bs)), first, plural(first))
				f.Ratio = ratio(ps, bs, rate)
			}
			errs = append(errs, report.Emit(f))
			for _, p := range ps {
				c500 += p.status[http.StatusInternalServerError]
			}
			dbLoads = append(dbLoads, loads[key{db, this, n}]...)
		}
		if most != first {
			ps, bs := res[key{db, this, most}], res[key{db, this, first}]
			errs = append(errs, report.Emit(report.Figure{Bench: "load", Name: fmt.Sprintf("create p99, %s, %d clients", db, most),
				Value:    fmt.Sprintf("%.1f ms", ms(stats.Median(p99s(ps)))),
				Baseline: fmt.Sprintf("%.1f ms (%d client%s)", ms(stats.Median(p99s(bs))), first, plural(first)),
				Ratio:    ratio(ps, bs, func(p point) float64 { return float64(p.p99) }), N: o.runs, Load: loads[key{db, this, most}].String()}))
		}
		errs = append(errs, report.Emit(report.Figure{Bench: "load", Name: fmt.Sprintf("answers 500, %s", db),
			Value: fmt.Sprint(c500), Goal: "0", N: o.runs, Load: dbLoads.String()}))
	}
	return errors.Join(errs...)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
