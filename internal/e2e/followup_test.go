package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/trigger/event/eventtest"
)

// TestTriggerSessionFollowsItsPullRequest replays GitHub App deliveries
// at a gateway on the GitHub stand-in with a trigger set --session: an
// issue labelled berth starts a session of the real Claude Code on
// podman, whose first task opens a draft pull request; a review comment
// on that pull request's diff is the session's second task, which Claude
// Code runs as the continuation of the first conversation (the scripted
// model refuses it otherwise) and pushes on top; the pull request is told
// the task's summary and cost. The same review delivered twice starts one
// task; a plain comment there starts none.
func TestTriggerSessionFollowsItsPullRequest(t *testing.T) {
	script := filepath.Join(t.TempDir(), "session.json")
	if err := os.WriteFile(script, []byte(sessionScript), 0o644); err != nil {
		t.Fatal(err)
	}
	g, gh, sign := startGitHubGateway(t, strings.Replace(inferenceYAML, "script: tool", "script: "+script, 1))
	g.berth("trigger", "set", "fix", "--on", "github:labeled:berth", "--repo", gh.CloneURL("acme/app"), "--session")

	title, body := "Write one.txt", sessionMark+": write one.txt and commit it."
	n := gh.AddIssue("acme/app", title, body)
	st, first := g.hook(api.GitHubHookPath, sign("issues", "a11ce000-1"),
		eventtest.GitHubIssueLabeled("acme/app", gh.URL(), n, title, body, "berth", "octocat"))
	if st != http.StatusAccepted || len(first.Deliveries) != 1 || first.Deliveries[0].Outcome != "started" {
		t.Fatalf("the label: %d %+v", st, first)
	}
	id := first.Deliveries[0].Sandbox
	one := g.waitState(g.operator, id, "suspended", 4*time.Minute)
	if !one.Session || one.Run == nil || one.Run.State != "succeeded" || one.Run.Commit == "" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", one.Name)
		t.Fatalf("task 1: %s (%s) %+v\n%s", one.State, one.Reason, one.Run, log)
	}
	var pulls []forgetest.GitHubPull
	waitFor(t, "the draft pull request", 30*time.Second, func() bool { pulls = gh.Pulls("acme/app"); return len(pulls) == 1 })
	pr := pulls[0]

	// A plain comment on the pull request is the conversation's: no task.
	if st, plain := g.hook(api.GitHubHookPath, sign("issue_comment", "a11ce000-2"),
		eventtest.GitHubIssueComment("acme/app", gh.URL(), pr.Number, true, pr.Title, pr.Body, "Nice start.", "reviewer")); st != http.StatusAccepted || len(plain.Deliveries) != 0 {
		t.Errorf("a plain comment on the pull request: %d %+v", st, plain)
	}
	// A review comment on its diff is the session's next task, once.
	review := eventtest.GitHubReviewComment("acme/app", gh.URL(), pr.Number, pr.Title, pr.Body, "Now write two.txt and commit it.", "reviewer")
	st, next := g.hook(api.GitHubHookPath, sign("pull_request_review_comment", "a11ce000-3"), review)
	if st != http.StatusAccepted || len(next.Deliveries) != 1 || next.Deliveries[0].Outcome != "started" || next.Deliveries[0].Sandbox != id {
		t.Fatalf("the review: %d %+v", st, next)
	}
	if st, again := g.hook(api.GitHubHookPath, sign("pull_request_review_comment", "a11ce000-3"), review); st != http.StatusAccepted ||
		len(again.Deliveries) != 1 || !again.Deliveries[0].Again {
		t.Errorf("the same review again: %d %+v", st, again)
	}
	two := g.waitSandbox(g.operator, id, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "suspended" && sb.Run != nil && sb.Run.Seq == 2 || sb.State == "failed" || sb.State == "terminated"
	})
	run := two.Run
	if run == nil || run.Seq != 2 || run.State != "succeeded" || run.Commit == "" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", two.Name)
		t.Fatalf("task 2: %s (%s) %+v\n%s", two.State, two.Reason, run, log)
	}
	if !strings.Contains(run.Task, "Now write two.txt") || !strings.Contains(run.Task, pr.URL) {
		t.Errorf("task 2 was %q", run.Task)
	}
	if parent := gitIn(t, gh.BarePath("acme/app"), "rev-parse", run.Commit+"^"); parent != one.Run.Commit {
		t.Errorf("task 2's commit's parent at GitHub is %s, want task 1's %s", parent, one.Run.Commit)
	}
	var comments []string
	waitFor(t, "the pull request's comment", 90*time.Second, func() bool { comments = gh.Comments("acme/app", pr.Number); return len(comments) == 1 })
	for _, s := range []string{"task 2", run.Commit, "second task is done", "This task:", "the session so far"} {
		if !strings.Contains(comments[0], s) {
			t.Errorf("the pull request's comment lacks %q:\n%s", s, comments[0])
		}
	}
	if got := gh.Pulls("acme/app"); len(got) != 1 {
		t.Errorf("the session opened %d pull requests, want its one", len(got))
	}
	// A task given by hand is told on the pull request too.
	if _, err := g.berthErr("sandbox", "task", two.Name, "--task", "Say what you did.", "--follow"); err != nil {
		t.Fatalf("task 3: %v", err)
	}
	waitFor(t, "the pull request's second comment", 90*time.Second, func() bool { comments = gh.Comments("acme/app", pr.Number); return len(comments) == 2 })
	if !strings.Contains(comments[1], "task 3") {
		t.Errorf("the pull request's comment of task 3:\n%s", comments[1])
	}
	show := string(g.berth("trigger", "show", "fix"))
	for _, s := range []string{"a11ce000-1", "a11ce000-3", "started"} {
		if !strings.Contains(show, s) {
			t.Errorf("trigger show lacks %q:\n%s", s, show)
		}
	}
	if _, err := g.operator.Terminate(t.Context(), string(id)); err != nil {
		t.Fatal(err)
	}
}

