package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/forge/github"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/githttp"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/trigger/event/eventtest"
)

// githubTriggerWorld is a world on the GitHub stand-in whose App posts its
// webhooks signed with hookSecret.
func githubTriggerWorld(t *testing.T) (*world, *forgetest.GitHub) {
	w, gh, _ := githubTriggerWorldForge(t)
	return w, gh
}

// githubTriggerWorldForge is githubTriggerWorld with its forge.
func githubTriggerWorldForge(t *testing.T) (*world, *forgetest.GitHub, *github.Forge) {
	t.Helper()
	var (
		gh *forgetest.GitHub
		f  *github.Forge
	)
	w := newWorld(t, withForge(func(t testing.TB) (forge.Forge, gateway.Mirrors) {
		key, pem := forgetest.NewAppKey(t)
		gh = forgetest.NewGitHub(t, "4242", &key.PublicKey, "acme/app")
		var err error
		f, err = github.New(github.Config{URL: gh.URL(), AppID: "4242", Key: secret.New(string(pem))}, gh.Client(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return f, githttp.NewMirrors(t.TempDir(), f, time.Nanosecond, time.Now)
	}), func(c *worldConfig) { c.githubHookSecret = []byte(hookSecret) })
	w.allowRepos(t, "acme")
	return w, gh, f
}

const hookSecret = "the App's webhook secret"

// deliver posts a GitHub delivery to the gateway, signed with secret.
func deliver(t *testing.T, w *world, secretKey, kind, delivery string, body []byte) (int, api.HookAnswer) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, w.url+api.GitHubHookPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	eventtest.SignGitHub(req, []byte(secretKey), kind, delivery, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.HookAnswer
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestGitHubTriggerStartsAndReports: an App's signed delivery of an issue
// labelled berth starts one agent run on the trigger's repository with a
// task from the issue; the same delivery again starts nothing; another
// while the first runs is skipped at the concurrency limit, saying so; an
// unsigned one is refused. When the run ends cleanly with a commit on
// berth/<name>, the gateway opens a draft pull request on the stand-in
// (which checks the token's permissions and the branches) whose body has
// the cost, and comments on the issue with its address; a failed run's
// comment says why.
func TestGitHubTriggerStartsAndReports(t *testing.T) {
	w, gh := githubTriggerWorld(t)
	ctx := t.Context()
	tr, err := w.admin.SetTrigger(ctx, "acme", "default", "fix", api.Trigger{On: "github:labeled:berth", Repo: gh.CloneURL("acme/app")})
	if err != nil {
		t.Fatal(err)
	}
	if tr.OpenPR == nil || !*tr.OpenPR || tr.HookURL != w.url+api.GitHubHookPath || tr.Concurrency != 1 {
		t.Fatalf("trigger %+v: want open_pr by default on GitHub, the App's hook URL, concurrency 1", tr)
	}
	n := gh.AddIssue("acme/app", "Fix the flaky test", "It fails on Tuesdays.")
	labeled := eventtest.GitHubIssueLabeled("acme/app", gh.URL(), n, "Fix the flaky test", "It fails on Tuesdays.", "berth", "octocat")

	if st, _ := deliver(t, w, "not the secret", "issues", "d-0", labeled); st != http.StatusUnauthorized {
		t.Errorf("a delivery signed with another secret: %d, want 401", st)
	}
	st, out := deliver(t, w, hookSecret, "issues", "d-1", labeled)
	if st != http.StatusAccepted || len(out.Deliveries) != 1 || out.Deliveries[0].Outcome != "started" || out.Deliveries[0].Sandbox == "" {
		t.Fatalf("the first delivery: %d %+v", st, out)
	}
	id := out.Deliveries[0].Sandbox
	sb, err := w.st.GetSandbox(ctx, sandbox.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	if sb.Purpose != "agent" || !strings.HasSuffix(sb.Repo, "acme/app") || !strings.Contains(sb.Task, "Fix the flaky test") ||
		!strings.Contains(sb.Task, "It fails on Tuesdays.") || !strings.Contains(sb.Task, "/issues/") {
		t.Errorf("the run: purpose %s, repo %s, task %q", sb.Purpose, sb.Repo, sb.Task)
	}
	if st, again := deliver(t, w, hookSecret, "issues", "d-1", labeled); st != http.StatusAccepted || len(again.Deliveries) != 1 || !again.Deliveries[0].Again {
		t.Errorf("the same delivery again: %d %+v, want it known", st, again)
	}
	st, busy := deliver(t, w, hookSecret, "issues", "d-2", labeled)
	if st != http.StatusAccepted || len(busy.Deliveries) != 1 || busy.Deliveries[0].Outcome != "skipped" ||
		!strings.Contains(busy.Deliveries[0].Reason, "concurrency") {
		t.Errorf("a delivery over the concurrency limit: %d %+v", st, busy)
	}
	other := eventtest.GitHubIssueLabeled("acme/app", gh.URL(), n, "Fix the flaky test", "", "wontfix", "octocat")
	if st, none := deliver(t, w, hookSecret, "issues", "d-3", other); st != http.StatusAccepted || len(none.Deliveries) != 0 {
		t.Errorf("another label: %d %+v, want nothing started", st, none)
	}
	if all, err := w.admin.Sandboxes(ctx, client.ListOptions{}); err != nil || len(all) != 1 {
		t.Errorf("sandboxes after four deliveries: %d (%v), want one", len(all), err)
	}
	shown, err := w.admin.Trigger(ctx, "acme", "default", "fix")
	if err != nil || len(shown.Deliveries) != 2 {
		t.Fatalf("show: %d deliveries (%v), want the started and the skipped", len(shown.Deliveries), err)
	}

	// The run ends cleanly, its work on berth/<name>: a draft pull
	// request, and a comment on the issue.
	commit := pushBranch(t, gh.BarePath("acme/app"), "berth/"+sb.Name)
	w.finishRun(t, sandbox.ID(id), agentrun.RunSucceeded, "berth/"+sb.Name, commit, "")
	pulls := gh.Pulls("acme/app")
	if len(pulls) != 1 {
		t.Fatalf("pull requests: %+v, want one", pulls)
	}
	p := pulls[0]
	if !p.Draft || p.Head != "berth/"+sb.Name || p.Base != "main" || p.Title != "Fix the flaky test" || !strings.Contains(p.Body, "Cost") || !strings.Contains(p.Body, commit) {
		t.Errorf("the pull request: %+v", p)
	}
	comments := gh.Comments("acme/app", n)
	if len(comments) != 1 || !strings.Contains(comments[0], p.URL) || !strings.Contains(comments[0], "Cost") {
		t.Errorf("the issue's comments: %q, want one with %s and the cost", comments, p.URL)
	}
	// Reported once: a later sweep adds nothing.
	if err := w.triggers.SweepReports(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gh.Comments("acme/app", n); len(got) != 1 {
		t.Errorf("after a sweep: %d comments", len(got))
	}

	// A failed run's comment says why, and opens nothing.
	st, second := deliver(t, w, hookSecret, "issues", "d-4", labeled)
	if st != http.StatusAccepted || len(second.Deliveries) != 1 || second.Deliveries[0].Outcome != "started" {
		t.Fatalf("a delivery once the first run ended: %d %+v", st, second)
	}
	w.finishRun(t, sandbox.ID(second.Deliveries[0].Sandbox), agentrun.RunFailed, "", "", "the agent exited 3")
	if got := gh.Comments("acme/app", n); len(got) != 2 || !strings.Contains(got[1], "the agent exited 3") {
		t.Errorf("after a failed run: comments %q", got)
	}
	if got := gh.Pulls("acme/app"); len(got) != 1 {
		t.Errorf("a failed run opened a pull request: %+v", got)
	}
}

// TestTriggerBudgetSkips: a trigger whose runs today used its daily
// tokens skips the next delivery, saying so.
func TestTriggerBudgetSkips(t *testing.T) {
	w, gh := githubTriggerWorld(t)
	ctx := t.Context()
	if _, err := w.admin.SetTrigger(ctx, "acme", "default", "ask", api.Trigger{On: "github:comment:/berth run", Repo: gh.CloneURL("acme/app"),
		Concurrency: 5, DailyTokens: 100}); err != nil {
		t.Fatal(err)
	}
	n := gh.AddIssue("acme/app", "Flaky", "")
	comment := eventtest.GitHubIssueComment("acme/app", gh.URL(), n, false, "Flaky", "", "/berth run fix it please", "octocat")
	st, out := deliver(t, w, hookSecret, "issue_comment", "c-1", comment)
	if st != http.StatusAccepted || len(out.Deliveries) != 1 || out.Deliveries[0].Outcome != "started" {
		t.Fatalf("the first comment: %d %+v", st, out)
	}
	id := sandbox.ID(out.Deliveries[0].Sandbox)
	sb, _ := w.st.GetSandbox(ctx, id)
	if !strings.Contains(sb.Task, "fix it please") {
		t.Errorf("the task %q lacks the command's arguments", sb.Task)
	}
	run := agentrun.Run{Sandbox: id, Runner: "claude-code", State: agentrun.RunRunning, StartedAt: time.Now()}
	run.Telemetry.Usage.Input, run.Telemetry.Usage.Output = 90, 20
	if err := w.st.PutRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	st, out = deliver(t, w, hookSecret, "issue_comment", "c-2", comment)
	if st != http.StatusAccepted || len(out.Deliveries) != 1 || out.Deliveries[0].Outcome != "skipped" ||
		!strings.Contains(out.Deliveries[0].Reason, "daily budget") || !strings.Contains(out.Deliveries[0].Reason, "110 tokens") {
		t.Errorf("a comment past the daily budget: %d %+v", st, out)
	}
}

// finishRun ends a run as its agent's exit would: its record, then its
// sandbox, then the report it owes.
func (w *world) finishRun(t *testing.T, id sandbox.ID, state agentrun.RunState, branch, commit, why string) {
	t.Helper()
	ctx := context.Background()
	// This world runs no agent: the run is written as its runner would.
	run := agentrun.Run{Sandbox: id, Runner: "claude-code", StartedAt: time.Now().Add(-time.Minute)}
	run.Telemetry.Usage.Input, run.Telemetry.Usage.Output = 1200, 300
	run.State, run.Branch, run.Commit, run.Error, run.Exited, run.EndedAt = state, branch, commit, why, true, time.Now()
	if err := w.st.PutRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	to := sandbox.StateTerminated
	if state == agentrun.RunFailed {
		to = sandbox.StateFailed
	}
	if err := w.sandboxes.EndRun(ctx, id, to, "its task finished", time.Time{}); err != nil {
		t.Fatal(err)
	}
	w.triggers.Concluded(ctx, id)
}

// pushBranch makes a commit on branch in the bare repository, as the
// host's push of a run's work does, and returns it.
func pushBranch(t *testing.T, bare, branch string) string {
	t.Helper()
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + bare}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(cmd.Environ(), "GIT_AUTHOR_NAME=berth", "GIT_AUTHOR_EMAIL=b@x", "GIT_COMMITTER_NAME=berth", "GIT_COMMITTER_EMAIL=b@x")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	blob := git("fixed\n", "hash-object", "-w", "--stdin")
	tree := git("100644 blob "+blob+"\tfix.txt\n", "mktree")
	commit := git("", "commit-tree", tree, "-p", "main", "-m", "fix")
	git("", "update-ref", "refs/heads/"+branch, commit)
	return commit
}

// TestScheduleFiresOnceAcrossReplicas: a schedule's trigger starts a run
// when it comes due, once, however many replicas tick at that moment; it
// does not fire before its time or twice for one firing; a gateway down
// over several firings fires once for the latest and goes on from then.
// A schedule's trigger needs a task of its own.
func TestScheduleFiresOnceAcrossReplicas(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 4, 2, 58, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(at time.Time) { mu.Lock(); defer mu.Unlock(); now = at }
	w := newWorld(t, func(c *worldConfig) { c.now = clock })
	w.allowRepos(t, "acme")
	ctx := t.Context()
	noPR := false
	var e *api.Error
	if _, err := w.admin.SetTrigger(ctx, "acme", "default", "nightly", api.Trigger{On: "schedule:0 3 * * *", Repo: "acme/app", OpenPR: &noPR}); !errors.As(err, &e) || e.Field != "task" {
		t.Errorf("a schedule without a task: %v, want a field error on task", err)
	}
	if _, err := w.admin.SetTrigger(ctx, "acme", "default", "nightly", api.Trigger{On: "schedule:0 25 * * *", Repo: "acme/app", Task: "x", OpenPR: &noPR}); !errors.As(err, &e) || e.Field != "on" {
		t.Errorf("hour 25: %v, want a field error on on", err)
	}
	if _, err := w.admin.SetTrigger(ctx, "acme", "default", "nightly", api.Trigger{On: "schedule:0 3 * * *", Repo: "acme/app", Task: "Nightly run of {{.Time}}",
		Concurrency: 5, OpenPR: &noPR}); err != nil {
		t.Fatal(err)
	}
	// Two replicas on one database: the world's service and another.
	replicas := []*trigger.Service{w.triggers, trigger.NewService(w.st, w.accounts, nil, w.sandboxes, w.forge,
		trigger.Config{Key: []byte("matrix trigger key"), MaxTask: sandbox.MaxTask}, slog.New(slog.DiscardHandler), clock)}
	tick := func() {
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Go(func() {
				if err := r.Tick(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	runs := func() []string {
		t.Helper()
		all, err := w.admin.Sandboxes(ctx, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var tasks []string
		for _, sb := range all {
			full, _ := w.st.GetSandbox(ctx, sandbox.ID(sb.ID))
			tasks = append(tasks, full.Task)
		}
		slices.Sort(tasks)
		return tasks
	}
	tick()
	if got := runs(); len(got) != 0 {
		t.Fatalf("before its time: %q", got)
	}
	set(time.Date(2026, 12, 4, 3, 0, 20, 0, time.UTC))
	tick()
	tick()
	if got := runs(); !slices.Equal(got, []string{"Nightly run of 2026-12-04T03:00:00Z"}) {
		t.Fatalf("at 03:00 with two replicas ticking twice: %q, want one run", got)
	}
	// Down from then until the 8th: one firing, for the latest.
	set(time.Date(2026, 12, 8, 3, 30, 0, 0, time.UTC))
	tick()
	if got := runs(); !slices.Equal(got, []string{"Nightly run of 2026-12-04T03:00:00Z", "Nightly run of 2026-12-08T03:00:00Z"}) {
		t.Errorf("after three missed firings: %q, want one more", got)
	}
	tr, err := w.admin.Trigger(ctx, "acme", "default", "nightly")
	if err != nil || len(tr.Deliveries) != 2 {
		t.Errorf("deliveries: %+v, %v", tr.Deliveries, err)
	}
	set(time.Date(2026, 12, 9, 3, 0, 1, 0, time.UTC))
	tick()
	if got := runs(); len(got) != 3 {
		t.Errorf("the next night: %d runs, want 3", len(got))
	}
}

// TestReviewerTriggerPostsItsVerdict: "/berth review" commented on a pull
// request starts a reviewer run; its verdict goes back as a review
// comment on that pull request (GitHub's reviews API, event COMMENT, as
// the stand-in checks), and no pull request is opened for it.
func TestReviewerTriggerPostsItsVerdict(t *testing.T) {
	w, gh, f := githubTriggerWorldForge(t)
	ctx := t.Context()
	if _, err := w.admin.SetTrigger(ctx, "acme", "default", "review", api.Trigger{On: "github:comment:/berth review", Repo: gh.CloneURL("acme/app"), Role: "reviewer"}); err != nil {
		t.Fatal(err)
	}
	pushBranch(t, gh.BarePath("acme/app"), "feature")
	pr, err := f.OpenChange(ctx, forge.Repo{Host: f.Host(), Path: "acme/app"},
		forge.ChangeRequest{Head: "feature", Base: "main", Title: "Feature", Body: "A feature."})
	if err != nil {
		t.Fatal(err)
	}
	comment := eventtest.GitHubIssueComment("acme/app", gh.URL(), pr.Number, true, "Feature", "A feature.", "/berth review", "octocat")
	st, out := deliver(t, w, hookSecret, "issue_comment", "r-1", comment)
	if st != http.StatusAccepted || len(out.Deliveries) != 1 || out.Deliveries[0].Outcome != "started" {
		t.Fatalf("the review command: %d %+v", st, out)
	}
	id := sandbox.ID(out.Deliveries[0].Sandbox)
	if sb, _ := w.st.GetSandbox(ctx, id); sb.Role != sandbox.RoleReviewer {
		t.Errorf("the run's role is %q, want reviewer", sb.Role)
	}
	w.finishReview(t, id, review.Result{Outcome: review.ChangesRequested, Summary: "The feature lacks a test."})
	reviews := gh.Reviews("acme/app", pr.Number)
	if len(reviews) != 1 || reviews[0].Event != "COMMENT" || !strings.Contains(reviews[0].Body, "changes requested") ||
		!strings.Contains(reviews[0].Body, "The feature lacks a test.") {
		t.Errorf("reviews on #%d: %+v", pr.Number, reviews)
	}
	if got := gh.Pulls("acme/app"); len(got) != 1 {
		t.Errorf("a reviewer run opened a pull request: %+v", got)
	}
}

// finishReview ends a reviewer's run cleanly with its verdict.
func (w *world) finishReview(t *testing.T, id sandbox.ID, v review.Result) {
	t.Helper()
	ctx := context.Background()
	run := agentrun.Run{Sandbox: id, Runner: "claude-code", StartedAt: time.Now().Add(-time.Minute), State: agentrun.RunSucceeded, Exited: true, EndedAt: time.Now(), Review: v}
	if err := w.st.PutRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := w.sandboxes.EndRun(ctx, id, sandbox.StateTerminated, "its task finished", time.Time{}); err != nil {
		t.Fatal(err)
	}
	w.triggers.Concluded(ctx, id)
}

// TestOpenPRForAHandMadeRun: `berth sandbox create --open-pr` makes a
// hand-made run's clean end a draft pull request too; where the forge
// takes none (the local one), or no pull request can come of it, the
// create is refused before anything is made, naming open_pr.
func TestOpenPRForAHandMadeRun(t *testing.T) {
	w, gh := githubTriggerWorld(t)
	ctx := t.Context()
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "fix-by-hand", Purpose: "agent", Repo: gh.CloneURL("acme/app"),
		Task: "Fix the flaky test\n\nIt fails on Tuesdays.", OpenPR: true})
	if err != nil {
		t.Fatal(err)
	}
	commit := pushBranch(t, gh.BarePath("acme/app"), "berth/fix-by-hand")
	w.finishRun(t, sandbox.ID(sb.ID), agentrun.RunSucceeded, "berth/fix-by-hand", commit, "")
	if pulls := gh.Pulls("acme/app"); len(pulls) != 1 || pulls[0].Head != "berth/fix-by-hand" || pulls[0].Title != "Fix the flaky test" || !pulls[0].Draft {
		t.Errorf("pull requests: %+v", pulls)
	}
	var e *api.Error
	for name, req := range map[string]api.CreateSandbox{
		"an engineer sandbox": {Name: "eng", Repo: gh.CloneURL("acme/app"), SSHKeys: []string{sshKey}, OpenPR: true},
		"no repository":       {Name: "norepo", Purpose: "agent", Task: "x", OpenPR: true},
		"a reviewer":          {Name: "rev", Purpose: "agent", Repo: gh.CloneURL("acme/app"), Task: "x", Role: "reviewer", OpenPR: true},
	} {
		if _, err := w.owner.CreateSandbox(ctx, req); !errors.As(err, &e) || e.Field != "open_pr" {
			t.Errorf("%s with --open-pr: %v, want a field error on open_pr", name, err)
		}
	}
	local := newWorld(t)
	local.allowRepos(t, "acme")
	if _, err := local.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "x", OpenPR: true}); !errors.As(err, &e) || e.Field != "open_pr" {
		t.Errorf("--open-pr on the local forge: %v, want a field error on open_pr", err)
	}
	if all, _ := local.owner.Sandboxes(ctx, client.ListOptions{}); len(all) != 0 {
		t.Errorf("a refused create made %d sandboxes", len(all))
	}
}

// TestGenericWebhookTrigger: a generic webhook's delivery, signed with
// the trigger's secret over its timestamp and body, starts a run whose
// task is filled from the JSON it sent; the same delivery id again starts
// nothing; a stale timestamp, another secret, or another trigger's
// address is refused alike (401); a body that is not a JSON object is a
// 400 naming the body.
func TestGenericWebhookTrigger(t *testing.T) {
	w := newWorld(t)
	w.allowRepos(t, "acme")
	ctx := t.Context()
	noPR := false
	tr, err := w.admin.SetTrigger(ctx, "acme", "default", "deploy", api.Trigger{On: "webhook", Repo: "acme/app",
		Task: "Check the deploy of {{.Payload.service}} at {{.Payload.version}}", Concurrency: 5, OpenPR: &noPR})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Secret == "" || tr.HookURL != w.url+"/hooks/v1/triggers/"+tr.ID {
		t.Fatalf("trigger %+v: want its secret and hook URL", tr)
	}
	send := func(url, secretKey, delivery string, at time.Time, body string) (int, api.HookAnswer) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		eventtest.SignWebhook(req, []byte(secretKey), delivery, at, []byte(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out api.HookAnswer
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	body := `{"service":"billing","version":"v42"}`
	st, out := send(tr.HookURL, tr.Secret, "w-1", time.Now(), body)
	if st != http.StatusAccepted || len(out.Deliveries) != 1 || out.Deliveries[0].Outcome != "started" {
		t.Fatalf("a signed delivery: %d %+v", st, out)
	}
	sb, _ := w.st.GetSandbox(ctx, sandbox.ID(out.Deliveries[0].Sandbox))
	if sb.Task != "Check the deploy of billing at v42" {
		t.Errorf("the task: %q", sb.Task)
	}
	if st, again := send(tr.HookURL, tr.Secret, "w-1", time.Now(), body); st != http.StatusAccepted || len(again.Deliveries) != 1 || !again.Deliveries[0].Again {
		t.Errorf("the same delivery again: %d %+v", st, again)
	}
	other, err := w.admin.SetTrigger(ctx, "acme", "default", "other", api.Trigger{On: "webhook", Repo: "acme/app", Task: "x", OpenPR: &noPR})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		url, secret string
		at          time.Time
	}{
		"a stale timestamp":        {tr.HookURL, tr.Secret, time.Now().Add(-10 * time.Minute)},
		"another secret":           {tr.HookURL, "bws_not-the-secret", time.Now()},
		"another trigger's secret": {tr.HookURL, other.Secret, time.Now()},
		"an address of no trigger": {w.url + "/hooks/v1/triggers/trg_nosuchtriggeratall1", tr.Secret, time.Now()},
	} {
		if st, _ := send(c.url, c.secret, "w-x", c.at, body); st != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, st)
		}
	}
	if st, _ := send(tr.HookURL, tr.Secret, "w-2", time.Now(), `["not an object"]`); st != http.StatusBadRequest {
		t.Errorf("a JSON array: %d, want 400", st)
	}
	// Deleted, its address answers as no trigger's.
	if err := w.admin.DeleteTrigger(ctx, "acme", "default", "deploy"); err != nil {
		t.Fatal(err)
	}
	if st, _ := send(tr.HookURL, tr.Secret, "w-3", time.Now(), body); st != http.StatusUnauthorized {
		t.Errorf("a deleted trigger's address: %d, want 401", st)
	}
}

// TestProjectTurnsPullRequestsOff: a project whose agent configuration
// says pull_requests: off opens none, whatever its trigger says (the
// issue is told the branch instead), and refuses --open-pr at create.
func TestProjectTurnsPullRequestsOff(t *testing.T) {
	w, gh := githubTriggerWorld(t)
	ctx := t.Context()
	if _, err := w.admin.SetAgentConfig(ctx, "acme", "default", api.AgentConfig{PullRequests: "off"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.SetTrigger(ctx, "acme", "default", "fix", api.Trigger{On: "github:labeled:berth", Repo: gh.CloneURL("acme/app")}); err != nil {
		t.Fatal(err)
	}
	n := gh.AddIssue("acme/app", "Fix it", "")
	st, out := deliver(t, w, hookSecret, "issues", "p-1", eventtest.GitHubIssueLabeled("acme/app", gh.URL(), n, "Fix it", "", "berth", "octocat"))
	if st != http.StatusAccepted || len(out.Deliveries) != 1 || out.Deliveries[0].Outcome != "started" {
		t.Fatalf("the delivery: %d %+v", st, out)
	}
	id := sandbox.ID(out.Deliveries[0].Sandbox)
	sb, _ := w.st.GetSandbox(ctx, id)
	commit := pushBranch(t, gh.BarePath("acme/app"), "berth/"+sb.Name)
	w.finishRun(t, id, agentrun.RunSucceeded, "berth/"+sb.Name, commit, "")
	if pulls := gh.Pulls("acme/app"); len(pulls) != 0 {
		t.Errorf("pull requests opened with pull_requests off: %+v", pulls)
	}
	if c := gh.Comments("acme/app", n); len(c) != 1 || !strings.Contains(c[0], "berth/"+sb.Name) {
		t.Errorf("the issue's comments: %q, want one naming the branch", c)
	}
	var e *api.Error
	if _, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "by-hand", Purpose: "agent", Repo: gh.CloneURL("acme/app"), Task: "x", OpenPR: true}); !errors.As(err, &e) ||
		e.Field != "open_pr" || !strings.Contains(e.Message, "pull_requests: off") {
		t.Errorf("--open-pr with pull_requests off: %v", err)
	}
}

// TestConcurrencyAcrossReplicas: deliveries of different ids reaching two
// replicas at once cannot together pass a trigger's concurrency of one:
// one starts, the others are skipped saying why.
func TestConcurrencyAcrossReplicas(t *testing.T) {
	w := newWorld(t)
	w.allowRepos(t, "acme")
	ctx := t.Context()
	noPR := false
	in, err := w.admin.SetTrigger(ctx, "acme", "default", "one", api.Trigger{On: "webhook", Repo: "acme/app", Task: "Run {{.Payload.n}}", OpenPR: &noPR})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := w.triggers.ByID(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	replicas := []*trigger.Service{w.triggers, trigger.NewService(w.st, w.accounts, nil, w.sandboxes, w.forge,
		trigger.Config{Key: []byte("matrix trigger key"), MaxTask: sandbox.MaxTask}, slog.New(slog.DiscardHandler), time.Now)}
	var (
		mu       sync.Mutex
		outcomes []string
		wg       sync.WaitGroup
	)
	for i := range 6 {
		wg.Go(func() {
			e := event.Event{Source: event.SourceWebhook, Kind: event.KindWebhook, Delivery: fmt.Sprintf("c-%d", i), Payload: map[string]any{"n": i}}
			rs, err := replicas[i%2].Deliver(ctx, tr, e)
			if err != nil || len(rs) != 1 {
				t.Errorf("delivery %d: %+v, %v", i, rs, err)
				return
			}
			mu.Lock()
			outcomes = append(outcomes, string(rs[0].Delivery.Outcome)+": "+rs[0].Delivery.Reason)
			mu.Unlock()
		})
	}
	wg.Wait()
	started := 0
	for _, o := range outcomes {
		switch {
		case o == "started: ":
			started++
		case !strings.HasPrefix(o, "skipped: concurrency limit"):
			t.Errorf("an outcome: %q", o)
		}
	}
	if started != 1 {
		t.Errorf("%d of 6 deliveries started with a concurrency of 1: %q", started, outcomes)
	}
}
