// Command start measures how long a sandbox takes from create to ready on
// a podman gateway, against a bare `podman run` of the same image in the
// same run, and prints medians and their ratio.
//
// It needs a running gateway on the podman driver (BERTH_URL, and
// BERTH_API_KEY of a user with a class named by -class), and the gateway's
// podman root (-podman-root) for the baseline. For agent runs the gateway
// runs -runner in -agent-image on the model -model, on the repository
// bench/repo (a local forge's, whose directory is -repo), and its runs join
// the allowlist network -agent-network. bench/start.sh sets all of that up
// on a scratch data directory.
//
// What is timed:
//   - engineer, berth: POST create → the API reports running, which the
//     gateway says once sshd in the sandbox answers with its greeting;
//     baseline: `podman run -d` with the same hardening flags → sshd's
//     greeting on the container's address. A second baseline makes a
//     volume first and mounts it as HOME, as the driver does: the first
//     ratio is the figure, the second what berth adds to podman
//     beyond the home volume (about 25 ms of podman run's own here).
//   - agent run, berth: POST create of an agent sandbox with a task →
//     the API reports running, which the gateway says once the driver's
//     `podman run -d` of the runner's image has returned: the run's
//     checkout, its prompt file, its key and environment and the container
//     are made on the way; baseline: `podman run -d` of the same image
//     with the argv the driver builds for a run (podman.AgentArgs: its
//     hardening, the class's memory and cpus, a checkout of the same
//     repository with a prompt file mounted at /work from a host
//     directory, the same allowlist network, an env file, the runner's
//     arguments for the same model) until it returns. The baseline's
//     checkout and env file are made before its clock starts.
//   - engineer from a warm pool (with -warm-class, on a gateway with
//     BERTH_SANDBOX_WARM=on): POST create → running, the sandbox claimed
//     from the class's pool; baseline: the cold create of the engineer
//     class (the same image and size) in the same run. Before each claim
//     the pool is given time to fill again, so that every claim finds a
//     member ready, as it would on a gateway not measured back to back.
//
// An agent sandbox without a runner (an agent-purpose machine with a home
// volume, what this measured before runs had images) is not measured: a
// gateway with runner images gives every agent sandbox a runner, and such
// a machine is not what an agent run starts.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/scratch"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	driver "berth.dev/berth/internal/driver/podman"
)

