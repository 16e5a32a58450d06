package usage_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/usage"
)

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk test@example"

// fixture is the real store and services on the fake driver and a clock
// the test moves, with organisation acme's operator, administrator and a
// member.
type fixture struct {
	*fakeclock.Clock
	st        *store.Store
	sandboxes *sandbox.Service
	classes   *class.Service
	usage     *usage.Service
	accounts  *account.Service
	operator  account.Principal
	admin     account.Principal
	alice     account.Principal
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl, err := class.ParseFile(strings.NewReader("sandboxes:\n  - name: quad\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    cpu: \"4\"\n    default_ttl: 4h\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{Clock: fakeclock.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), st: st}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	accounts := account.NewService(st, st, f.Now, func(ctx context.Context, org string) error { return f.classes.Seed(ctx, org) }, st, log)
	f.accounts = accounts
	f.sandboxes = sandbox.NewService(st, fake.New(), accounts, sandbox.Config{
		Driver: "fake", Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""},
	}, log, f.Now)
	f.classes = class.NewService(st, accounts, nil, class.Config{Template: tmpl}, log, f.Now)
	f.usage = usage.NewService(st, accounts, f.sandboxes, 90*24*time.Hour, f.Now)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.sandboxes.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })

	_, _, op, _, err := accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	f.operator = account.Principal{User: op}
	for _, u := range []struct {
		p    *account.Principal
		name string
		role account.Role
	}{{&f.admin, "ada", account.RoleAdmin}, {&f.alice, "alice", account.RoleMember}} {
		usr, err := accounts.CreateUser(ctx, f.operator, "acme", u.name, "", u.role)
		if err != nil {
			t.Fatal(err)
		}
		*u.p = account.Principal{User: usr}
	}
	return f
}

