package e2e_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/kelos"
)

// TestKelosImageOnKubernetes runs the Kelos-shaped test image unchanged on
// the kubernetes driver, end to end: `berth serve` against a real
// kube-apiserver with the real agent-sandbox controller, whose pods a
// kubelet stand-in runs under podman (kubetest.RunPods). The pod's init
// container copies berth-init in from the sandbox image (with this tree's
// berth-init, BERTH_SANDBOX_INIT_IMAGE), and berth-init wraps the image's
// own entrypoint, as uid 61100 in /workspace/repo. Each run is made on a
// podman gateway too, with the same image, class, name and task, and the
// two must end alike: the same run log (the setup banners, the image's
// line about what it was given, its output block), state, exit code,
// results, outputs, usage and branch, the branch holding the image's
// commit; a run whose setup command fails ends failed on both, saying so,
// with no branch. The task reaches $1 whole on Kubernetes as on podman:
// 64 KiB on one line, and many lines at kelos.MaxPrompt.
func TestKelosImageOnKubernetes(t *testing.T) {
	k := realCluster(t)
	root := k.root
	onPodman := startAgentGateway(t, inferenceYAML, "claude-code")
	image := buildKelosImage(t, root)
	// The init image is the shared cluster's sandbox image, with this
	// tree's berth-init.
	initImage := k.sandboxImage
	k.image = agentImage("claude-code")
	srv := k.srv
	onKube, ns := k.gateway(t, "berth-e2e-kelos", inferenceYAML, "BERTH_SANDBOX_INIT_IMAGE="+initImage)

	explain := func(id string) string { return k.describe(t, ns) + "\n" + srv.PodLogs(ns, podName(id)) }
	const setup = `    setup_command: ["sh", "-c", "echo \"setup ran\" > \"$HOME/setup.txt\""]`
	bares := map[*gateway]string{}
	for _, g := range []*gateway{onPodman, onKube} {
		g.kelosClassOf(image, "kelos", setup)
		g.kelosClassOf(image, "kelos-fails", `    setup_command: ["false"]`)
		bares[g] = g.seedRepo("acme/app")
	}

	for _, tt := range []struct {
		n    int
		make func(string, int) string
	}{{64 << 10, lineTask}, {kelos.MaxPrompt, bigTask}} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			name := fmt.Sprintf("kelos-k8s-%d", tt.n)
			task := tt.make(name, tt.n)
			want, wantLog := kelosRun(t, onPodman, "kelos", name, task, onPodman.containerLog)
			got, gotLog := kelosRun(t, onKube, "kelos", name, task, explain)
			if got.State != "terminated" || got.Run.State != "succeeded" {
				t.Fatalf("on Kubernetes: sandbox %s (%s), run %s (%s); the pod logged:\n%s", got.State, got.Reason, got.Run.State, got.Run.Error,
					srv.PodLogs(ns, podName(got.ID)))
			}
			sameRun(t, want, wantLog, got, gotLog)

			// What the image was given, and did, on Kubernetes.
			seen := kelosSaw(t, gotLog)
			sum := sha256.Sum256([]byte(task))
			if seen.Args != 1 || seen.PromptBytes != tt.n || seen.PromptSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("the image got %d arguments, $1 of %d bytes (sha256 %s); want the task alone, %d bytes (sha256 %x)",
					seen.Args, seen.PromptBytes, seen.PromptSHA256, tt.n, sum)
			}
			if seen.UID != kelos.UID || seen.GID != kelos.UID || seen.Cwd != kelos.WorkDir || seen.Home != kelos.Home ||
				seen.Root != "ro" || seen.CapEff != "0000000000000000" || seen.SetupFile != "setup ran" {
				t.Errorf("the image ran as %d:%d in %s, HOME %s, root %s, capabilities %s, setup wrote %q; want %d:%d in %s, HOME %s, ro, none, its line",
					seen.UID, seen.GID, seen.Cwd, seen.Home, seen.Root, seen.CapEff, seen.SetupFile, kelos.UID, kelos.UID, kelos.WorkDir, kelos.Home)
			}
			run := got.Run
			bare := bares[onKube]
			if at := gitIn(t, bare, "rev-parse", "refs/heads/"+run.Branch); run.Branch != "berth/"+name || at != run.Commit || run.Results["commit"] != run.Commit {
				t.Errorf("run on %s@%s, its results say commit %s; the repository has it at %q", run.Branch, run.Commit, run.Results["commit"], at)
			}
			if got := gitIn(t, bare, "show", run.Commit+":kelos.txt"); got != "hello from a kelos image" {
				t.Errorf("kelos.txt in the landed commit: %q", got)
			}
			// berth-init is the pod's first process: its lines in the
			// pod's log, the image's output among them unchanged. Its
			// last comes once the gateway has answered its exit report,
			// which may be after the run's end is visible here.
			inLog := []string{"berth-init: cloning", "running " + kelos.Entrypoint + " with 1 arguments", kelos.OutputsStart + "\ncommit: " + run.Commit,
				"berth-init: the gateway concluded the run succeeded: " + run.Branch + " is at " + run.Commit}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				pl := srv.PodLogs(ns, podName(got.ID))
				missing := slices.IndexFunc(inLog, func(w string) bool { return !strings.Contains(pl, w) })
				if missing < 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the pod's log lacks %q:\n%s", inLog[missing], pl)
					break
				}
			}
		})
	}

	t.Run("setup fails", func(t *testing.T) {
		want, wantLog := kelosRun(t, onPodman, "kelos-fails", "kelos-k8s-fails", "fix the greeting", onPodman.containerLog)
		got, gotLog := kelosRun(t, onKube, "kelos-fails", "kelos-k8s-fails", "fix the greeting", explain)
		reason := "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run (exit 1)"
		if got.State != "failed" || got.Reason != reason || got.Run.ExitCode == nil || *got.Run.ExitCode != 1 {
			t.Errorf("on Kubernetes: sandbox %s (%s), run %+v; want failed, %q, exit 1\nthe pod logged:\n%s", got.State, got.Reason, got.Run, reason,
				srv.PodLogs(ns, podName(got.ID)))
		}
		sameRun(t, want, wantLog, got, gotLog)
		for g, bare := range bares {
			if at := gitIn(t, bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/kelos-k8s-fails"); at != "" {
				t.Errorf("a failed run left berth/kelos-k8s-fails at %s (%s)", at, g.url)
			}
		}
		if !strings.Contains(gotLog, "stderr: "+kelos.SetupFailed) {
			t.Errorf("the run log lacks the FAILED banner:\n%s", gotLog)
		}
	})

	// The agent configuration, in the machine: berth-init writes the
	// skills (uploaded, and the repository's, from its own clone) as
	// berth's plugin under HOME and hands the entrypoint KELOS_PLUGIN_DIR,
	// beside KELOS_AGENTS_MD and KELOS_EFFORT.
	t.Run("agent configuration", func(t *testing.T) {
		ctx := context.Background()
		onKube.seedRepoFiles("acme/skilled", map[string]string{".berth/skills/repo-skill/SKILL.md": skillFile("repo-skill", "repo")})
		me, err := onKube.operator.Whoami(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := onKube.operator.SetAgentConfig(ctx, me.Organisation.ID, "", api.AgentConfig{Instructions: "Always run the tests.\n", Effort: "high",
			Skills:     []api.AgentSkill{{Name: "uploaded-skill", Files: map[string]string{"SKILL.md": skillFile("uploaded-skill", "uploaded")}}},
			SkillsPath: ".berth/skills"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = onKube.operator.SetAgentConfig(ctx, me.Organisation.ID, "", api.AgentConfig{}) })
		sb, err := onKube.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "kelos-k8s-cfg", Class: "kelos", Purpose: "agent", Repo: "acme/skilled", Task: "Say hello."})
		if err != nil {
			t.Fatal(err)
		}
		end := onKube.waitSandbox(onKube.operator, sb.ID, 2*time.Minute, func(sb api.Sandbox, late bool) bool {
			if late {
				t.Fatalf("sandbox %s is still %s; its machine:\n%s", sb.Name, sb.State, explain(sb.ID))
			}
			return (sb.State == "terminated" || sb.State == "failed") && sb.Run != nil && sb.Run.State != "running"
		})
		log, _ := onKube.berthErr("sandbox", "logs", "--raw", sb.Name)
		if end.State != "terminated" {
			t.Fatalf("sandbox %s (%s); the pod logged:\n%s", end.State, end.Reason, srv.PodLogs(ns, podName(sb.ID)))
		}
		seen := kelosSaw(t, string(log))
		if seen.AgentsMD != "Always run the tests.\n" || seen.Effort != "high" || seen.PluginDir != kelos.Home+"/.kelos-plugins" {
			t.Errorf("the image saw KELOS_AGENTS_MD %q, KELOS_EFFORT %q, KELOS_PLUGIN_DIR %q", seen.AgentsMD, seen.Effort, seen.PluginDir)
		}
		if want := "./berth/skills/repo-skill/SKILL.md ./berth/skills/uploaded-skill/SKILL.md"; strings.TrimSpace(seen.PluginFiles) != want {
			t.Errorf("the plugin directory held %q, want %q", seen.PluginFiles, want)
		}
	})
}

