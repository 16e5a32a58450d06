package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/inference/inferencetest"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/workspace"
)

// runWorld is a gateway whose agent sandboxes run claude-code: the fake
// driver "runs" the agent a test gives it, on a real checkout of the local
// forge's acme/app, and the run's log is kept in a temporary directory.
// newWorld's deployment runs no agents, so this is a world of its own.
// wrap, when given, is the driver the service gets in place of the fake
// (fake.NewInMachine: runs happen in their machines).
type runWorld struct {
	url                    string
	drv                    *fake.Driver
	forge                  *local.Forge
	st                     *store.Store
	owner, member, foreign *client.Client
	ownerKey               string
}

func newRunWorld(t *testing.T, wrap ...func(*fake.Driver) sandbox.Driver) *runWorld {
	t.Helper()
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(ctx, t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl, err := class.ParseFile(strings.NewReader(classes))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	w := &runWorld{url: "http://" + srv.Listener.Addr().String(), drv: fake.New()}
	lf := local.New(t.TempDir(), w.url, st, time.Now)
	if _, err := lf.Import(ctx, "acme/app", seedRepo(t)); err != nil {
		t.Fatal(err)
	}
	w.forge, w.st = lf, st
	var classSvc *class.Service
	accounts := account.NewService(st, st, time.Now, func(ctx context.Context, org string) error { return classSvc.Seed(ctx, org) }, st, log)
	var drv sandbox.Driver = w.drv
	for _, f := range wrap {
		drv = f(w.drv)
	}
	repos := repository.New(st, accounts, repository.Config{Forge: lf, PublicURL: w.url, Audit: st}, log, time.Now)
	models := inferencetest.Scripted(t, st, accounts, w.url)
	svc := sandbox.NewService(st, drv, accounts, sandbox.Config{
		Driver: "fake", Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""}, Audit: st,
		Repositories: repos, PublicURL: w.url,
	}, log, time.Now, sandbox.WithModelEnv(models))
	runs := agentrun.NewService(st, svc, drv, accounts, agentrun.Config{
		Driver: "fake", PublicURL: w.url, Pushes: repos,
		Workspaces: workspace.New(t.TempDir(), os.Getuid(), lf, workspace.Local{Forge: lf}),
		Images:     map[string]string{"claude-code": "localhost/berth-agent-claude-code:latest"},
		Model:      "claude-sonnet-4-5", LogDir: t.TempDir(),
	}, log, time.Now, agentrun.WithModels(models))
	svc.SetRuns(runs)
	classSvc = class.NewService(st, accounts, nil, class.Config{Template: tmpl}, log, time.Now)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	srv.Config.Handler = gateway.New(gateway.Options{Accounts: accounts, Sandboxes: svc, Classes: classSvc, Runs: runs, Log: log, Version: "test", Driver: "fake", Forge: lf, Repositories: repos}).Handler()
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
	if _, _, err := accounts.CreateOrganisation(ctx, operator, "other", ""); err != nil {
		t.Fatal(err)
	}
	user := func(org, name string) (*client.Client, string) {
		u, err := accounts.CreateUser(ctx, operator, org, name, "", account.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		k, err := accounts.CreateKey(ctx, operator, u.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		return client.New(w.url, k.Secret.Reveal(), nil), k.Secret.Reveal()
	}
	w.owner, w.ownerKey = user("acme", "alice")
	w.member, _ = user("acme", "bob")
	w.foreign, _ = user("other", "sam")
	return w
}

// heldAgent makes the world's agent commit a file and print the claude-tool
// stream once release is called (at the latest when the test ends, so a
// failed test does not leave the service waiting on it). started is closed
// when the agent has begun: the run's log exists by then.
func (w *runWorld) heldAgent(t *testing.T) (started chan struct{}, release func()) {
	started, held := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	lines := runnertest.Stream(t, "claude-tool")
	w.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		close(started)
		<-held
		if err := os.WriteFile(filepath.Join(spec.Run.Work, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
			t.Error(err)
		}
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "add a greeting"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir, cmd.Env = spec.Run.Work, gitEnv(spec.Run.Work)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("agent: git %v: %v\n%s", args, err, out) // not Fatal: this is not the test's goroutine
			}
		}
		return lines, 0
	})
	return started, release
}

