// Command budget measures inference budgets on two gateway replicas that
// share a PostgreSQL database (SPEC S14): how far what they charge passes
// a budget under back-to-back bursts of requests, and what holding a
// budget adds to a model request's latency.
//
//	go run ./bench/budget -postgres postgres://… [-berth BINARY] [-trials 5] [-n 400]
//
// It builds berth (or runs -berth: an older build, to compare), starts two
// `berth serve` on a schema of its own in the database (dropped at the
// end), each serving the scripted model server in-process, and sends
// Anthropic Messages requests to both.
//
// What is measured:
//   - overshoot: each trial is an organisation of its own whose budget
//     pays for 200 answers at their metered cost; bursts of -burst
//     requests at once, split between the replicas, follow each other
//     until one is refused whole (402). Charged is the sum of the
//     records in the database; the figure is (charged - budget) / budget.
//     Every request holds its worst case while in flight and costs less,
//     so an exact ledger charges no more than the budget: 0 %.
//   - added latency: the same request, alternating between an
//     organisation with a budget and one without (the baseline, in the
//     same run), sent by 1 client and by 8 at once; medians of -n each,
//     their ratio and difference. Twice: far from the budget's end (most
//     requests admitted in the replica's memory), and at its end (a
//     budget a few worst cases big, on a model whose answers fail and
//     cost nothing, so it never runs out: every request asks the
//     database).
//
// The machine is shared: /proc/loadavg is printed before and after.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/scratch"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