func main() {
	n := flag.Int("n", 10, "runs of each kind")
	class := flag.String("class", "standard", "the engineer class")
	image := flag.String("image", "localhost/berth-sandbox:latest", "the engineer class's image, for the baseline")
	root := flag.String("podman-root", "", "the gateway's podman root (BERTH_SANDBOX_PODMAN_ROOT)")
	key := flag.String("ssh-key", "", "an ssh public key file for engineer sandboxes")
	warmClass := flag.String("warm-class", "", "an engineer class with a warm pool, measured against -class (none: not measured)")
	var a agentBench
	flag.StringVar(&a.class, "agent-class", "agent", "the agent class")
	flag.StringVar(&a.image, "agent-image", "localhost/berth-agent-claude-code:latest", "the runner's image (the gateway's BERTH_RUNNER_IMAGES), for the baseline")
	flag.StringVar(&a.runner, "runner", "claude-code", "the agent runs' runner")
	flag.StringVar(&a.model, "model", "scripted", "the model the agent runs start on")
	flag.StringVar(&a.network, "agent-network", driver.DefaultAgentNetwork, "the allowlist network runs join (BERTH_SANDBOX_PODMAN_AGENT_NETWORK)")
	flag.StringVar(&a.repo, "repo", "", "a clone of bench/repo, for the baseline's checkouts")
	flag.StringVar(&a.checkouts, "checkouts", "", "a directory for the baseline's checkouts (default a temporary one)")
	flag.Parse()
	if err := run(*n, *class, *warmClass, *image, *root, *key, a); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int, class, warmClass, image, root, keyFile string, a agentBench) error {
	pub, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("-ssh-key: %w", err)
	}
	c := client.New(os.Getenv("BERTH_URL"), os.Getenv("BERTH_API_KEY"), nil)
	pm := podman{root: root}
	ctx := context.Background()
	if err := a.setUp(ctx, c); err != nil {
		return err
	}
	defer a.tearDown()
	var engB, engP, engV, agB, agP, warmB []time.Duration
	var loads []string
	for i := range n {
		loads = append(loads, scratch.LoadAvg())
		// Alternate so drift in the machine's load touches both alike.
		d, err := pm.engineer(ctx, image, strings.TrimSpace(string(pub)), i, false)
		if err != nil {
			return err
		}
		engP = append(engP, d)
		if d, err = pm.engineer(ctx, image, strings.TrimSpace(string(pub)), i, true); err != nil {
			return err
		}
		engV = append(engV, d)
		if d, err = berth(ctx, c, api.CreateSandbox{Name: fmt.Sprintf("bench-eng-%d", i), Class: class, SSHKeys: []string{strings.TrimSpace(string(pub))}}); err != nil {
			return err
		}
		engB = append(engB, d)
		if d, err = pm.agentRun(ctx, a, i); err != nil {
			return err
		}
		agP = append(agP, d)
		if d, err = berth(ctx, c, api.CreateSandbox{Name: fmt.Sprintf("bench-agent-%d", i), Class: a.class, Purpose: "agent",
			Repo: "bench/repo", Task: "benchmark", Runner: a.runner, Model: a.model}); err != nil {
			return err
		}
		agB = append(agB, d)
		fmt.Fprintf(os.Stderr, "run %d/%d: engineer %v vs %v, agent %v vs %v", i+1, n, engB[i], engP[i], agB[i], agP[i])
		if warmClass != "" {
			if err := pm.poolFull(ctx, warmClass); err != nil {
				return err
			}
			if d, err = berth(ctx, c, api.CreateSandbox{Name: fmt.Sprintf("bench-warm-%d", i), Class: warmClass, SSHKeys: []string{strings.TrimSpace(string(pub))}}); err != nil {
				return err
			}
			warmB = append(warmB, d)
			fmt.Fprintf(os.Stderr, ", from the pool %v", d)
			// The claim's refill (a member made in the background) must
			// not run under the next run's measures.
			if err := pm.poolFull(ctx, warmClass); err != nil {
				return err
			}
		}
		fmt.Fprintln(os.Stderr)
	}
	load := loads[len(loads)/2]
	fmt.Printf("create→ready, median of %d (podman, runc, one host; load %s)\n", n, load)
	fmt.Printf("%-22s %12s %30s %7s\n", "sandbox", "berth", "baseline", "ratio")
	rows := []struct {
		kind, ready, baseline, goal string
		berth, bare                 []time.Duration
	}{
		{"engineer", "ready", "bare podman run", "≤ 1.10", engB, engP},
		// What berth does beyond podman, the home volume aside: the same
		// bare run with a volume made for it and mounted as HOME.
		{"engineer (vs a run with its volume)", "ready", "bare podman run + volume", "", engB, engV},
		{"agent run", "agent started", "bare podman run -d, same argv", "≤ 1.15", agB, agP},
	}
	if warmClass != "" {
		rows = append(rows, struct {
			kind, ready, baseline, goal string
			berth, bare                 []time.Duration
		}{"engineer, warm pool", "ready", "cold create, same class", "≤ 0.25 and ≤ 60 ms", warmB, engB})
	}
	for _, r := range rows {
		b, p := stats.Median(r.berth), stats.Median(r.bare)
		ratio := float64(b) / float64(p)
		fmt.Printf("%-22s %12s %30s %7.2f\n", r.kind, b.Round(time.Millisecond), r.baseline+" "+p.Round(time.Millisecond).String(), ratio)
		if err := report.Emit(report.Figure{Bench: "start", Name: r.kind + " create → " + r.ready, Value: b.Round(time.Millisecond).String(),
			Baseline: r.baseline + " " + p.Round(time.Millisecond).String(), Ratio: ratio, Goal: r.goal, N: n, Load: load}); err != nil {
			return err
		}
	}
	return nil
}

