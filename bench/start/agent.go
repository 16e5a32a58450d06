package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	driver "berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// agentBench is what an agent run is started with, on the gateway and in
// the baseline.
type agentBench struct {
	class, image, runner, model, network string
	// repo is cloned into checkouts for each baseline run.
	repo, checkouts string
	ownCheckouts    bool // checkouts was made by setUp, and tearDown removes it

	// From the gateway and the runner, by setUp.
	cpu    quantity.Millicores
	memory quantity.Bytes
	args   []string
	env    map[string]string
}

// setUp reads the agent class's size from the gateway, the runner's
// arguments and environment from its package, and makes the directory of
// the baseline's checkouts.
func (a *agentBench) setUp(ctx context.Context, c *client.Client) error {
	if a.repo == "" {
		return fmt.Errorf("-repo: a clone of bench/repo is needed for the baseline's checkouts")
	}
	classes, err := c.Classes(ctx, "")
	if err != nil {
		return err
	}
	i := slices.IndexFunc(classes, func(cl api.ClassStatus) bool { return cl.Name == a.class })
	if i < 0 {
		return fmt.Errorf("no class %s", a.class)
	}
	if a.cpu, err = quantity.ParseCPU(classes[i].CPU); err != nil {
		return fmt.Errorf("class %s: cpu: %w", a.class, err)
	}
	if a.memory, err = quantity.ParseBytes(classes[i].Memory); err != nil {
		return fmt.Errorf("class %s: memory: %w", a.class, err)
	}
	r, err := runner.Get(a.runner)
	if err != nil {
		return err
	}
	if a.args, err = r.ContainerArgs(runner.Options{Model: a.model}); err != nil {
		return err
	}
	// The variables a run is given (SPEC S15 and the runner's: the names
	// the driver passes a claude-code run), with values of the same kind:
	// podman reads them from the env file either way, and the container is
	// removed before it could use them.
	url := os.Getenv("BERTH_SANDBOX_PUBLIC_URL")
	runnerEnv, err := r.Env(runner.Gateway{BaseURL: url})
	if err != nil {
		return err
	}
	key := "bk_bench_" + strings.Repeat("x", 40)
	a.env = map[string]string{
		"BERTH_SANDBOX_ID": "sbx_bench", "BERTH_SANDBOX_NAME": "bench", "BERTH_SANDBOX_PURPOSE": "agent",
		"BERTH_SANDBOX_CLASS": a.class, "BERTH_SANDBOX_EXPIRES": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"BERTH_URL": url, "BERTH_BASE_URL": url, "BERTH_API_KEY": key, "BERTH_SESSION": "ses_bench",
		"BERTH_REPO": url + "/git/bench/repo", "BERTH_GIT_MODE": "gateway", "BERTH_GIT_CREDENTIAL_URL": url + "/sandbox/v1/git-credential",
		"BERTH_GIT_AUTHOR_NAME": "bench", "BERTH_GIT_AUTHOR_EMAIL": "bench@example.com",
		"BERTH_RUNNER": a.runner, "BERTH_MODEL": a.model, "BERTH_PROMPT_FILE": "/work/.berth-prompt.txt", "BERTH_RUNNER_FILES": "[]",
		"BERTH_PI_CONFIG": `{"providers":{}}`, "BERTH_PI_SETTINGS": `{}`,
		"ANTHROPIC_API_KEY": key, "ANTHROPIC_MODEL": a.model, "ANTHROPIC_CUSTOM_HEADERS": "X-Berth-Session: ses_bench",
		"GEMINI_CLI_CUSTOM_HEADERS": "X-Berth-Session: ses_bench", "OPENAI_BASE_URL": url + "/v1",
	}
	for _, v := range runnerEnv {
		a.env[v.Name] = v.Value
	}
	if a.checkouts == "" {
		if a.checkouts, err = os.MkdirTemp("", "bench-start-"); err != nil {
			return err
		}
		a.ownCheckouts = true
	}
	return os.MkdirAll(a.checkouts, 0o755)
}

// tearDown removes what setUp made.
func (a *agentBench) tearDown() {
	if a.ownCheckouts {
		_ = os.RemoveAll(a.checkouts)
	}
}

// agentRun is the baseline of an agent run: `podman run -d` with the argv
// the driver builds for a run (AgentArgs), timed until it returns. Its
// checkout (a clone of the repository with the prompt file, owned by the
// sandbox user, as the driver's) and env file are made before the clock
// starts, and removed with the container after.
func (p podman) agentRun(ctx context.Context, a agentBench, i int) (time.Duration, error) {
	// The container's name is berth-ID: bench/start.sh removes what a
	// stopped benchmark left by its pid.
	id := sandbox.ID(fmt.Sprintf("bench-bare-agent-%d-%d", os.Getpid(), i))
	dir := filepath.Join(a.checkouts, string(id))
	envFile := dir + ".env"
	defer os.Remove(envFile)
	defer os.RemoveAll(dir)
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", a.repo, dir).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("git clone: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".berth-prompt.txt"), []byte("benchmark"), 0o644); err != nil {
		return 0, err
	}
	if err := chownAll(dir, driver.SandboxUID); err != nil {
		return 0, err
	}
	var env strings.Builder
	for _, k := range slices.Sorted(maps.Keys(a.env)) {
		env.WriteString(k + "=" + a.env[k] + "\n")
	}
	if err := os.WriteFile(envFile, []byte(env.String()), 0o600); err != nil {
		return 0, err
	}
	// Another deployment's labels: the gateway's reconciler lists its own.
	cfg := driver.Config{Deployment: "bench-start", AgentNetwork: a.network}
	sb := sandbox.Sandbox{ID: id, Name: "bench", Org: "org_bench", Project: "prj_bench", Owner: "usr_bench",
		Purpose: sandbox.PurposeAgent, CPU: a.cpu, Memory: a.memory, Image: a.image}
	args := driver.AgentArgs(cfg, sb, sandbox.RunSpec{Work: dir, Args: a.args, Network: "allowlist"}, nil, envFile)
	start := time.Now()
	out, err := p.cmd(ctx, nil, args...).CombinedOutput()
	d := time.Since(start)
	_ = p.cmd(context.WithoutCancel(ctx), nil, "rm", "-f", "-t", "0", "berth-"+string(id)).Run()
	if err != nil {
		return 0, fmt.Errorf("podman run: %v: %s", err, out)
	}
	return d, nil
}

// chownAll gives the tree at dir to uid, as the driver's checkout is.
func chownAll(dir string, uid int) error {
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}
