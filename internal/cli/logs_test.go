package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/inference/inferencetest"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/workspace"
)

// agentGateway is an in-process gateway whose agent sandboxes run
// claude-code on the fake driver: the agent prints the captured stream
// testdata/claude-tool.jsonl of package runner once release is called. A
// script's `berth serve` cannot do this: its fake driver runs no agent.
type agentGateway struct {
	url, key string // alice's key
	started  chan struct{}
	release  func()
	lines    []string
}

// agentSetup is what an agentGateway's runs are: the runner whose
// captured stream the agent prints, and, when metered, the deployment's
// prices and the records the gateway keeps of each run's model calls.
type agentSetup struct {
	runner, stream string
	metered        bool
	prices         runner.Prices
	calls          []inference.Record
	// during is what the agent does in its sandbox before it prints its
	// stream, with its environment.
	during func(env map[string]string)
	// coreHour prices machine time (BERTH_CORE_HOUR_USD).
	coreHour usage.CoreHour
}

func newAgentGateway(t *testing.T, opts ...func(*agentSetup)) *agentGateway {
	t.Helper()
	setup := agentSetup{runner: "claude-code", stream: "claude-tool"}
	for _, o := range opts {
		o(&setup)
	}
	ctx := t.Context()
	log, st, tmpl := testDeployment(t, "sandboxes:\n  - name: agent\n    image: localhost/berth-agent:1\n    isolation: standard\n    purposes: [agent]\n")
	b, err := os.ReadFile(filepath.Join("..", "runner", "testdata", "streams", setup.stream+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	g := &agentGateway{started: make(chan struct{}), release: sync.OnceFunc(func() { close(held) }),
		lines: strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")}
	drv := fake.New()
	drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		close(g.started)
		<-held
		sb := spec.Sandbox
		for _, r := range setup.calls {
			r.At, r.Org, r.Project, r.User, r.Key, r.Sandbox, r.Session = time.Now(), sb.Org, sb.Project, sb.Owner, sb.KeyID, string(sb.ID), string(sb.ID)
			if err := st.RecordInference(context.Background(), r); err != nil {
				t.Error(err)
			}
		}
		if _, err := os.Stat(spec.Run.Work); err != nil {
			return g.lines, 143 // terminated meanwhile: its checkout is gone
		}
		if setup.during != nil {
			setup.during(spec.Env)
		}
		if err := os.WriteFile(filepath.Join(spec.Run.Work, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
			t.Error(err)
		}
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "add a greeting"}} {
			if out, err := git(spec.Run.Work, args...); err != nil {
				t.Errorf("agent: git %v: %v\n%s", args, err, out)
			}
		}
		return g.lines, 0
	})

	srv := httptest.NewUnstartedServer(nil)
	g.url = "http://" + srv.Listener.Addr().String()
	seed := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		if out, err := git(seed, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	lf := local.New(t.TempDir(), g.url, st, time.Now)
	if _, err := lf.Import(ctx, "acme/app", seed); err != nil {
		t.Fatal(err)
	}
	var classes *class.Service
	accounts := account.NewService(st, st, time.Now, func(ctx context.Context, org string) error { return classes.Seed(ctx, org) }, st, log)
	models := inferencetest.Scripted(t, st, accounts, g.url)
	runOpts := []agentrun.Option{agentrun.WithModels(models)}
	if setup.metered {
		runOpts = append(runOpts, agentrun.WithSessionMeter(st))
	}
	repos := repository.New(st, accounts, repository.Config{Forge: lf, PublicURL: g.url, Audit: st}, log, time.Now)
	svc := sandbox.NewService(st, drv, accounts, sandbox.Config{
		Driver: "fake", Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""}, Audit: st,
		Repositories: repos, PublicURL: g.url,
	}, log, time.Now, sandbox.WithModelEnv(models))
	runs := agentrun.NewService(st, svc, drv, accounts, agentrun.Config{
		Driver: "fake", PublicURL: g.url, Pushes: repos,
		Workspaces: workspace.New(t.TempDir(), os.Getuid(), lf, workspace.Local{Forge: lf}),
		Images:     map[string]string{setup.runner: "localhost/berth-agent-" + setup.runner + ":latest"},
		Model:      "claude-sonnet-4-5", LogDir: t.TempDir(), Prices: setup.prices,
	}, log, time.Now, runOpts...)
	svc.SetRuns(runs)
	classes = class.NewService(st, accounts, nil, class.Config{Template: tmpl}, log, time.Now)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(g.release) // runs first: a failed test leaves no agent waiting
	gw := gateway.New(gateway.Options{Accounts: accounts, Sandboxes: svc, Classes: classes, Runs: runs, Log: log, Version: "test", Driver: "fake", Forge: lf, Repositories: repos,
		Egress: egress.NewLedger(st, log), CoreHour: setup.coreHour})
	srv.Config.Handler = gw.Handler()
	t.Cleanup(gw.StopEgress)
	srv.Start()
	t.Cleanup(srv.Close)

	_, _, op, _, err := accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	operator := account.Principal{User: op}
	if err := accounts.SetGuardrail(ctx, operator, "acme", "", guardrail.Guardrail{AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	u, err := accounts.CreateUser(ctx, operator, "acme", "alice", "", account.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	k, err := accounts.CreateKey(ctx, operator, u.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	g.key = k.Secret.Reveal()
	return g
}

func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	return cmd.CombinedOutput()
}

// berth runs the command line in-process against the gateway as alice.
func (g *agentGateway) berth(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return g.berthWith(t, &http.Client{}, args...)
}

// berthWith is berth through hc.
func (g *agentGateway) berthWith(t *testing.T, hc *http.Client, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	env := map[string]string{"BERTH_URL": g.url, "BERTH_API_KEY": g.key}
	code = cli.Main(t.Context(), args, cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
		Getenv: func(k string) string { return env[k] }, HTTP: hc, Now: time.Now})
	return code, out.String(), errs.String()
}

// answered is a transport that closes its channel once an answer has come.
type answered struct {
	once sync.Once
	c    chan struct{}
}

func (a *answered) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		a.once.Do(func() { close(a.c) })
	}
	return resp, err
}

