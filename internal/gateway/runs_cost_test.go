package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// TestRunCostsSideBySide: an agent run whose model calls really go through
// the gateway's Anthropic route (to the vendor stand-in and to the scripted
// provider), while the agent prints a real CLI's captured stream. The
// run's answer in the API carries the agent's own cost and the gateway's
// metered one, and says where they differ and why: OpenCode's title call,
// which the gateway metered and OpenCode leaves out of its totals, found
// among the calls by its tokens; Claude Code's own list prices for
// claude-sonnet-4-5 against what the deployment charges for the model that
// answered.
func TestRunCostsSideBySide(t *testing.T) {
	m := newModelWorld(t, func(c *worldConfig) { c.runs, c.runModel = true, claudeModel })
	m.allowRepos(t, "acme")
	for _, tt := range []struct {
		runner, stream, model string
		calls                 int
		cost                  float64 // the gateway's, at the catalog's price
		causes                []string
		says                  []string
	}{
		{"opencode", "opencode-tool-anthropic", claudeModel, 3, 3 * 0.00064275, []string{"uncounted_calls"},
			[]string{"1 model call of the 3 the gateway metered (120 in, 17 out, 30 cache read, 5 cache write on claude-test, $0.000643) is not in the agent's totals",
				"OpenCode does not count the call that titles its session"}},
		{"claude-code", "claude-tool", scriptedModel, 2, 2 * 0.00016325, []string{"price_table"},
			[]string{"the agent's $0.001286 is the CLI's own (its cost basis: list), at the vendor's list price for claude-sonnet-4-5 ($3 input, $15 output, $0.30 cache read, $3.75 cache write per million tokens)",
				"the gateway charged this deployment's price for scripted-model ($1 input, $2 output, $0.10 cache read, $1.25 cache write per million tokens): $0.000327"}},
	} {
		t.Run(tt.runner, func(t *testing.T) {
			lines := runnertest.Stream(t, tt.stream)
			m.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
				for range tt.calls {
					body := `{"model":"` + tt.model + `","max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`
					req, err := http.NewRequest(http.MethodPost, spec.Env["BERTH_BASE_URL"]+"/v1/messages", bytes.NewReader([]byte(body)))
					if err != nil {
						t.Error(err)
						continue
					}
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Api-Key", spec.Env["BERTH_API_KEY"])
					req.Header.Set("X-Berth-Session", spec.Env["BERTH_SESSION"])
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("model call: %s", resp.Status)
					}
				}
				return lines, 0
			})
			sb, err := m.owner.CreateSandbox(t.Context(), api.CreateSandbox{Name: "cost-" + tt.runner, Purpose: "agent", Repo: "acme/app", Task: "fix it", Runner: tt.runner})
			if err != nil {
				t.Fatal(err)
			}
			run := finishedRun(t, m.world, sb.ID)
			if run.CostUSD == nil || run.CostSource != "native" || run.Metered == nil || run.Metered.Requests != tt.calls {
				t.Fatalf("the agent's cost %v (%s), metered %+v: want both", run.CostUSD, run.CostSource, run.Metered)
			}
			if got := run.Metered.CostUSD; got < tt.cost*0.999999 || got > tt.cost*1.000001 {
				t.Errorf("metered cost $%.9f, want $%.9f", got, tt.cost)
			}
			d := run.Difference
			if d == nil || !d.Cost {
				t.Fatalf("difference %+v, want the cost flagged", d)
			}
			var kinds []string
			var text strings.Builder
			text.WriteString(d.Summary + "\n")
			for _, c := range d.Causes {
				kinds = append(kinds, c.Kind)
				text.WriteString(c.Message + "\n")
			}
			if strings.Join(kinds, " ") != strings.Join(tt.causes, " ") {
				t.Errorf("causes %v, want %v:\n%s", kinds, tt.causes, &text)
			}
			for _, s := range tt.says {
				if !strings.Contains(text.String(), s) {
					t.Errorf("the difference does not say %q:\n%s", s, &text)
				}
			}
			if tt.runner == "opencode" {
				c := d.Causes[0]
				if c.Requests != 1 || c.Usage == nil || c.Usage.Input != 120 || c.CostUSD == nil || *c.CostUSD <= 0 {
					t.Errorf("the uncounted call: %d requests, %+v, %v", c.Requests, c.Usage, c.CostUSD)
				}
			}
		})
	}
}

// finishedRun waits for an agent sandbox's run to end and returns it as
// the API answers it.
func finishedRun(t *testing.T, w *world, id string) api.Run {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sb, err := w.owner.Sandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Run != nil && sb.Run.State != "running" && sb.State != "running" && sb.State != "starting" {
			if sb.Run.State != "succeeded" {
				t.Fatalf("run %s: %s", sb.Run.State, sb.Run.Error)
			}
			return *sb.Run
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
	}
}