// running creates a sandbox of alice's and waits for it to run.
func (f *fixture) running(t *testing.T, name string) sandbox.ID {
	t.Helper()
	sb, err := f.sandboxes.Create(t.Context(), f.alice, sandbox.CreateRequest{Name: name, SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRunning(t, sb.ID)
	return sb.ID
}

func (f *fixture) waitRunning(t *testing.T, id sandbox.ID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sb, err := f.st.GetSandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == sandbox.StateRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want running", sb.Name, sb.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// total reads the administrator's report by class and returns its total.
func (f *fixture) total(t *testing.T, since string) usage.Row {
	t.Helper()
	rep, err := f.usage.Report(t.Context(), f.admin, usage.Query{By: "class", Since: since})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Total
}

// TestCoreSecondsFollowTheLifecycle: start → suspend → resume → expiry on
// a 4-core class, read through the report at each step, to the second.
func TestCoreSecondsFollowTheLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	id := f.running(t, "dev") // 09:00, expires 13:00
	check := func(step string, secs float64, live int) {
		t.Helper()
		got := f.total(t, "")
		if got.Running != secs || got.CoreSeconds != 4*secs || got.Live != live || got.Sandboxes != 1 {
			t.Errorf("%s: %v s, %v core-s, %d live of %d; want %v s, %v core-s, %d live of 1",
				step, got.Running, got.CoreSeconds, got.Live, got.Sandboxes, secs, 4*secs, live)
		}
	}
	check("started", 0, 1)
	f.Advance(25*time.Minute + 7*time.Second)
	check("running", 1507, 1)
	if _, err := f.sandboxes.Suspend(ctx, f.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Hour)
	check("suspended an hour", 1507, 1)
	if _, err := f.sandboxes.Resume(ctx, f.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	f.waitRunning(t, id)
	// Resumed at 10:25:07, expires at 13:00:00: 2h34m53s more at most.
	f.Advance(3 * time.Hour)
	check("past the expiry, before the sweep", 1507+9293, 1)
	if _, err := f.sandboxes.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.Advance(24 * time.Hour)
	check("expired, a day later", 1507+9293, 1) // an expired engineer sandbox is live: it keeps its volume
}

// TestASandboxCountsWholeInTheWindowItWasCreatedIn: one created before the
// window is left out even though it ran inside it; one created inside it
// counts with all its running time.
func TestASandboxCountsWholeInTheWindowItWasCreatedIn(t *testing.T) {
	f := newFixture(t)
	f.running(t, "early") // 09:00
	f.Advance(2 * time.Hour)
	f.running(t, "late") // 11:00
	f.Advance(time.Hour) // 12:00
	if got := f.total(t, "90m"); got.Sandboxes != 1 || got.Running != 3600 {
		t.Errorf("last 90m: %d sandboxes, %v s; want late alone, 3600 s", got.Sandboxes, got.Running)
	}
	if got := f.total(t, "3h"); got.Sandboxes != 2 || got.Running != 3*3600+3600 {
		t.Errorf("last 3h: %d sandboxes, %v s; want both, 14400 s", got.Sandboxes, got.Running)
	}
}

// TestSeriesSplitsTheTotalByWhenSandboxesWereCreated: the series' points
// add up to the total, each sandbox whole in the step it was created in;
// steps are hours for a short window and UTC days for a long one.
func TestSeriesSplitsTheTotalByWhenSandboxesWereCreated(t *testing.T) {
	f := newFixture(t)
	f.running(t, "early") // 09:00
	f.Advance(2 * time.Hour)
	f.running(t, "late") // 11:00
	f.Advance(time.Hour) // 12:00
	rep, err := f.usage.Report(t.Context(), f.admin, usage.Query{Since: "4h"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Step != time.Hour || len(rep.Series) != 5 || !rep.Series[0].Start.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("4h window: step %v, %d points from %v; want 1h, 5 from 08:00", rep.Step, len(rep.Series), rep.Series[0].Start)
	}
	want := []float64{0, 4 * 3 * 3600, 0, 4 * 3600, 0} // 08:00, 09:00 (early: 3h on 4 cores), 10:00, 11:00 (late: 1h), 12:00
	var sum float64
	for i, pt := range rep.Series {
		if pt.CoreSeconds != want[i] {
			t.Errorf("point %d (%s): %v core-s, want %v", i, pt.Start.Format("15:04"), pt.CoreSeconds, want[i])
		}
		sum += pt.CoreSeconds
	}
	if sum != rep.Total.CoreSeconds {
		t.Errorf("the points add up to %v core-s, the total is %v", sum, rep.Total.CoreSeconds)
	}
	rep, err = f.usage.Report(t.Context(), f.admin, usage.Query{Since: "7d"})
	if err != nil {
		t.Fatal(err)
	}
	if last := rep.Series[len(rep.Series)-1]; rep.Step != 24*time.Hour || len(rep.Series) != 8 || last.Sandboxes != 2 ||
		!last.Start.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("7d window: step %v, %d points, the last %+v; want 24h, 8, both sandboxes on 30 November", rep.Step, len(rep.Series), last)
	}
}

func TestWhoMayReadUsage(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.usage.Report(ctx, f.alice, usage.Query{}); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a member: %v, want fault.Forbidden", err)
	}
	if _, _, err := f.usage.Audit(ctx, f.alice, usage.AuditQuery{}); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a member's audit: %v, want fault.Forbidden", err)
	}
	for _, p := range []account.Principal{f.admin, f.operator} {
		if _, err := f.usage.Report(ctx, p, usage.Query{}); err != nil {
			t.Errorf("%s: %v", p.User.Name, err)
		}
	}
	var ie *fault.Error
	for _, since := range []string{"91d", "0s", "-1h", "later"} {
		if _, err := f.usage.Report(ctx, f.admin, usage.Query{Since: since}); !errors.As(err, &ie) || ie.Field != "since" {
			t.Errorf("--since %s: %v, want invalid since", since, err)
		}
	}
	rep, err := f.usage.Report(ctx, f.admin, usage.Query{})
	if err != nil || rep.Until.Sub(rep.Since) != usage.DefaultWindow || rep.By != usage.ByProject {
		t.Errorf("defaults: by %s, window %v (%v); want by project over 30d", rep.By, rep.Until.Sub(rep.Since), err)
	}
	short := usage.NewService(f.st, f.accounts, f.sandboxes, 7*24*time.Hour, f.Now)
	if rep, err := short.Report(ctx, f.operator, usage.Query{}); err != nil || rep.Until.Sub(rep.Since) != 7*24*time.Hour {
		t.Errorf("a 7d retention: window %v (%v); want the default cut to 7d", rep.Until.Sub(rep.Since), err)
	}
}

// TestModelCallsJoinTheRows: what the gateway metered of a sandbox's
// model calls joins its row, by sandbox whatever the session; a user's
// own calls (no sandbox) do not.
func TestModelCallsJoinTheRows(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	id := f.running(t, "dev")
	sb, err := f.st.GetSandbox(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(sandboxID, org string, in, out int64, cost float64) {
		t.Helper()
		if err := f.st.RecordInference(ctx, inference.Record{At: f.Now(), Org: org, Project: sb.Project, User: sb.Owner,
			Key: "key_x", Sandbox: sandboxID, Provider: "scripted", Model: "scripted", Dialect: "anthropic", Status: 200,
			Usage: runner.Usage{Input: in, Output: out}, CostUSD: cost, Metered: true}); err != nil {
			t.Fatal(err)
		}
	}
	rec(string(id), sb.Org, 100, 10, 0.5)
	rec(string(id), sb.Org, 200, 20, 0.25)
	rec("", sb.Org, 5000, 500, 9) // a user's own key
	got := f.total(t, "")
	if got.Requests != 2 || got.Tokens.Input != 300 || got.Tokens.Output != 30 || got.ModelCostUSD != 0.75 {
		t.Errorf("total: %d requests, %+v, $%v; want 2, 300 in, 30 out, $0.75", got.Requests, got.Tokens, got.ModelCostUSD)
	}
}