// kelosRun creates an agent sandbox of class on acme/app with task, waits
// for it to end with its run, and returns it and its run log. explain
// says what the machine of sandbox id did, for a run that does not end.
func kelosRun(t *testing.T, g *gateway, class, name, task string, explain func(id string) string) (api.Sandbox, string) {
	t.Helper()
	sb, err := g.operator.CreateSandbox(context.Background(), api.CreateSandbox{Name: name, Class: class, Purpose: "agent", Repo: "acme/app", Task: task})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	end := g.waitSandbox(g.operator, sb.ID, 2*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s (%s); its machine:\n%s", sb.Name, sb.State, sb.Reason, explain(sb.ID))
		}
		return (sb.State == "terminated" || sb.State == "failed") && sb.Run != nil && sb.Run.State != "running"
	})
	log, err := g.berthErr("sandbox", "logs", "--raw", name)
	if err != nil {
		t.Fatal(err)
	}
	return end, string(log)
}

// sameRun compares a run on Kubernetes (got) with the same run on podman
// (want): how the sandbox and the run ended, what the run read from the
// image's output, and the run log line by line in each stream (the order
// between stdout and stderr is the runtime's: podman's log reader does not
// keep it); the commits the two made differ (another clone, another
// second), and are compared as the commit each run names.
func sameRun(t *testing.T, want api.Sandbox, wantLog string, got api.Sandbox, gotLog string) {
	t.Helper()
	type ending struct {
		State, Reason   string
		Run, Error      string
		ExitCode        *int
		Branch          string
		Usage           api.Tokens
		Lines, Ignored  int
		Outputs         []string
		Results         map[string]string
		Stdout, Stderr  []string // the run log's lines, by stream
		CommitInResults bool
	}
	of := func(sb api.Sandbox, log string) ending {
		r := sb.Run
		mark := func(s string) string {
			if r.Commit == "" {
				return s
			}
			return strings.ReplaceAll(s, r.Commit, "<its commit>")
		}
		e := ending{State: string(sb.State), Reason: sb.Reason, Run: string(r.State), Error: r.Error, ExitCode: r.ExitCode, Branch: r.Branch,
			Usage: r.Usage, Lines: r.Lines, Ignored: r.IgnoredLines, Results: map[string]string{}, CommitInResults: r.Commit != "" && r.Results["commit"] == r.Commit}
		for _, o := range r.Outputs {
			e.Outputs = append(e.Outputs, mark(o))
		}
		for k, v := range r.Results {
			e.Results[k] = mark(v)
		}
		sc := bufio.NewScanner(strings.NewReader(log))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "stderr: "); ok {
				e.Stderr = append(e.Stderr, mark(l))
			} else {
				e.Stdout = append(e.Stdout, mark(sc.Text()))
			}
		}
		return e
	}
	if diff := cmp.Diff(of(want, wantLog), of(got, gotLog)); diff != "" {
		t.Errorf("the run on Kubernetes ended otherwise than on podman (-podman +kubernetes):\n%s", diff)
	}
}

