package podman

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// TestServiceRunMatchesTheBinary makes the same machines twice with the
// real podman, once by the binary from the driver's argv and once by the
// service from runSpec's translation of it, and compares everything
// podman says of the two containers but what differs between any two
// containers (ids, names, paths, times). A flag the translation dropped or
// changed (a capability, a limit, a mount's option, the read-only root's
// tmpfs, swap, the network) shows here.
func TestServiceRunMatchesTheBinary(t *testing.T) {
	root := os.Getenv("BERTH_TEST_PODMAN")
	if root == "" {
		t.Skip("set BERTH_TEST_PODMAN to a podman root holding localhost/berth-sandbox:latest (make images)")
	}
	cfg := Config{StateDir: root, Deployment: "berthcmp" + strings.ToLower(rand.Text()[:8])}
	d, err := New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	svc := d.service()
	for deadline := time.Now().Add(20 * time.Second); svc == nil; svc = d.service() {
		if time.Now().After(deadline) {
			t.Fatal("the podman service did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := t.Context()
	sb := sandbox.Sandbox{
		ID: sandbox.ID("sbx_" + strings.ToLower(rand.Text()[:20])), Name: "dev", Org: "org_1", Project: "prj_1", Owner: "usr_1",
		Purpose: sandbox.PurposeEngineer, Class: "standard", Image: "localhost/berth-sandbox:latest",
		CPU: quantity.Millicores(1500), Memory: quantity.Bytes(2 << 30),
	}
	env := map[string]string{"BERTH_SANDBOX_ID": string(sb.ID), "BERTH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA a@x\nssh-ed25519 AAAB b@y\n", "ONE": "1"}
	work := t.TempDir()
	named := cfg
	named.Network = "podman"
	agent := sb
	agent.Purpose = sandbox.PurposeAgent
	for _, c := range []struct {
		name string
		args []string
	}{
		{"engineer", RunArgs(cfg, sb, nil, "", t.TempDir())},
		{"engineer on a named network", RunArgs(named, sb, nil, "", "")},
		{"agent run", AgentArgs(cfg, agent, sandbox.RunSpec{Work: work, Network: "open", Args: []string{"-p", "--model", "m"}}, nil, "")},
		{"kelos agent run", AgentArgs(cfg, agent, sandbox.RunSpec{Work: work, Network: "open", Contract: sandbox.ContractKelos, Args: []string{"the prompt"}}, nil, "")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !slices.Contains(c.args, "--detach") {
				t.Fatalf("not a detached run: %v", c.args)
			}
			// Both made, not started: what is compared is what podman
			// was told, and a kelos image's entrypoint is not in this one.
			bin, api := renamed(c.args, "-bin"), renamed(c.args, "-api")
			binName, apiName := nameIn(bin), nameIn(api)
			t.Cleanup(func() {
				_, _ = d.exec(context.Background(), nil, "rm", "--force", "--time", "0", binName, apiName)
				_, _ = d.exec(context.Background(), nil, "volume", "rm", "--force", d.cfg.name(sb.ID))
			})
			create := append([]string{"create"}, slices.DeleteFunc(slices.Clone(bin[1:]), func(a string) bool { return a == "--detach" })...)
			envFile, err := writeEnvFile(d.cfg.envDir(), sandbox.ID(binName), "ONE=1\nBERTH_SANDBOX_ID="+string(sb.ID)+"\n")
			if err != nil {
				t.Fatal(err)
			}
			defer envFile.remove()
			create = withEnv(create, envFile.name(), "BERTH_AUTHORIZED_KEYS")
			if _, err := d.exec(ctx, []string{"BERTH_AUTHORIZED_KEYS=" + env["BERTH_AUTHORIZED_KEYS"]}, create...); err != nil {
				t.Fatalf("podman create: %v", err)
			}
			spec, ok := runSpec(api, env)
			if !ok {
				t.Fatalf("runSpec refused the driver's own argv %v", api)
			}
			if _, err := svc.call(ctx, http.MethodPost, "/containers/create", spec); err != nil {
				t.Fatalf("the service's create: %v", err)
			}
			got, want := inspectFlat(t, d, apiName), inspectFlat(t, d, binName)
			for _, k := range slices.Sorted(keys(got, want)) {
				if got[k] != want[k] {
					t.Errorf("%s: the service made %s, the binary %s", k, got[k], want[k])
				}
			}
		})
	}
}

// renamed is args with the container's name suffixed.
func renamed(args []string, suffix string) []string {
	out := slices.Clone(args)
	for i := range out {
		if out[i] == "--name" && i+1 < len(out) {
			out[i+1] += suffix
		}
	}
	return out
}

func nameIn(args []string) string {
	i := slices.Index(args, "--name")
	return args[i+1]
}

// withEnv puts --env-file file and --env names before the image, as the
// driver's argv does for the binary.
func withEnv(args []string, file string, names ...string) []string {
	img := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "localhost/") })
	extra := []string{"--env-file", file}
	for _, n := range names {
		extra = append(extra, "--env", n)
	}
	return slices.Concat(args[:img], extra, args[img:])
}