// poolFull waits until class's pool has two running members nobody
// claimed (bench/start.sh makes it warm: 2), and a moment more for their
// sshd: a member is claimed only once it answers.
func (p podman) poolFull(ctx context.Context, class string) error {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := p.cmd(ctx, nil, "ps", "--filter", "label=berth.class="+class, "--filter", "label=berth.pool", "--format", "{{.Names}}").Output()
		if err != nil {
			return fmt.Errorf("podman ps: %v", err)
		}
		// Claimed members keep their pool's labels; count what is not.
		free := 0
		for _, name := range strings.Fields(string(out)) {
			if !p.claimed(name) {
				free++
			}
		}
		if free >= 2 {
			time.Sleep(time.Second)
			return nil
		}
	}
	return fmt.Errorf("the %s pool did not fill within 2 minutes", class)
}

// claimed reports whether a pool member's control directory has had a
// ready file: only a claim brings one.
func (p podman) claimed(name string) bool {
	matches, _ := filepath.Glob(filepath.Join(p.root, "pools", "*", "members", name, "ready"))
	return len(matches) > 0
}

// berth creates a sandbox, waits until the API says running, and
// terminates it; it returns the create→running time.
func berth(ctx context.Context, c *client.Client, req api.CreateSandbox) (time.Duration, error) {
	start := time.Now()
	sb, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return 0, err
	}
	defer c.Terminate(context.WithoutCancel(ctx), sb.ID)
	for sb.State == "starting" {
		time.Sleep(5 * time.Millisecond)
		if sb, err = c.Sandbox(ctx, sb.ID); err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	if sb.State != "running" {
		return 0, fmt.Errorf("sandbox %s is %s: %s", sb.Name, sb.State, sb.Reason)
	}
	return d, nil
}

type podman struct{ root string }

func (p podman) cmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.root+"/containers.conf", "CONTAINERS_STORAGE_CONF="+p.root+"/storage.conf")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// hardened are the flags the driver uses too, minus labels and volume.
var hardened = []string{"--user", "1001:1001", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
	"--pids-limit", "4096", "--memory", "1g", "--cpus", "1"}

// engineer times a bare engineer container's podman run → sshd's
// greeting; with volume, a volume made for it first (podman volume
// create, timed) and mounted as HOME, as the driver does.
func (p podman) engineer(ctx context.Context, image, pub string, i int, volume bool) (time.Duration, error) {
	name := fmt.Sprintf("bench-bare-eng-%d-%d-%v", os.Getpid(), i, volume)
	env := []string{"BERTH_SANDBOX_ID=sbx_bench", "BERTH_SANDBOX_NAME=bench", "BERTH_SANDBOX_PURPOSE=engineer", "BERTH_AUTHORIZED_KEYS=" + pub}
	args := append([]string{"run", "-d", "--name", name}, hardened...)
	for _, e := range env {
		args = append(args, "--env", strings.SplitN(e, "=", 2)[0])
	}
	start := time.Now()
	if volume {
		if out, err := p.cmd(ctx, nil, "volume", "create", name).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("podman volume create: %v: %s", err, out)
		}
		defer p.cmd(context.WithoutCancel(ctx), nil, "volume", "rm", "-f", name).Run()
		args = append(args, "--volume", name+":/home/berth")
	}
	if out, err := p.cmd(ctx, env, append(args, image)...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("podman run: %v: %s", err, out)
	}
	defer p.cmd(context.WithoutCancel(ctx), nil, "rm", "-f", "-t", "0", name).Run()
	out, err := p.cmd(ctx, nil, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).Output()
	if err != nil {
		return 0, fmt.Errorf("podman inspect: %v", err)
	}
	addr := net.JoinHostPort(strings.TrimSpace(string(out)), "2222")
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if greets(addr) {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("bare engineer container never answered on %s", addr)
}

func greets(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-")
}