// kelosSeen is what the Kelos-shaped image says it was given, in the JSON
// line it prints first (kelosSaw reads it from a run log).
type kelosSeen struct {
	Type         string `json:"type"`
	PromptBytes  int    `json:"prompt_bytes"`
	PromptSHA256 string `json:"prompt_sha256"`
	Args         int    `json:"args"`
	UID          int    `json:"uid"`
	GID          int    `json:"gid"`
	Cwd          string `json:"cwd"`
	Home         string `json:"home"`
	Root         string `json:"root"`
	CapEff       string `json:"cap_eff"`
	SetupFile    string `json:"setup_file"`
	AgentsMD     string `json:"agents_md"`
	Effort       string `json:"effort"`
	PluginDir    string `json:"plugin_dir"`
	PluginFiles  string `json:"plugin_files"`
}

func kelosSaw(t *testing.T, log string) kelosSeen {
	t.Helper()
	var seen kelosSeen
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && seen.Type != "kelos-test" {
		_ = json.Unmarshal(sc.Bytes(), &seen)
	}
	if seen.Type != "kelos-test" {
		t.Fatalf("the image said nothing of what it was given; log:\n%.4000s", log)
	}
	return seen
}

// podName is the pod the controller makes for a sandbox's Sandbox: its
// name, the sandbox's id with a hyphen.
func podName(id string) string { return strings.ReplaceAll(id, "_", "-") }

// containerLog is the log of sandbox id's container on a podman gateway.
func (g *gateway) containerLog(id string) string { return g.podmanMay("logs", "berth-"+id) }

// describe is what the cluster says of namespace ns: its pods' statuses
// and its events, for a failing test's message.
func (k *kubeWorld) describe(t *testing.T, ns string) string {
	var b strings.Builder
	for _, r := range []schema.GroupVersionResource{{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "events"}, k8sSandboxes} {
		list, err := k.dc.Resource(r).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", r.Resource, err)
			continue
		}
		for _, o := range list.Items {
			status, _, _ := unstructured.NestedFieldNoCopy(o.Object, "status")
			if r.Resource == "events" {
				status = []any{o.Object["reason"], o.Object["message"]}
			}
			j, _ := json.Marshal(status)
			fmt.Fprintf(&b, "%s %s: %s\n", r.Resource, o.GetName(), j)
		}
	}
	return b.String()
}
