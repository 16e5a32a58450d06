package gateway_test

import (
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/usage"
)

const usageClasses = `sandboxes:
  - name: small
    image: localhost/berth-sandbox:1
    isolation: standard
    cpu: "1"
  - name: big
    image: localhost/berth-sandbox:1
    isolation: standard
    cpu: "4"
  - name: tiny
    image: localhost/berth-sandbox:1
    isolation: standard
    cpu: 500m
`

// running creates a sandbox as c and waits until it runs.
func (w *world) running(t *testing.T, c *client.Client, name, class, project string) api.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Class: class, Project: project, SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return w.waitState(t, c, sb.ID, "running")
}

func (w *world) waitState(t *testing.T, c *client.Client, id string, want api.State) api.Sandbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sb, err := c.Sandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == want {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %s, want %s", id, sb.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUsageReportMatchesAHandComputedFixture runs sandboxes of three
// classes for three people in two projects, and one in another
// organisation, on a controlled clock, and checks every report against
// numbers worked out by hand. Times are from t0; the report is at t0+2h.
//
//	sandbox  owner  class (cores)  project  runs                          seconds  core-s  live
//	old      alice  small (1)      default  t0-40d … t0-40d+1h             3600     3600   no   (before the window)
//	a1       alice  small (1)      default  t0…t0+30m, t0+90m…t0+2h       3600     3600   yes
//	b1       bob    small (1)      default  t0…t0+2h                      7200     7200   yes
//	t1       bob    tiny (0.5)     default  t0+1h…t0+2h                   3600     1800   yes
//	m1       ada    big (4)        ml       t0…t0+1h (terminated)         3600    14400   no
//	o1       sam    small (1)      other's  t0…t0+2h                      7200     7200   yes
func TestUsageReportMatchesAHandComputedFixture(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clk := fakeclock.New(t0.Add(-40 * 24 * time.Hour))
	w := newWorld(t, func(c *worldConfig) { c.now, c.template = clk.Now, usageClasses })
	ctx := t.Context()
	if _, err := w.admin.CreateProject(ctx, "acme", "ml"); err != nil {
		t.Fatal(err)
	}
	old := w.running(t, w.owner, "old", "small", "")
	clk.Advance(time.Hour)
	if _, err := w.owner.Terminate(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(40*24*time.Hour - time.Hour) // t0

	a1 := w.running(t, w.owner, "a1", "small", "")
	w.running(t, w.member, "b1", "small", "")
	m1 := w.running(t, w.admin, "m1", "big", "ml")
	w.running(t, w.foreign, "o1", "small", "")
	clk.Advance(30 * time.Minute)
	if _, err := w.owner.Suspend(ctx, a1.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Minute) // t0+1h
	if _, err := w.admin.Terminate(ctx, m1.ID); err != nil {
		t.Fatal(err)
	}
	w.running(t, w.member, "t1", "tiny", "")
	clk.Advance(30 * time.Minute) // t0+90m
	if _, err := w.owner.Resume(ctx, a1.ID); err != nil {
		t.Fatal(err)
	}
	w.waitState(t, w.owner, a1.ID, "running")
	clk.Advance(30 * time.Minute) // t0+2h

	ids := w.names(t)
	acme, other := ids["org acme"], ids["org other"]
	row := func(org, orgName, id, name string, n, live int, secs int64, cs float64) api.UsageRow {
		return api.UsageRow{Organisation: org, OrganisationName: orgName, ID: id, Name: name, Sandboxes: n, Live: live, RunningSeconds: secs, CoreSeconds: cs}
	}
	total := func(n, live int, secs int64, cs float64) api.UsageRow { return row("", "", "", "", n, live, secs, cs) }
	acmeRow := func(id, name string, n, live int, secs int64, cs float64) api.UsageRow {
		return row(acme, "acme", id, name, n, live, secs, cs)
	}
	tests := []struct {
		name string
		c    *client.Client
		o    client.UsageOptions
		want api.UsageReport
	}{
		{"by project", w.admin, client.UsageOptions{By: "project"}, api.UsageReport{By: "project", Organisation: acme, Rows: []api.UsageRow{
			acmeRow(ids["project default"], "default", 3, 3, 14400, 12600),
			acmeRow(ids["project ml"], "ml", 1, 0, 3600, 14400),
		}, Total: total(4, 3, 18000, 27000)}},
		{"by user", w.admin, client.UsageOptions{By: "user"}, api.UsageReport{By: "user", Organisation: acme, Rows: []api.UsageRow{
			acmeRow(ids["user ada"], "ada", 1, 0, 3600, 14400),
			acmeRow(ids["user alice"], "alice", 1, 1, 3600, 3600),
			acmeRow(ids["user bob"], "bob", 2, 2, 10800, 9000),
		}, Total: total(4, 3, 18000, 27000)}},
		{"by class", w.admin, client.UsageOptions{By: "class"}, api.UsageReport{By: "class", Organisation: acme, Rows: []api.UsageRow{
			acmeRow("big", "big", 1, 0, 3600, 14400),
			acmeRow("small", "small", 2, 2, 10800, 10800),
			acmeRow("tiny", "tiny", 1, 1, 3600, 1800),
		}, Total: total(4, 3, 18000, 27000)}},
		{"41 days back counts old too", w.admin, client.UsageOptions{By: "user", Since: "41d"}, api.UsageReport{By: "user", Organisation: acme, Rows: []api.UsageRow{
			acmeRow(ids["user ada"], "ada", 1, 0, 3600, 14400),
			acmeRow(ids["user alice"], "alice", 2, 1, 7200, 7200),
			acmeRow(ids["user bob"], "bob", 2, 2, 10800, 9000),
		}, Total: total(5, 3, 21600, 30600)}},
		{"an operator sees every organisation", w.operator, client.UsageOptions{}, api.UsageReport{By: "project", Rows: []api.UsageRow{
			acmeRow(ids["project default"], "default", 3, 3, 14400, 12600),
			acmeRow(ids["project ml"], "ml", 1, 0, 3600, 14400),
			row(other, "other", ids["project other/default"], "default", 1, 1, 7200, 7200),
		}, Total: total(5, 4, 25200, 34200)}},
		{"an operator names one", w.operator, client.UsageOptions{By: "class", Org: "other"}, api.UsageReport{By: "class", Organisation: other, Rows: []api.UsageRow{
			row(other, "other", "small", "small", 1, 1, 7200, 7200),
		}, Total: total(1, 1, 7200, 7200)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.Usage(ctx, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			window := 30 * 24 * time.Hour
			if tt.o.Since == "41d" {
				window = 41 * 24 * time.Hour
			}
			if !got.Until.Equal(clk.Now()) || !got.Since.Equal(clk.Now().Add(-window)) {
				t.Errorf("window %v … %v, want the %v up to now", got.Since, got.Until, window)
			}
			got.Since, got.Until = time.Time{}, time.Time{}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}

	// Members may know reports exist but not read them; another
	// organisation's administrator reads only theirs, and none of acme's.
	var e *api.Error
	if _, err := w.owner.Usage(ctx, client.UsageOptions{}); !errors.As(err, &e) || e.Status != http.StatusForbidden || e.Code != api.CodeForbidden {
		t.Errorf("a member's report: %v, want 403 forbidden", err)
	}
	olga := w.user(t, "other", "olga", "admin")
	rep, err := olga.Usage(ctx, client.UsageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Organisation != other || rep.Total.Sandboxes != 1 {
		t.Errorf("another organisation's administrator sees %+v, want only their own one sandbox", rep)
	}
	if _, err := olga.Usage(ctx, client.UsageOptions{Org: "acme"}); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("another organisation's administrator asking for acme's: %v, want 404", err)
	}
	// The window reaches no further back than the retention.
	if _, err := w.admin.Usage(ctx, client.UsageOptions{Since: "91d"}); !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != "since" {
		t.Errorf("--since past the retention: %v, want 400 on since", err)
	}
	if _, err := w.admin.Usage(ctx, client.UsageOptions{By: "colour"}); !errors.As(err, &e) || e.Field != "by" {
		t.Errorf("--by colour: %v, want 400 on by", err)
	}
}

// names maps "org NAME", "project NAME" (acme's; "project ORG/NAME" for
// other organisations') and "user NAME" to their ids.
func (w *world) names(t *testing.T) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	orgs, err := w.operator.Orgs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orgs {
		out["org "+o.Name] = o.ID
		prefix := ""
		if o.Name != "acme" {
			prefix = o.Name + "/"
		}
		prjs, err := w.operator.Projects(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range prjs {
			out["project "+prefix+p.Name] = p.ID
		}
		users, err := w.operator.Users(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			out["user "+u.Name] = u.ID
		}
	}
	return out
}

// TestUsageCostInOneNumber (issue 23): with machine time priced, each row
// and the total give the machine's cost (core-seconds at the price per
// core-hour) and the whole with the models'; unpriced, neither.
func TestUsageCostInOneNumber(t *testing.T) {
	for _, price := range []usage.CoreHour{0, 3600} {
		w := newWorld(t, func(c *worldConfig) { c.options = func(o *gateway.Options) { o.CoreHour = price } })
		sb := w.create(t, w.owner, "dev")
		w.waitState(t, w.owner, sb.ID, "running")
		if _, err := w.owner.Terminate(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		rep, err := w.admin.Usage(t.Context(), client.UsageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range append(rep.Rows, rep.Total) {
			if !price.Priced() {
				if r.MachineCostUSD != nil || r.CostUSD != nil {
					t.Errorf("unpriced: row %+v has a machine cost", r)
				}
				continue
			}
			if r.MachineCostUSD == nil || r.CostUSD == nil || *r.MachineCostUSD != price.Cost(r.CoreSeconds) ||
				math.Abs(*r.CostUSD-(*r.MachineCostUSD+r.ModelCostUSD)) > 1e-9 {
				t.Errorf("price %v: row %s: %v core-seconds, machine %v, model %v, cost %v", price, r.Name, r.CoreSeconds, r.MachineCostUSD, r.ModelCostUSD, r.CostUSD)
			}
		}
		if price.Priced() && (rep.Total.CoreSeconds == 0 || *rep.Total.MachineCostUSD == 0) {
			t.Errorf("the sandbox ran for %v core-seconds, costing %v: want some", rep.Total.CoreSeconds, *rep.Total.MachineCostUSD)
		}
	}
}