// TestTriggerSessionFollowsItsMergeRequest is the same on GitLab: a
// project webhook's note "/berth run …" starts a session of the real
// Claude Code, whose first task opens a draft merge request; a note on
// that merge request's diff is its second task, which continues the
// conversation, and the merge request is told how it went.
func TestTriggerSessionFollowsItsMergeRequest(t *testing.T) {
	gl := forgetest.NewGitLab(t, "glpat-deployment", "acme/app")
	dir := t.TempDir()
	tokenFile, script := filepath.Join(dir, "gitlab.token"), filepath.Join(dir, "session.json")
	for file, data := range map[string]string{tokenFile: "glpat-deployment\n", script: sessionScript} {
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := startAgentGatewayWith(t, strings.Replace(inferenceYAML, "script: tool", "script: "+script, 1), []string{
		"BERTH_SANDBOX_GIT_FORGE=gitlab", "BERTH_SANDBOX_GIT_URL=" + gl.URL(), "BERTH_SANDBOX_GIT_TOKEN_FILE=" + tokenFile,
	}, "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("the claude-code image is not built")
	}
	g.allowRepos("acme")
	var tr api.Trigger
	g.berth("trigger", "set", "ask", "--on", "gitlab:comment:/berth run", "--repo", gl.CloneURL("acme/app"), "--session")
	if err := json.Unmarshal(g.berth("trigger", "show", "ask", "-o", "json"), &tr); err != nil || !tr.Session {
		t.Fatalf("the trigger: %+v, %v", tr, err)
	}
	hookURL, err := url.Parse(tr.HookURL)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(uuid string) func(*http.Request, []byte) {
		return func(r *http.Request, b []byte) {
			eventtest.SignGitLab(r, tr.Secret, "Note Hook", uuid)
			r.Header.Set("Idempotency-Key", uuid)
		}
	}
	iid := gl.AddIssue("acme/app", "Write one.txt", "It is missing.")
	st, first := g.hook(hookURL.Path, sign("u-1"),
		eventtest.GitLabNote("acme/app", gl.URL(), iid, false, "Write one.txt", "It is missing.", "/berth run "+sessionMark+": write one.txt and commit it", "ada"))
	if st != http.StatusAccepted || len(first.Deliveries) != 1 || first.Deliveries[0].Outcome != "started" {
		t.Fatalf("the note: %d %+v", st, first)
	}
	id := first.Deliveries[0].Sandbox
	one := g.waitState(g.operator, id, "suspended", 4*time.Minute)
	if one.Run == nil || one.Run.State != "succeeded" || one.Run.Commit == "" {
		t.Fatalf("task 1: %+v", one.Run)
	}
	var mrs []forgetest.GitLabMergeRequest
	waitFor(t, "the draft merge request", 30*time.Second, func() bool { mrs = gl.MergeRequests("acme/app"); return len(mrs) == 1 })
	mr := mrs[0]
	st, next := g.hook(hookURL.Path, sign("u-2"),
		eventtest.GitLabDiffNote("acme/app", gl.URL(), mr.IID, mr.Title, mr.Description, "Now write two.txt and commit it.", "bob"))
	if st != http.StatusAccepted || len(next.Deliveries) != 1 || next.Deliveries[0].Outcome != "started" || next.Deliveries[0].Sandbox != id {
		t.Fatalf("the diff note: %d %+v", st, next)
	}
	two := g.waitSandbox(g.operator, id, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "suspended" && sb.Run != nil && sb.Run.Seq == 2 || sb.State == "failed" || sb.State == "terminated"
	})
	if two.Run == nil || two.Run.State != "succeeded" || two.Run.Commit == "" {
		t.Fatalf("task 2: %s (%s) %+v", two.State, two.Reason, two.Run)
	}
	var notes []string
	waitFor(t, "the merge request's note", 30*time.Second, func() bool {
		notes = gl.Notes("acme/app", forge.ThreadChange, mr.IID)
		return len(notes) == 1
	})
	if !strings.Contains(notes[0], "task 2") || !strings.Contains(notes[0], "second task is done") {
		t.Errorf("the merge request's note: %q", notes[0])
	}
	if _, err := g.operator.Terminate(t.Context(), string(id)); err != nil {
		t.Fatal(err)
	}
}