// branch is where berth/<name> of acme/app is; "" when it is not there.
func (w *runWorld) branch(t *testing.T, name string) string {
	t.Helper()
	bare, err := w.forge.Path(forge.Repo{Path: "acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "--git-dir", bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/"+name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func (w *runWorld) createAgent(t *testing.T, name string) api.Sandbox {
	t.Helper()
	sb, err := w.owner.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app", Branch: "main", Task: "add a greeting", Runner: "claude-code"})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return sb
}

// waitEnded polls until the sandbox has ended.
func (w *runWorld) waitEnded(t *testing.T, ref string) api.Sandbox {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		sb, err := w.owner.Sandbox(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if sb.EndedAt != nil {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is still %s", ref, sb.State)
		}
	}
}

// openLog opens a run log, followed or as it is.
func openLog(ctx context.Context, c *client.Client, ref string, follow bool) (io.ReadCloser, error) {
	if follow {
		return c.FollowRunLog(ctx, ref)
	}
	return c.RunLog(ctx, ref)
}

// readLog reads a whole run log.
func readLog(t *testing.T, c *client.Client, ref string, follow bool) string {
	t.Helper()
	rc, err := openLog(t.Context(), c, ref, follow)
	if err != nil {
		t.Fatalf("log of %s (follow %v): %v", ref, follow, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read the log of %s (follow %v): %v", ref, follow, err)
	}
	return string(b)
}

// TestRunShowsItsTelemetryAndItsLog: an agent sandbox shows its run, with
// an unknown cost (not zero) while nothing is known, and the stream's
// tokens, native cost, session and pushed commit once it has ended; its log
// is the agent's lines, read whole or followed until the run ends.
func TestRunShowsItsTelemetryAndItsLog(t *testing.T) {
	w := newRunWorld(t)
	ctx := t.Context()
	started, release := w.heldAgent(t)
	w.createAgent(t, "fix")
	<-started

	sb, err := w.owner.Sandbox(ctx, "fix")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Run == nil {
		t.Fatal("a running agent sandbox shows no run")
	}
	if r := sb.Run; r.State != "running" || r.Runner != "claude-code" || r.ExitCode != nil || r.CostUSD != nil || r.CostSource != "unknown" || r.EndedAt != nil {
		t.Errorf("run before any output: state %s runner %s exit %v cost %v (%s) ended %v; want running claude-code, no exit code, cost unknown, not ended",
			r.State, r.Runner, r.ExitCode, r.CostUSD, r.CostSource, r.EndedAt)
	}

	// A follower started while the run goes gets its answer at once and
	// its whole log, and the stream ends when the run does.
	rc, err := w.owner.FollowRunLog(ctx, "fix")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type result struct {
		log string
		err error
	}
	followed := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(rc)
		followed <- result{string(b), err}
	}()
	select {
	case got := <-followed:
		t.Fatalf("the followed log ended while the run was held, with %q, %v", got.log, got.err)
	case <-time.After(3 * 250 * time.Millisecond): // a few of the gateway's polls
	}
	release()
	want := strings.Join(runnertest.Stream(t, "claude-tool"), "\n") + "\n"
	select {
	case got := <-followed:
		if got.err != nil || got.log != want {
			t.Errorf("followed log: %v\n%s\nwant the agent's stdout and a clean end:\n%s", got.err, got.log, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the followed log did not end after the run did")
	}

	end := w.waitEnded(t, "fix")
	if end.State != "terminated" {
		t.Errorf("sandbox %s (%s), want terminated after a clean run", end.State, end.Reason)
	}
	r := end.Run
	if r == nil {
		t.Fatal("an ended agent sandbox shows no run")
	}
	if r.State != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0 || r.Error != "" || r.EndedAt == nil {
		t.Errorf("run %s exit %v error %q ended %v, want succeeded, exit 0", r.State, r.ExitCode, r.Error, r.EndedAt)
	}
	if wantUsage := (api.Tokens{Input: 240, Output: 34, CacheRead: 60, CacheWrite: 10}); r.Usage != wantUsage {
		t.Errorf("usage %+v, want the stream's totals %+v", r.Usage, wantUsage)
	}
	if r.CostUSD == nil || math.Abs(*r.CostUSD-0.0012855) > 1e-9 || r.CostSource != "native" {
		t.Errorf("cost %v (%s), want the CLI's own 0.0012855 (native)", r.CostUSD, r.CostSource)
	}
	if r.Model != "claude-sonnet-4-5" || r.SessionID != "29fd7acb-45d8-43af-a542-c97cbc76e9fa" || r.Turns != 2 {
		t.Errorf("model %q session %q turns %d, want the stream's", r.Model, r.SessionID, r.Turns)
	}
	if r.Lines != 6 || r.IgnoredLines != 0 {
		t.Errorf("lines %d (%d ignored), want 6 (0)", r.Lines, r.IgnoredLines)
	}
	if r.Branch != "berth/fix" || len(r.Commit) != 40 {
		t.Errorf("pushed %q at %q, want berth/fix at a commit", r.Branch, r.Commit)
	}

	// The list shows the run too, and the log reads whole once it ended.
	list, err := w.owner.Sandboxes(ctx, client.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Run == nil || list[0].Run.State != "succeeded" {
		t.Errorf("list: %+v, want the sandbox with its succeeded run", list)
	}
	if got := readLog(t, w.owner, "fix", false); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	// Following a run that is over answers the log and ends.
	if got := readLog(t, w.owner, end.ID, true); got != want {
		t.Errorf("followed log of an ended run:\n%s\nwant:\n%s", got, want)
	}
}

// TestRunLogRefusals: whoever may not see the sandbox gets 404, as does a
// sandbox with no run log; a follow that is not a boolean is 400 naming
// the field.
func TestRunLogRefusals(t *testing.T) {
	w := newRunWorld(t)
	ctx := t.Context()
	started, _ := w.heldAgent(t)
	sb := w.createAgent(t, "fix")
	<-started

	for who, c := range map[string]*client.Client{"another member": w.member, "another organisation": w.foreign} {
		for _, follow := range []bool{false, true} {
			if _, err := openLog(ctx, c, sb.ID, follow); !isNotFound(err) {
				t.Errorf("%s reading the log (follow %v): %v, want 404 not_found", who, follow, err)
			}
		}
	}

	eng, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "standard", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	if eng.Run != nil {
		t.Errorf("an engineer sandbox shows a run: %+v", eng.Run)
	}
	if _, err := w.owner.RunLog(ctx, "dev"); !isNotFound(err) {
		t.Errorf("the log of an engineer sandbox: %v, want 404 not_found", err)
	}

	for _, bad := range []string{"maybe", "yes"} {
		req, err := http.NewRequestWithContext(ctx, "GET", w.url+"/sandbox/v1/sandboxes/fix/run/log?follow="+bad, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.ownerKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e *api.Error
		if err := decodeErr(resp); !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != api.CodeInvalid || e.Field != "follow" {
			t.Errorf("follow=%s: %v, want 400 invalid naming follow", bad, err)
		}
	}

	// The log is text, and says so.
	req, err := http.NewRequestWithContext(ctx, "GET", w.url+"/sandbox/v1/sandboxes/fix/run/log", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.ownerKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/plain; charset=utf-8" {
		t.Errorf("log answered %d %q, want 200 text/plain", resp.StatusCode, ct)
	}
}

func isNotFound(err error) bool {
	status, c := code(err)
	return status == http.StatusNotFound && c == api.CodeNotFound
}

// decodeErr reads an error answer as the client would.
func decodeErr(resp *http.Response) error {
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return nil
	}
	e := &api.Error{Status: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(e); err != nil {
		return err
	}
	return e
}

// TestReviewerRunShowsItsVerdict: a reviewer run's review and the host's
// copy of its verdict reach its owner; nobody else learns it exists.
func TestReviewerRunShowsItsVerdict(t *testing.T) {
	w := newRunWorld(t)
	verdict := `{"verdict":"approve","summary":"looks right"}`
	lines := runnertest.Stream(t, "claude-tool")
	w.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		if err := os.WriteFile(spec.Run.Work+"/.berth-review-verdict.json", []byte(verdict), 0o644); err != nil {
			t.Error(err)
		}
		return lines, 0
	})
	sb, err := w.owner.CreateSandbox(t.Context(), api.CreateSandbox{Name: "rev", Purpose: "agent", Role: "reviewer",
		Repo: "acme/app", Branch: "main", Task: "review it", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Role != "reviewer" || sb.Contract != "berth" {
		t.Errorf("role %q contract %q, want reviewer, berth", sb.Role, sb.Contract)
	}
	end := w.waitEnded(t, "rev")
	if end.Run == nil || end.Run.Review == nil {
		t.Fatalf("a reviewer run without its review: %+v", end.Run)
	}
	if r := end.Run.Review; r.Outcome != "approved" || r.Summary != "looks right" || r.SHA256 == "" {
		t.Errorf("review %+v, want approved with the summary and the copy's digest", r)
	}
	if end.Run.Branch != "" {
		t.Errorf("a reviewer run pushed %s", end.Run.Branch)
	}
	get := func(key string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", w.url+"/sandbox/v1/sandboxes/"+sb.ID+"/run/verdict", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get(w.ownerKey)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != verdict || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("verdict: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, c := range []*client.Client{w.member, w.foreign} {
		if _, err := c.Sandbox(t.Context(), sb.ID); !isNotFound(err) {
			t.Errorf("another user sees the reviewer sandbox: %v", err)
		}
	}
}