// wantLines checks that each pattern matches a line of out.
func wantLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile("(?m)" + p).MatchString(out) {
			t.Errorf("%s: no line matches %s in\n%s", what, p, out)
		}
	}
}

// TestSandboxLogsAndRun: `berth sandbox logs -f --raw` prints the run's
// log as it comes and returns when the run ends; `berth sandbox logs
// --raw` prints it whole; `berth sandbox show` shows the run, its cost unknown while
// nothing says otherwise, then its tokens, native cost and pushed commit.
func TestSandboxLogsAndRun(t *testing.T) {
	g := newAgentGateway(t)
	c := client.New(g.url, g.key, nil)
	if _, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "add a greeting", Runner: "claude-code"}); err != nil {
		t.Fatal(err)
	}
	<-g.started

	code, out, errs := g.berth(t, "sandbox", "show", "fix")
	if code != 0 {
		t.Fatalf("show exited %d: %s", code, errs)
	}
	wantLines(t, "show while the run goes", out, `^run: +running$`, `^cost: +unknown$`, `^model: +claude-sonnet-4-5$`)
	if strings.Contains(out, "exit code:") {
		t.Errorf("show gives a running run an exit code:\n%s", out)
	}

	type result struct {
		code        int
		out, stderr string
	}
	followed := make(chan result, 1)
	following := &answered{c: make(chan struct{})}
	go func() {
		code, out, errs := g.berthWith(t, &http.Client{Transport: following}, "sandbox", "logs", "-f", "--raw", "fix")
		followed <- result{code, out, errs}
	}()
	select {
	case <-following.c: // the gateway answered: the follower waits for output
	case r := <-followed:
		t.Fatalf("logs -f ended before the run had output: exit %d, %s", r.code, r.stderr)
	}
	g.release()
	want := strings.Join(g.lines, "\n") + "\n"
	select {
	case r := <-followed:
		if r.code != 0 || r.out != want || r.stderr != "" {
			t.Errorf("logs -f: exit %d, stderr %q, stdout\n%s\nwant exit 0 and the agent's lines\n%s", r.code, r.stderr, r.out, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("logs -f did not return after the run ended")
	}

	code, out, errs = g.berth(t, "sandbox", "logs", "--raw", "fix")
	if code != 0 || out != want {
		t.Errorf("logs: exit %d (%s), stdout\n%s\nwant the agent's lines", code, errs, out)
	}

	code, out, errs = g.berth(t, "sandbox", "show", "fix")
	if code != 0 {
		t.Fatalf("show exited %d: %s", code, errs)
	}
	wantLines(t, "show after the run", out,
		`^run: +succeeded$`,
		`^exit code: +0$`,
		`^pushed: +berth/fix@[0-9a-f]{7}$`,
		`^tokens: +240 in, 34 out, 60 cache read, 10 cache write$`,
		`^cost: +\$0\.0013 \(native, cost basis list\)$`,
		`^task: +\S+ of a 2-core machine \(\d+ core-seconds\), 344 tokens, \$0\.0013 \(native, cost basis list\)$`,
		`^model: +claude-sonnet-4-5$`,
		`^session: +29fd7acb-45d8-43af-a542-c97cbc76e9fa$`,
		`^turns: +2$`,
	)

	code, _, errs = g.berth(t, "sandbox", "logs", "nope")
	if code != 1 || !strings.Contains(errs, "not_found") {
		t.Errorf("logs of an unknown sandbox: exit %d, stderr %q; want 1 and not_found", code, errs)
	}
}

// TestSandboxShowsWhoEndedARun (issue 14, item 9): a run terminated under
// its agent shows no exit code it never had; show and its JSON say it was
// terminated, and by whom.
func TestSandboxShowsWhoEndedARun(t *testing.T) {
	g := newAgentGateway(t)
	c := client.New(g.url, g.key, nil)
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "add a greeting", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	if code, _, errs := g.berth(t, "sandbox", "terminate", "fix"); code != 0 {
		t.Fatalf("terminate exited %d: %s", code, errs)
	}
	g.release()
	var run *api.Run
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := c.Sandbox(t.Context(), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run = got.Run; run != nil && run.State != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is still %+v", run)
		}
	}
	code, out, errs := g.berth(t, "sandbox", "show", "fix")
	if code != 0 {
		t.Fatalf("show exited %d: %s", code, errs)
	}
	wantLines(t, "show of a terminated run", out, `^run: +failed$`, `^ended: +terminated by alice \(usr_[a-z0-9]+\), before the agent exited$`,
		`^run error: +the sandbox ended \(terminated\) before the run did: terminated by alice$`)
	if strings.Contains(out, "exit code:") {
		t.Errorf("show gives a run that never exited an exit code:\n%s", out)
	}
	code, out, errs = g.berth(t, "sandbox", "show", "fix", "--output", "json")
	if code != 0 {
		t.Fatalf("show --output json exited %d: %s", code, errs)
	}
	var got struct {
		Run map[string]any `json:"run"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("show --output json: %v\n%s", err, out)
	}
	if code, ok := got.Run["exit_code"]; !ok || code != nil || got.Run["ended"] != "terminated" || got.Run["ended_by"] != "alice" || got.Run["ended_by_id"] == "" {
		t.Errorf("run in JSON: exit_code %v (present %v), ended %v by %v (%v); want null, terminated by alice",
			code, ok, got.Run["ended"], got.Run["ended_by"], got.Run["ended_by_id"])
	}
}
