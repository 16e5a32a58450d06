package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

// budgetYAML serves the scripted model server's text answer, at a price.
const budgetYAML = `providers:
  - {name: scripted, kind: scripted, script: text}
models:
  - {id: scripted, provider: scripted, max_tokens: 64000, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
`

// TestBudgetAcrossReplicasOnPostgres: two gateways on one PostgreSQL
// database, back-to-back bursts of model requests split between them
// against a budget that pays for 100 answers, until a burst is refused
// whole. What is recorded never passes the budget: every request held its
// worst case, more than it cost, while in flight. (Each gateway keeping
// its own reservations charged 50 % over in this test, 82 % in
// bench/budget.)
func TestBudgetAcrossReplicasOnPostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	file := filepath.Join(t.TempDir(), "inference.yaml")
	if err := os.WriteFile(file, []byte(budgetYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, url, nil, "BERTH_INFERENCE_FILE="+file)
	b := startReplica(t, url, a, "BERTH_INFERENCE_FILE="+file)
	ctx := t.Context()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	who, err := a.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	org, month := who.Organisation.ID, time.Now().UTC()
	month = time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
	send := func(g *gateway) int {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/messages",
			strings.NewReader(`{"model":"scripted","max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", g.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// What is recorded once the requests answered have settled (a
	// gateway records an answer after its client has it whole).
	recorded := func() float64 {
		t.Helper()
		last, same := -1.0, 0
		for deadline := time.Now().Add(10 * time.Second); same < 3; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the spend did not settle")
			}
			v, err := st.InferenceSpend(ctx, org, "", month)
			if err != nil {
				t.Fatal(err)
			}
			if v == last && v > 0 {
				same++
			} else {
				last, same = v, 0
			}
		}
		return last
	}
	// One answer, without a budget, says what an answer costs.
	if code := send(a); code != 200 {
		t.Fatalf("a request without a budget: %d", code)
	}
	cost := recorded()
	budget := cost + 100*cost
	prjs, err := a.operator.Projects(ctx, org)
	if err != nil || len(prjs) != 1 {
		t.Fatalf("projects: %v, %v", prjs, err)
	}
	if _, err := a.operator.SetInference(ctx, org, prjs[0].ID, api.InferenceSettings{BudgetUSD: &budget}); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 200 {
		var (
			mu sync.Mutex
			ok int
			wg sync.WaitGroup
		)
		for i := range 32 {
			wg.Go(func() {
				switch code := send([]*gateway{a, b}[i%2]); code {
				case 200:
					mu.Lock()
					ok++
					mu.Unlock()
				case 402:
				default:
					t.Errorf("status %d", code)
				}
			})
		}
		wg.Wait()
		if admitted += ok; ok == 0 || t.Failed() {
			break
		}
	}
	charged := recorded()
	if charged > budget*(1+1e-12) || charged < budget/2 {
		t.Errorf("%d answers charged $%.6f against a budget of $%.6f (%+.1f%%); want no more than it, and most of it used",
			admitted, charged, budget, 100*(charged-budget)/budget)
	}
}
