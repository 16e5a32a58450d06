package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// seedRepo makes a git repository with a commit on main and imports it
// into the gateway's local forge as name.
func (g *gateway) seedRepo(name string) string {
	g.t.Helper()
	return g.seedRepoFiles(name, nil)
}

// seedRepoFiles is seedRepo with files (path → content) in the commit.
func (g *gateway) seedRepoFiles(name string, files map[string]string) string {
	g.t.Helper()
	src := g.t.TempDir()
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, path)), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, path), []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+src, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			g.t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	g.berth("repo", "import", name, src)
	g.allowRepos("acme")
	return strings.TrimSpace(string(g.berth("repo", "path", name)))
}

// allowRepos sets the organisation's allowed_repos as its operator.
func (g *gateway) allowRepos(repos ...string) {
	g.t.Helper()
	gr, err := g.operator.Guardrail(context.Background(), "main", "")
	if err != nil {
		g.t.Fatal(err)
	}
	gr.AllowedRepos = repos
	if _, err := g.operator.SetGuardrail(context.Background(), "main", "", gr); err != nil {
		g.t.Fatal(err)
	}
}

// inSandbox runs a shell command in a sandbox's container as its user, with
// the sandbox's environment, as the agent would.
func (g *gateway) inSandbox(id, script string) (string, error) {
	out, err := podmanOn(g.root, "exec", "--user", "1001", "--workdir", "/home/berth", "berth-"+id, "sh", "-c", script).CombinedOutput()
	return string(out), err
}

func gitIn(t *testing.T, bare string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir", bare}, args...)...).CombinedOutput()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// TestAgentRepositoryThroughTheGateway: an agent sandbox on podman clones a
// local repository through the gateway with its own key (no forge token in
// it), commits, and its branch berth/<name> appears in the repository; the
// default branch is refused with the reason in git's output.
func TestAgentRepositoryThroughTheGateway(t *testing.T) {
	g := startGateway(t, "BERTH_SANDBOX_GIT_FORGE=local")
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "fix-1", Purpose: "agent", Repo: "acme/app", Task: "fix it"})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	// An agent sandbox is running once its container starts; berth-init
	// may still be cloning.
	out, err := g.inSandbox(sb.ID, `for i in $(seq 100); do git -C ~/app rev-parse -q --verify HEAD >/dev/null 2>&1 && break; sleep 0.1; done
cd ~/app && git remote get-url origin && (env | grep -c '^BERTH_GIT_TOKEN=' || true) && git log --oneline | wc -l`)
	lines := lines(out)
	if err != nil || len(lines) != 3 || !strings.HasSuffix(lines[0], "/git/acme/app.git") || lines[1] != "0" || lines[2] != "1" {
		t.Log(g.podman("logs", "berth-"+sb.ID))
		t.Fatalf("the agent's checkout: %q (%v); want the gateway's remote, no forge token, one commit", out, err)
	}
	out, err = g.inSandbox(sb.ID, `cd ~/app && echo fixed > fix.txt && git add fix.txt && git commit -q -m fix && git push -q origin HEAD:refs/heads/berth/fix-1 && git rev-parse HEAD`)
	if err != nil {
		t.Fatalf("push berth/fix-1 from the sandbox: %v\n%s", err, out)
	}
	if got := gitIn(t, bare, "rev-parse", "berth/fix-1"); got != strings.TrimSpace(out) {
		t.Errorf("berth/fix-1 in the repository is %q, want %q", got, strings.TrimSpace(out))
	}
	out, err = g.inSandbox(sb.ID, `cd ~/app && git push origin HEAD:main 2>&1`)
	if err == nil || !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, "never writes the default branch") {
		t.Errorf("push main from the sandbox: %v\n%s\nwant it rejected with the reason", err, out)
	}
	if main := gitIn(t, bare, "log", "-1", "--format=%s", "main"); main != "init" {
		t.Errorf("main moved to %q", main)
	}
}

// TestEngineerTokenMode: an engineer sandbox of a token-mode class pushes a
// feature branch with plain `git push` over ssh, with no prompt:
// git-credential-berth hands git the token.
func TestEngineerTokenMode(t *testing.T) {
	g := startGateway(t, "BERTH_SANDBOX_GIT_FORGE=local")
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	file := `sandboxes:
  - name: tokens
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    purposes: [engineer]
    git: token
`
	if _, err := g.operator.ApplyClasses(ctx, "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	key, pub := sshKey(t)
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "tokens", Repo: "acme/app", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	out := ssh(t, key, g.ip(sb.ID), `cd ~/app && git checkout -q -b feature && echo hi > f.txt && git add f.txt && git commit -q -m feature && GIT_TERMINAL_PROMPT=0 git push -q origin feature 2>&1 && git log -1 --format=%an`)
	if got := gitIn(t, bare, "log", "-1", "--format=%s", "feature"); got != "feature" {
		t.Fatalf("feature in the repository: %q; the sandbox said\n%s", got, out)
	}
	if !strings.HasSuffix(strings.TrimSpace(out), "operator") {
		t.Errorf("the commit's author is %q, want the sandbox's owner", out)
	}
}
