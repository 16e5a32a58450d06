package podman_test

import (
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/warm"
)

func testSandbox() sandbox.Sandbox {
	return sandbox.Sandbox{
		ID: "sbx_aaaaaaaaaaaaaaaaaaaa", Name: "dev", Org: "org_1", Project: "prj_1", Owner: "usr_1",
		Purpose: sandbox.PurposeEngineer, Class: "standard", Image: "localhost/berth-sandbox:latest",
		Isolation: sandbox.TierStandard, CPU: quantity.Millicores(1500), Memory: quantity.Bytes(4 << 30),
		CreatedAt: time.Unix(0, 0), ExpiresAt: time.Unix(3600, 0),
	}
}

// TestRunArgs guards the hardening flags of SPEC S5 and S11: review every
// change of the golden files like code.
func TestRunArgs(t *testing.T) {
	cfg := podman.Config{StateDir: "/var/lib/berth/podman", Deployment: "berth"}
	golden.Check(t, "run-standard", []byte(strings.Join(podman.RunArgs(cfg, testSandbox(), []string{"BERTH_AUTHORIZED_KEYS"}, "/state/env/x.env", "/var/lib/berth/podman/handoff/berth/berth-sbx_aaaaaaaaaaaaaaaaaaaa"), "\n")+"\n"))

	iso := testSandbox()
	iso.Isolation, iso.Runtime = sandbox.TierIsolated, "/opt/gvisor/runsc"
	cfg.Network = "berth-sandboxes"
	golden.Check(t, "run-isolated", []byte(strings.Join(podman.RunArgs(cfg, iso, nil, "/state/env/x.env", ""), "\n")+"\n"))
	golden.Check(t, "volume", []byte(strings.Join(podman.VolumeArgs(cfg, testSandbox()), "\n")+"\n"))
}

// TestArgvHoldsNoValues: environment values (the sandbox's key among
// them) travel by name; argv is visible to every user of the host.
func TestArgvHoldsNoValues(t *testing.T) {
	args := podman.RunArgs(podman.Config{StateDir: "/s"}, testSandbox(), []string{"BERTH_AUTHORIZED_KEYS"}, "/s/env/x.env", "/s/handoff/berth/berth-sbx_aaaaaaaaaaaaaaaaaaaa")
	for i, a := range args {
		if a == "--env" && strings.Contains(args[i+1], "=") {
			t.Errorf("--env %s carries a value", args[i+1])
		}
		if strings.HasPrefix(a, "--env=") || strings.HasPrefix(a, "-e") {
			t.Errorf("argv passes environment as %q", a)
		}
	}
}

func TestConfigFiles(t *testing.T) {
	cfg := podman.Config{StateDir: "/var/lib/berth/podman", Runtimes: map[string]string{"runsc": "/opt/gvisor/runsc"}}
	golden.Check(t, "containers.conf", []byte(cfg.ContainersConf()))
	golden.Check(t, "storage.conf", []byte(cfg.StorageConf()))
}

// TestAgentArgs pins the argv of an agent run per runner (SPEC S13): the
// hardening, the checkout as the only mount, and the runner's own flags
// in the "$@" slot after the image.
func TestAgentArgs(t *testing.T) {
	cfg := podman.Config{StateDir: "/var/lib/berth/podman", Deployment: "berth"}
	for _, name := range runner.Names() {
		r, err := runner.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, direct := r.(runner.VendorDirect); direct {
			continue // refused before a container is thought of
		}
		args, err := r.ContainerArgs(runner.Options{Model: "claude-sonnet-4-5"})
		if err != nil {
			t.Fatal(err)
		}
		sb := testSandbox()
		sb.Name, sb.Purpose, sb.Runner, sb.Image = "fix", sandbox.PurposeAgent, name, "localhost/berth-agent-"+name+":latest"
		run := sandbox.RunSpec{Work: "/var/lib/berth/work/" + string(sb.ID), Args: args, Network: "allowlist"}
		names := append([]string{"BERTH_API_KEY"}, r.Credentials()...)
		golden.Check(t, "agent-"+name, []byte(strings.Join(podman.AgentArgs(cfg, sb, run, names, "/state/env/x.env"), "\n")+"\n"))
	}
	// An image of the Kelos interface, on that interface's terms (SPEC
	// S13.6); a prompt that looks like a flag stays an argument of the
	// image, after its name.
	sb := testSandbox()
	sb.Name, sb.Purpose, sb.Runner, sb.Image = "fix", sandbox.PurposeAgent, "claude-code", "ghcr.io/acme/kelos-claude-code:1"
	sb.Contract, sb.Runtime = sandbox.ContractKelos, "/opt/gvisor/runsc"
	run := sandbox.RunSpec{Contract: sandbox.ContractKelos, Work: "/var/lib/berth/work/" + string(sb.ID),
		Args: []string{"--fix the \"greeting\"; rm -rf / $HOME"}, Network: "allowlist"}
	golden.Check(t, "agent-kelos", []byte(strings.Join(podman.AgentArgs(cfg, sb, run, []string{"KELOS_SETUP_COMMAND"}, "/state/env/x.env"), "\n")+"\n"))

	// An open run joins the sandboxes' network instead.
	sb = testSandbox()
	sb.Purpose = sandbox.PurposeAgent
	cfg.Network = "podman"
	args := podman.AgentArgs(cfg, sb, sandbox.RunSpec{Work: "/w", Network: "open"}, nil, "")
	if !strings.Contains(strings.Join(args, " "), "--network podman ") {
		t.Errorf("an open run's argv: %q", args)
	}

	// A session's HOME is its own directory, in the tmpfs's place.
	args = podman.AgentArgs(cfg, sb, sandbox.RunSpec{Work: "/w", Home: "/w.home"}, nil, "")
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, "--volume /w.home:/home/berth ") || strings.Contains(joined, ":/home/berth:rw,exec") {
		t.Errorf("a session's argv: %q", args)
	}
}

// TestMemberArgs pins a warm pool member's argv (SPEC S12): a sandbox's
// hardening and limits, the pool's labels and no owner's, its own volume
// and control directory, its environment by file.
func TestMemberArgs(t *testing.T) {
	cfg := podman.Config{StateDir: "/var/lib/berth/podman", Deployment: "berth", PublicURL: "http://host.containers.internal:8080"}
	sb := testSandbox()
	p := warm.Pool{Org: sb.Org, Class: class.Class{Name: sb.Class, Image: sb.Image, CPU: sb.CPU, Memory: sb.Memory, Isolation: sb.Isolation, Warm: 2}}
	args := podman.MemberArgs(cfg, p, "berth-pool-abcdefghijkl", "/var/lib/berth/podman/pools/berth/members/berth-pool-abcdefghijkl", "/state/env/x.env", "/var/lib/berth/podman/handoff/berth/berth-pool-abcdefghijkl")
	golden.Check(t, "run-member", []byte(strings.Join(args, "\n")+"\n"))
	for _, a := range args {
		for _, owner := range []string{sb.Owner, sb.Project, string(sb.ID), sb.Name} {
			if strings.Contains(a, owner) {
				t.Errorf("a pool member's argv names %q, a sandbox's own (%q)", owner, a)
			}
		}
	}
}
