package e2e_test

import (
	"bytes"
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

// hook posts a delivery to the gateway, signed by sign, and returns what
// it answered.
func (g *gateway) hook(path string, sign func(*http.Request, []byte), body []byte) (int, api.HookAnswer) {
	g.t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.url+path, bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	sign(req, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.HookAnswer
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// startGitHubGateway is an agent gateway of claude-code runs (inference
// from inferenceFile, machine time priced) whose forge is the GitHub
// stand-in, a GitHub App's, holding acme/app, which acme may reach; sign
// signs a delivery of event as that App's webhook.
func startGitHubGateway(t *testing.T, inferenceFile string) (g *gateway, gh *forgetest.GitHub, sign func(event, delivery string) func(*http.Request, []byte)) {
	t.Helper()
	key, pem := forgetest.NewAppKey(t)
	gh = forgetest.NewGitHub(t, "4242", &key.PublicKey, "acme/app")
	dir := t.TempDir()
	keyFile, secretFile := filepath.Join(dir, "app.pem"), filepath.Join(dir, "hook.secret")
	const secret = "the App's webhook secret"
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g = startAgentGatewayWith(t, inferenceFile, []string{
		"BERTH_SANDBOX_GIT_FORGE=github", "BERTH_SANDBOX_GIT_URL=" + gh.URL(), "BERTH_SANDBOX_GIT_APP_ID=4242",
		"BERTH_SANDBOX_GIT_APP_KEY_FILE=" + keyFile, "BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE=" + secretFile,
		"BERTH_CORE_HOUR_USD=0.05",
	}, "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("the claude-code image is not built")
	}
	g.allowRepos("acme")
	return g, gh, func(event, delivery string) func(*http.Request, []byte) {
		return func(r *http.Request, b []byte) { eventtest.SignGitHub(r, []byte(secret), event, delivery, b) }
	}
}

// TestTriggerOnGitHubEndToEnd replays a GitHub App's real-shaped
// deliveries at a gateway whose forge is the GitHub stand-in: an issue
// labelled berth starts an agent run of the real Claude Code against the
// scripted model in a podman sandbox; the host pushes its commit to
// berth/<name> on the stand-in; the gateway opens a draft pull request
// whose body has the run's cost, tokens and machine time included, and
// comments on the issue with its address. The same delivery again starts
// nothing; another while the run is live is skipped at the trigger's
// concurrency limit, saying so. The stand-in checks the App's JWT, the
// installation token's repository and permissions for every call, and the
// branches of the pull request.
func TestTriggerOnGitHubEndToEnd(t *testing.T) {
	g, gh, signed := startGitHubGateway(t, inferenceYAML)
	out := string(g.berth("trigger", "set", "fix", "--on", "github:labeled:berth", "--repo", gh.CloneURL("acme/app")))
	if !strings.Contains(out, api.GitHubHookPath) {
		t.Fatalf("trigger set: %s", out)
	}

	n := gh.AddIssue("acme/app", "Write f.txt", "Write f.txt and commit it.")
	labeled := eventtest.GitHubIssueLabeled("acme/app", gh.URL(), n, "Write f.txt", "Write f.txt and commit it.", "berth", "octocat")
	sign := func(delivery string) func(*http.Request, []byte) { return signed("issues", delivery) }
	st, first := g.hook(api.GitHubHookPath, sign("7f1c0a00-1"), labeled)
	if st != http.StatusAccepted || len(first.Deliveries) != 1 || first.Deliveries[0].Outcome != "started" {
		t.Fatalf("the delivery: %d %+v", st, first)
	}
	id := first.Deliveries[0].Sandbox
	if st, again := g.hook(api.GitHubHookPath, sign("7f1c0a00-1"), labeled); st != http.StatusAccepted || len(again.Deliveries) != 1 || !again.Deliveries[0].Again {
		t.Errorf("the same delivery again: %d %+v", st, again)
	}
	if st, busy := g.hook(api.GitHubHookPath, sign("7f1c0a00-2"), labeled); st != http.StatusAccepted || len(busy.Deliveries) != 1 ||
		busy.Deliveries[0].Outcome != "skipped" || !strings.Contains(busy.Deliveries[0].Reason, "concurrency") {
		t.Errorf("a delivery while the run is live: %d %+v", st, busy)
	}

	end := g.waitSandbox(g.operator, id, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "terminated" || sb.State == "failed"
	})
	if end.Run == nil || end.Run.State != "succeeded" || end.Run.Commit == "" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", end.Name)
		t.Fatalf("the run: %s (%s) %+v\n%s", end.State, end.Reason, end.Run, log)
	}
	if got := gitIn(t, gh.BarePath("acme/app"), "show", end.Run.Commit+":f.txt"); got != "hi" {
		t.Errorf("f.txt on berth/%s at GitHub: %q", end.Name, got)
	}
	var pulls []forgetest.GitHubPull
	waitFor(t, "the draft pull request", 30*time.Second, func() bool { pulls = gh.Pulls("acme/app"); return len(pulls) == 1 })
	p := pulls[0]
	if !p.Draft || p.Head != "berth/"+end.Name || p.Base != "main" || p.Title != "Write f.txt" {
		t.Errorf("the pull request: %+v", p)
	}
	for _, s := range []string{"Cost", "in all", "tokens", "machine:", end.Run.Commit, "claude-code"} {
		if !strings.Contains(p.Body, s) {
			t.Errorf("the pull request's body lacks %q:\n%s", s, p.Body)
		}
	}
	t.Logf("run %s in %s; pull request body:\n%s", end.Run.State, end.Run.EndedAt.Sub(end.Run.StartedAt), p.Body)
	var comments []string
	waitFor(t, "the issue's comment", 30*time.Second, func() bool {
		if comments = gh.Comments("acme/app", n); len(comments) > 1 {
			t.Fatalf("the issue got %d comments: %q", len(comments), comments)
		}
		return len(comments) == 1
	})
	if !strings.Contains(comments[0], p.URL) || !strings.Contains(comments[0], "in all") {
		t.Errorf("the issue's comment: %q", comments[0])
	}
	show := string(g.berth("trigger", "show", "fix"))
	for _, s := range []string{"7f1c0a00-1", "started", "7f1c0a00-2", "skipped", "concurrency"} {
		if !strings.Contains(show, s) {
			t.Errorf("trigger show lacks %q:\n%s", s, show)
		}
	}
}

// TestTriggerOnGitLabEndToEnd: a GitLab project webhook's note "/berth
// run …" on an issue, sent to the trigger's hook URL with its secret
// token, starts a run of the real Claude Code on podman; the gateway
// opens a draft merge request and notes on the issue. A wrong token is
// refused, and the same delivery (Idempotency-Key) starts nothing.
func TestTriggerOnGitLabEndToEnd(t *testing.T) {
	gl := forgetest.NewGitLab(t, "glpat-deployment", "acme/app")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "gitlab.token")
	if err := os.WriteFile(tokenFile, []byte("glpat-deployment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startAgentGatewayWith(t, inferenceYAML, []string{
		"BERTH_SANDBOX_GIT_FORGE=gitlab", "BERTH_SANDBOX_GIT_URL=" + gl.URL(), "BERTH_SANDBOX_GIT_TOKEN_FILE=" + tokenFile,
	}, "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("the claude-code image is not built")
	}
	g.allowRepos("acme")
	if out, err := g.berthErr("trigger", "show", "ask"); err == nil || !strings.Contains(err.Error()+string(out), "no trigger named ask") {
		t.Errorf("show before any was set: %v\n%s", err, out)
	}
	var tr api.Trigger
	g.berth("trigger", "set", "ask", "--on", "gitlab:comment:/berth run", "--repo", gl.CloneURL("acme/app"))
	if err := json.Unmarshal(g.berth("trigger", "show", "ask", "-o", "json"), &tr); err != nil || tr.Secret == "" || !strings.Contains(tr.HookURL, "/hooks/v1/triggers/") {
		t.Fatalf("the trigger: %+v, %v", tr, err)
	}
	hookURL, err := url.Parse(tr.HookURL)
	if err != nil {
		t.Fatal(err)
	}
	path := hookURL.Path
	iid := gl.AddIssue("acme/app", "Write f.txt", "It is missing.")
	note := eventtest.GitLabNote("acme/app", gl.URL(), iid, false, "Write f.txt", "It is missing.", "/berth run write f.txt and commit it", "ada")
	sign := func(token, uuid string) func(*http.Request, []byte) {
		return func(r *http.Request, b []byte) {
			eventtest.SignGitLab(r, token, "Note Hook", uuid)
			r.Header.Set("Idempotency-Key", uuid)
		}
	}
	if st, _ := g.hook(path, sign("not the token", "u-0"), note); st != http.StatusUnauthorized {
		t.Errorf("a wrong secret token: %d, want 401", st)
	}
	st, first := g.hook(path, sign(tr.Secret, "u-1"), note)
	if st != http.StatusAccepted || len(first.Deliveries) != 1 || first.Deliveries[0].Outcome != "started" {
		t.Fatalf("the note: %d %+v", st, first)
	}
	if st, again := g.hook(path, sign(tr.Secret, "u-1"), note); st != http.StatusAccepted || len(again.Deliveries) != 1 || !again.Deliveries[0].Again {
		t.Errorf("the same delivery again: %d %+v", st, again)
	}
	end := g.waitSandbox(g.operator, first.Deliveries[0].Sandbox, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "terminated" || sb.State == "failed"
	})
	if end.Run == nil || end.Run.State != "succeeded" || end.Run.Commit == "" {
		t.Fatalf("the run: %s (%s) %+v", end.State, end.Reason, end.Run)
	}
	var mrs []forgetest.GitLabMergeRequest
	waitFor(t, "the draft merge request", 30*time.Second, func() bool { mrs = gl.MergeRequests("acme/app"); return len(mrs) == 1 })
	if mr := mrs[0]; !mr.Draft || mr.Source != "berth/"+end.Name || mr.Target != "main" || !strings.Contains(mr.Description, "Cost") {
		t.Errorf("the merge request: %+v", mr)
	}
	var notes []string
	waitFor(t, "the issue's note", 30*time.Second, func() bool { notes = gl.Notes("acme/app", forge.ThreadIssue, iid); return len(notes) == 1 })
	if !strings.Contains(notes[0], "merge_requests") {
		t.Errorf("the issue's note: %q", notes[0])
	}
}