func keys(a, b map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range []map[string]string{a, b} {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// differsAlways are what podman says differently of any two containers,
// made either way.
var differsAlways = []string{
	".Id", ".Name", ".Created", ".Config.CreateCommand", ".Config.Annotations.io.kubernetes.cri-o.Created",
	".ConmonPidFile", ".GraphDriver.", ".HostnamePath", ".HostsPath", ".OCIConfigPath", ".PidFile",
	".ResolvConfPath", ".StaticDir", ".State.", ".HostConfig.LogConfig.Path", ".ExitCommand", ".Rootfs",
	".NetworkSettings.SandboxKey", ".Config.Annotations.io.container.manager",
	// The binary writes its terminal=false down as an annotation, the
	// service leaves it unset: either way no terminal.
	".Config.Annotations.io.kubernetes.cri-o.TTY",
}

// inspectFlat is podman inspect of a container, flattened to path → JSON
// value, without what differsAlways names; lists of strings are sorted
// (an environment's order is not podman's promise).
func inspectFlat(t *testing.T, d *Driver, name string) map[string]string {
	t.Helper()
	out, err := d.exec(t.Context(), nil, "container", "inspect", name)
	if err != nil {
		t.Fatal(err)
	}
	var all []map[string]any
	if err := json.Unmarshal(out, &all); err != nil || len(all) != 1 {
		t.Fatalf("inspect %s: %v", name, err)
	}
	flat := map[string]string{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		if strings.HasPrefix(p, ".NetworkSettings.Networks.") && strings.HasSuffix(p, ".Aliases") {
			return // the container's short id
		}
		for _, skip := range differsAlways {
			if p == skip || strings.HasPrefix(p, skip) && strings.HasSuffix(skip, ".") {
				return
			}
		}
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(p+"."+k, x)
			}
		case []any:
			var strs []string
			for i, x := range v {
				if s, ok := x.(string); ok {
					strs = append(strs, strings.ReplaceAll(s, name, "NAME"))
					continue
				}
				walk(fmt.Sprintf("%s[%d]", p, i), x)
			}
			if strs != nil {
				strs = slices.DeleteFunc(strs, func(s string) bool { return strings.HasPrefix(s, "HOSTNAME=") })
				sort.Strings(strs)
				b, _ := json.Marshal(strs)
				flat[p] = string(b)
			}
		default:
			b, _ := json.Marshal(v)
			flat[p] = strings.ReplaceAll(string(b), name, "NAME")
		}
	}
	walk("", all[0])
	return flat
}

// TestRunSpecSendsTheRestToTheBinary: what the translation does not know
// is never dropped: the run goes to the binary instead. A runtime of the
// run's own is one (podman 4's service runs every container on its own
// runtime, whatever the spec says).
func TestRunSpecSendsTheRestToTheBinary(t *testing.T) {
	base := []string{"run", "--detach", "--name", "x", "--user", "1001:1001"}
	for _, extra := range [][]string{
		{"--runtime", "runsc"},
		{"--privileged"},
		{"--security-opt", "seccomp=unconfined"},
		{"--volume", "/a:/b:rw,z"},
		{"--memory", "2g"},
		{"--label", "novalue"},
		{"--cpus", "0"},
		{"--user"},
	} {
		args := slices.Concat(base, extra, []string{"localhost/berth-sandbox:latest"})
		if extra[0] == "--user" {
			args = slices.Concat(base, extra) // a flag with no value and no image
		}
		if spec, ok := runSpec(args, nil); ok {
			t.Errorf("runSpec(%v) = %v; want it left to the binary", args, spec)
		}
	}
	spec, ok := runSpec(slices.Concat(base, []string{"localhost/berth-sandbox:latest", "-p", "x"}), map[string]string{"K": "a\nb"})
	if !ok || spec["image"] != "localhost/berth-sandbox:latest" || !slices.Equal(spec["command"].([]string), []string{"-p", "x"}) || spec["env"].(map[string]string)["K"] != "a\nb" {
		t.Errorf("runSpec of a plain run: %v, %v", spec, ok)
	}
}