func main() {
	pg := flag.String("postgres", os.Getenv("BERTH_TEST_POSTGRES"), "a PostgreSQL URL whose database the bench may make a schema in (default $BERTH_TEST_POSTGRES)")
	berth := flag.String("berth", "", "the berth binary to run (default: built from this tree)")
	trials := flag.Int("trials", 5, "overshoot trials")
	burst := flag.Int("burst", 32, "requests in a burst, split between the replicas")
	n := flag.Int("n", 400, "requests of each kind per latency median")
	flag.Parse()
	if *pg == "" || *trials < 1 || *burst < 2 || *n < 2 {
		fmt.Fprintln(os.Stderr, "bench: -postgres (or BERTH_TEST_POSTGRES) is required; -trials ≥ 1, -burst ≥ 2, -n ≥ 2")
		os.Exit(2)
	}
	if err := run(*pg, *berth, *trials, *burst, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// inferenceFile serves two models: the scripted model server's, which
// answers, and one whose provider is a closed port on loopback, so its
// requests fail at once and cost nothing.
const inferenceFile = `providers:
  - {name: scripted, kind: scripted, script: text}
  - {name: closed, kind: openai, url: "http://127.0.0.1:9/v1", credential_env: BENCH_CLOSED_KEY}
models:
  - {id: answers, provider: scripted, max_tokens: 64000, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
  - {id: fails, provider: closed, max_tokens: 64000, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
`

func run(pgURL, berth string, trials, burst, n int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "berth-bench-budget-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if berth == "" {
		if berth, err = build(dir); err != nil {
			return err
		}
	}
	dbURL, db, drop, err := scratch.Schema(ctx, pgURL, "bench_budget_")
	if err != nil {
		return err
	}
	defer drop()
	file := filepath.Join(dir, "inference.yaml")
	if err := os.WriteFile(file, []byte(inferenceFile), 0o644); err != nil {
		return err
	}
	var reps [2]*scratch.Gateway
	for i := range reps {
		if reps[i], err = scratch.Start(berth, filepath.Join(dir, fmt.Sprint(i)), dbURL,
			"BERTH_INFERENCE_FILE="+file, "BERTH_LOG_LEVEL=error", "BENCH_CLOSED_KEY=none"); err != nil {
			return err
		}
		defer reps[i].Stop()
	}
	op, err := reps[0].Bootstrap()
	if err != nil {
		return err
	}
	b := &bench{db: db, reps: reps, op: client.New(reps[0].URL, op, nil),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}}
	fmt.Printf("inference budgets, two replicas of %s on PostgreSQL; loadavg %s\n", berth, scratch.LoadAvg())
	var overLoads report.Loads
	overLoads.Sample()

	// One answer's metered cost, and a request's reservation (what the
	// refusal says it may cost), in an organisation of their own.
	probe, err := b.org(ctx, "probe", nil)
	if err != nil {
		return err
	}
	if code, err := b.send(0, probe.key, "answers"); err != nil || code != 200 {
		return fmt.Errorf("probe: %d %v", code, err)
	}
	cost, err := b.charged(ctx, probe.id)
	if err != nil {
		return err
	}
	worst, err := b.reservation(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("a request: charged $%.6f, reserved $%.6f (%.1f× its cost)\n", cost, worst, worst/cost)

	var overs []float64
	admitted := 0
	for i := range trials {
		budget := 200 * cost
		o, err := b.org(ctx, fmt.Sprintf("trial-%d", i), &budget)
		if err != nil {
			return err
		}
		ok, bursts, err := b.untilRefused(o.key, burst)
		if err != nil {
			return err
		}
		got, err := b.charged(ctx, o.id)
		if err != nil {
			return err
		}
		overs = append(overs, 100*(got-budget)/budget)
		admitted += ok
		overLoads.Sample()
		fmt.Fprintf(os.Stderr, "trial %d: %d admitted in %d bursts, charged $%.6f of $%.6f\n", i+1, ok, bursts, got, budget)
	}
	fmt.Printf("overshoot, %d trials of back-to-back bursts of %d until one is refused whole: median %+.1f%%, worst %+.1f%% (%d admitted a trial)\n",
		trials, burst, stats.Median(overs), maxOf(overs), admitted/max(trials, 1))
	if err := report.Emit(report.Figure{Bench: "budget", Name: fmt.Sprintf("budget overshoot, two replicas, bursts of %d", burst),
		Value: fmt.Sprintf("%+.1f %% (worst %+.1f %%)", stats.Median(overs), maxOf(overs)), Goal: "≤ 0 %", N: trials, Load: overLoads.String()}); err != nil {
		return err
	}

	big := 1e6
	far, err := b.org(ctx, "far", &big)
	if err != nil {
		return err
	}
	free, err := b.org(ctx, "free", nil)
	if err != nil {
		return err
	}
	for _, clients := range []int{1, 8} {
		// At its end: room for the clients' requests in flight and one and
		// a half more, on the model whose requests cost nothing.
		edge := (float64(clients) + 1.5) * worst
		end, err := b.org(ctx, fmt.Sprintf("end-%d", clients), &edge)
		if err != nil {
			return err
		}
		for _, c := range []struct {
			name, model string
			with        org
			wantCode    int
		}{
			{"far from its end", "answers", far, http.StatusOK},
			{"at its end (room for the requests in flight and 1.5 more)", "fails", end, http.StatusBadGateway},
		} {
			var loads report.Loads
			loads.Sample()
			l, err := b.latency(c.with.key, free.key, c.model, c.wantCode, clients, n)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			loads.Sample()
			refused := ""
			if l.refused > 0 {
				refused = fmt.Sprintf("; %d of %d refused", l.refused, l.sent)
			}
			fmt.Printf("added latency, %d client(s), %s: median %.2f ms vs %.2f ms without a budget: ×%.2f (%+.3f ms)%s\n",
				clients, c.name, ms(l.with), ms(l.without), float64(l.with)/float64(l.without), ms(l.with)-ms(l.without), refused)
			where, _, _ := strings.Cut(c.name, " (")
			if err := report.Emit(report.Figure{Bench: "budget", Name: fmt.Sprintf("model request with a budget %s, %d client(s)", where, clients),
				Value: fmt.Sprintf("%.2f ms (%+.2f)", ms(l.with), ms(l.with)-ms(l.without)), Baseline: fmt.Sprintf("%.2f ms (no budget)", ms(l.without)),
				Ratio: float64(l.with) / float64(l.without), N: n, Load: loads.String()}); err != nil {
				return err
			}
		}
	}
	fmt.Printf("loadavg %s\n", scratch.LoadAvg())
	return nil
}

type bench struct {
	db   *sql.DB
	reps [2]*scratch.Gateway
	op   *client.Client
	hc   *http.Client
}

// org is an organisation of the bench's, with an administrator's key; its
// default project, which that key's requests are charged to, has budget.
type org struct{ id, key string }

func (b *bench) org(ctx context.Context, name string, budget *float64) (org, error) {
	o, err := b.op.CreateOrg(ctx, api.CreateOrganisation{Name: name})
	if err != nil {
		return org{}, err
	}
	u, err := b.op.CreateUser(ctx, o.ID, api.CreateUser{Name: "bench", Role: "admin"})
	if err != nil {
		return org{}, err
	}
	k, err := b.op.CreateKey(ctx, api.CreateKey{User: u.ID, Name: "bench"})
	if err != nil {
		return org{}, err
	}
	if budget != nil {
		admin := client.New(b.reps[0].URL, k.Secret, nil)
		prjs, err := admin.Projects(ctx, o.ID)
		if err != nil || len(prjs) == 0 {
			return org{}, fmt.Errorf("projects of %s: %v", name, err)
		}
		if _, err := admin.SetInference(ctx, o.ID, prjs[0].ID, api.InferenceSettings{BudgetUSD: budget}); err != nil {
			return org{}, err
		}
	}
	return org{id: o.ID, key: k.Secret}, nil
}

// send sends one request to a replica and reads the answer whole: an
// Anthropic Message, or a Chat Completion to the model that fails (its
// provider speaks OpenAI's API).
func (b *bench) send(rep int, key, model string) (int, error) {
	body := `{"model":"` + model + `","max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`
	path := "/v1/messages"
	if model == "fails" {
		path = "/v1/chat/completions"
	}
	req, err := http.NewRequest(http.MethodPost, b.reps[rep].URL+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", key)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// untilRefused sends bursts until one is refused whole.
func (b *bench) untilRefused(key string, size int) (admitted, bursts int, err error) {
	for bursts < 1000 {
		bursts++
		var (
			mu   sync.Mutex
			ok   int
			errs []error
			wg   sync.WaitGroup
		)
		for i := range size {
			wg.Go(func() {
				code, err := b.send(i%2, key, "answers")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case code == 200:
					ok++
				case code != 402:
					errs = append(errs, fmt.Errorf("status %d", code))
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return admitted, bursts, errors.Join(errs...)
		}
		if ok == 0 {
			return admitted, bursts, nil
		}
		admitted += ok
	}
	return admitted, bursts, errors.New("the budget never ran out")
}

// charged sums what the database recorded against an organisation, once
// the answered requests have all settled (a gateway records an answer
// after its client has it whole): three reads in a row alike.
func (b *bench) charged(ctx context.Context, orgID string) (float64, error) {
	last, same := -1.0, 0
	for deadline := time.Now().Add(10 * time.Second); same < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 0, errors.New("the spend did not settle in 10s")
		}
		var c float64
		if err := b.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM inference_usage WHERE org_id = $1`, orgID).Scan(&c); err != nil {
			return 0, err
		}
		if c == last && c > 0 {
			same++
		} else {
			last, same = c, 0
		}
	}
	return last, nil
}

var mayCost = regexp.MustCompile(`may cost up to \$([0-9.]+)`)

// reservation is what a request reserves, as a refusal says it.
func (b *bench) reservation(ctx context.Context) (float64, error) {
	tiny := 1e-9
	o, err := b.org(ctx, "tiny", &tiny)
	if err != nil {
		return 0, err
	}
	body := `{"model":"answers","max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`
	req, _ := http.NewRequest(http.MethodPost, b.reps[0].URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", o.key)
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	m := mayCost.FindSubmatch(msg)
	if resp.StatusCode != 402 || m == nil {
		return 0, fmt.Errorf("a request over a budget of $%v: %d %s", tiny, resp.StatusCode, msg)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// latencies are the medians of requests with a budget and without, and
// how many of those with one were refused over it (402).
type latencies struct {
	with, without time.Duration
	refused, sent int
}

// latency sends n requests with each key, alternating, from clients at
// once, to both replicas in turn, and returns the medians.
func (b *bench) latency(with, without, model string, code, clients, n int) (latencies, error) {
	var (
		mu     sync.Mutex
		ds     [2][]time.Duration
		errs   []error
		wg     sync.WaitGroup
		perCli = max(n/clients, 1)
		out    latencies
	)
	for c := range clients {
		wg.Go(func() {
			for i := range 2 * perCli {
				k, key := i%2, with
				if k == 1 {
					key = without
				}
				start := time.Now()
				got, err := b.send((i/2+c)%2, key, model)
				d := time.Since(start)
				mu.Lock()
				if k == 0 {
					out.sent++
				}
				switch {
				case err != nil:
					errs = append(errs, err)
				case k == 0 && got == http.StatusPaymentRequired:
					out.refused++ // a refusal is quicker: left out of the median
				case got != code:
					errs = append(errs, fmt.Errorf("status %d, want %d", got, code))
				case i >= 2: // the first of each warms its connection
					ds[k] = append(ds[k], d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return out, errs[0]
	}
	if len(ds[0]) == 0 || len(ds[1]) == 0 {
		return out, errors.New("no request answered")
	}
	out.with, out.without = stats.Median(ds[0]), stats.Median(ds[1])
	return out, nil
}

// build builds berth from the tree the bench is in.
func build(dir string) (string, error) {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, "berth")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/berth")
	cmd.Dir, cmd.Stderr = filepath.Dir(strings.TrimSpace(string(mod))), os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build berth: %w", err)
	}
	return bin, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func maxOf(vs []float64) float64 {
	m := vs[0]
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}
