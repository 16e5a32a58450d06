package kubernetes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/warm"
)

var testConfig = kubernetes.Config{
	Namespace: "berth-sandboxes", Deployment: "berthtest0001", StorageClass: "fast",
	ServiceAccount: "berth-sandbox", ImagePullSecrets: []string{"registry"}, PublicURL: "http://berth.berth-system.svc:8080/",
	InitImage: "ghcr.io/acme/berth-sandbox:1",
}

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func engineerSpec() sandbox.Spec {
	sb := sandbox.Sandbox{
		ID: "sbx_abcdefghij0123456789", Name: "dev", Org: "org_acme", Project: "prj_acme", Owner: "usr_alice",
		Purpose: sandbox.PurposeEngineer, Class: "standard", Image: "ghcr.io/acme/dev:1", Isolation: sandbox.TierStandard,
		CPU: quantity.Millicores(2000), Memory: quantity.Bytes(4 << 30), CreatedAt: t0, ExpiresAt: t0.Add(4 * time.Hour),
	}
	env := map[string]string{"BERTH_SANDBOX_ID": string(sb.ID), "BERTH_API_KEY": "berth_sandboxkey_SECRET", "BERTH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA a@b"}
	return sandbox.Spec{Sandbox: sb, Env: env}
}

// agentRunSpec is an in-machine agent run as the sandbox service hands it
// over: the runner's image, berth-init's environment, the runner's args.
func agentRunSpec() sandbox.Spec {
	sb := sandbox.Sandbox{
		ID: "sbx_agentrun0123456789ab", Name: "fix-tests", Org: "org_acme", Project: "prj_acme", Owner: "usr_alice",
		Purpose: sandbox.PurposeAgent, Class: "agent", Image: "localhost/berth-agent-claude-code:latest",
		Isolation: sandbox.TierIsolated, Runtime: "gvisor", Runner: "claude-code", Disk: 20 << 30,
		CPU: quantity.Millicores(1000), Memory: quantity.Bytes(2 << 30), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
	env := map[string]string{
		"BERTH_SANDBOX_ID": string(sb.ID), "BERTH_SANDBOX_PURPOSE": "agent", "BERTH_RUN_REPORT": "gateway",
		"BERTH_BASE_URL": "http://berth.berth-system.svc:8080", "BERTH_REPO": "http://berth.berth-system.svc:8080/git/acme/app.git",
		"BERTH_API_KEY": "berth_sandboxkey_SECRET", "ANTHROPIC_API_KEY": "berth_sandboxkey_SECRET", "BERTH_RUNNER": "claude-code",
		"BERTH_RUNNER_FILES": `[{"path":".claude/settings.json","content":"{}"}]`, "BERTH_PROMPT_FILE": "/work/.berth-prompt.txt",
	}
	args := []string{"-p", "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "claude-sonnet-4-5"}
	return sandbox.Spec{Sandbox: sb, Env: env, Run: &sandbox.RunSpec{InMachine: true, Args: args, Network: "allowlist"}}
}

// kelosRunSpec is an in-machine run of a kelos image as the sandbox
// service hands it over: the class's own image, the interface's
// environment and BERTH_RUN_CONTRACT, no arguments (berth-init fetches the
// task and makes it the entrypoint's $1).
func kelosRunSpec() sandbox.Spec {
	spec := agentRunSpec()
	spec.Sandbox.ID, spec.Sandbox.Class, spec.Sandbox.Image = "sbx_kelosrun0123456789ab", "kelos", "ghcr.io/acme/kelos-claude:1"
	spec.Sandbox.Contract = sandbox.ContractKelos
	spec.Env["BERTH_SANDBOX_ID"] = string(spec.Sandbox.ID)
	delete(spec.Env, "BERTH_RUNNER_FILES")
	delete(spec.Env, "BERTH_PROMPT_FILE")
	spec.Env["BERTH_RUN_CONTRACT"], spec.Env["HOME"], spec.Env["KELOS_AGENT_TYPE"] = "kelos", "/home/agent", "claude-code"
	spec.Run = &sandbox.RunSpec{Contract: sandbox.ContractKelos, InMachine: true, Network: "allowlist"}
	return spec
}

func warmPool() warm.Pool {
	return warm.Pool{Org: "org_acme", Runtime: "gvisor", Class: class.Class{
		Name: "standard", Image: "ghcr.io/acme/dev:1", Isolation: sandbox.TierIsolated, CPU: 1000, Memory: 2 << 30, Disk: 10 << 30, Warm: 3,
	}}
}

// objects are what the driver writes, by golden file name.
func objects() map[string]any {
	eng := engineerSpec()
	disk := engineerSpec()
	disk.Sandbox.Disk, disk.Sandbox.Isolation, disk.Sandbox.Runtime = 20<<30, sandbox.TierIsolated, "gvisor"
	agent := engineerSpec()
	agent.Sandbox.Purpose = sandbox.PurposeAgent
	claim := engineerSpec()
	claim.Env, claim.Bootstrap = nil, secret.New("bst_ONETIMETOKEN")
	return map[string]any{
		"sandbox-engineer":      kubernetes.SandboxObject(testConfig, eng),
		"sandbox-engineer-disk": kubernetes.SandboxObject(testConfig, disk),
		"sandbox-agent":         kubernetes.SandboxObject(testConfig, agent),
		"sandbox-agent-run":     kubernetes.SandboxObject(testConfig, agentRunSpec()),
		"sandbox-kelos-run":     kubernetes.SandboxObject(testConfig, kelosRunSpec()),
		"template":              kubernetes.TemplateObject(testConfig, warmPool()),
		"warmpool":              kubernetes.PoolObject(testConfig, warmPool()),
		"claim":                 kubernetes.ClaimObject(testConfig, claim),
	}
}

// asMap is v as the API server receives it.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	m, err := kubernetes.Render(v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestObjectsGolden pins every object the driver writes: the hardening of
// SPEC S5, the tier's RuntimeClass, resources, the home volume, labels,
// expiry and policies, reviewed as YAML.
func TestObjectsGolden(t *testing.T) {
	for name, obj := range objects() {
		t.Run(name, func(t *testing.T) {
			b, err := yaml.Marshal(asMap(t, obj))
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, name, b)
		})
	}
}

// TestObjectsFitTheCRDs walks every field the driver sets through the
// agent-sandbox CRDs' schemas (copied into testdata/crds): a
// misspelt field would be pruned by the API server without a word.
func TestObjectsFitTheCRDs(t *testing.T) {
	dir, err := kubetest.CRDDir(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(paths) == 0 {
		t.Fatalf("no CRDs in %s (set %s)", dir, kubetest.EnvCRDs)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta1" {
				schemas[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	for name, obj := range objects() {
		m := asMap(t, obj)
		kind, _ := m["kind"].(string)
		schema := schemas[kind]
		if schema == nil {
			t.Fatalf("%s: no v1beta1 schema for kind %q", name, kind)
		}
		delete(m, "metadata") // ObjectMeta: the API server's own
		for _, problem := range fits(schema, m, kind) {
			t.Errorf("%s: %s", name, problem)
		}
	}
}

// fits lists the places where v has a field the schema does not.
func fits(schema map[string]any, v any, path string) []string {
	if schema["x-kubernetes-preserve-unknown-fields"] == true || schema["x-kubernetes-int-or-string"] == true {
		return nil
	}
	var out []string
	switch val := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for _, k := range slices.Sorted(mapKeys(val)) {
			sub, ok := props[k].(map[string]any)
			if !ok {
				sub = extra
			}
			if sub == nil {
				out = append(out, fmt.Sprintf("%s.%s is not in the schema", path, k))
				continue
			}
			out = append(out, fits(sub, val[k], path+"."+k)...)
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for i, e := range val {
			if items == nil {
				return append(out, path+" is not a list in the schema")
			}
			out = append(out, fits(items, e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	default:
		if typ, _ := schema["type"].(string); typ == "object" || typ == "array" {
			out = append(out, fmt.Sprintf("%s is a %s in the schema, not %T", path, typ, v))
		}
	}
	return out
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestObjectNamesFit: pool members (<pool>-xxxxx) and claims stay within
// Kubernetes' 63 characters for the longest class name.
func TestObjectNamesFit(t *testing.T) {
	p := warmPool()
	p.Class.Name = strings.Repeat("c", 40)
	if n := kubernetes.PoolObject(testConfig, p).Name; len(n)+6 > 63 {
		t.Errorf("pool name %q (%d) leaves no room for its members' suffix", n, len(n))
	}
	if n := kubernetes.ClaimObject(testConfig, engineerSpec()).Name; strings.Contains(n, "_") {
		t.Errorf("claim name %q holds an underscore", n)
	}
}

// TestAgentRunObject: an in-machine agent run's pod keeps the image's
// entrypoint with the runner's args, carries the key by value, has a
// read-only root with its checkout, /tmp and HOME on emptyDirs and no
// volume claim (whatever the class's disk), mounts nothing of the node's,
// and does not restart.
func TestAgentRunObject(t *testing.T) {
	for _, tc := range []struct{ name, home, wantHome string }{
		{"default HOME", "", "/home/berth"},
		{"HOME from the environment", "/home/agent", "/home/agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := agentRunSpec()
			if tc.home != "" {
				spec.Env["HOME"] = tc.home
			}
			obj := kubernetes.SandboxObject(testConfig, spec)
			if len(obj.Spec.VolumeClaimTemplates) != 0 {
				t.Errorf("volumeClaimTemplates = %v, want none: a run's checkout dies with it", obj.Spec.VolumeClaimTemplates)
			}
			if obj.Spec.ShutdownPolicy != "Delete" {
				t.Errorf("shutdownPolicy = %s, want Delete", obj.Spec.ShutdownPolicy)
			}
			pod := obj.Spec.PodTemplate.Spec
			if pod.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restartPolicy = %s, want Never", pod.RestartPolicy)
			}
			if obj.Spec.PodTemplate.Metadata.Labels["berth.dev/purpose"] != "agent" {
				t.Errorf("pod labels %v lack berth.dev/purpose=agent", obj.Spec.PodTemplate.Metadata.Labels)
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			ctr := pod.Containers[0]
			if ctr.Image != spec.Sandbox.Image || len(ctr.Command) != 0 || !slices.Equal(ctr.Args, spec.Run.Args) {
				t.Errorf("container image %s command %q args %q; want %s, the image's entrypoint, %q",
					ctr.Image, ctr.Command, ctr.Args, spec.Sandbox.Image, spec.Run.Args)
			}
			if ctr.WorkingDir != "/work" {
				t.Errorf("workingDir = %q, want /work", ctr.WorkingDir)
			}
			sec := ctr.SecurityContext
			if sec == nil || sec.ReadOnlyRootFilesystem == nil || !*sec.ReadOnlyRootFilesystem ||
				sec.AllowPrivilegeEscalation == nil || *sec.AllowPrivilegeEscalation ||
				sec.RunAsUser == nil || *sec.RunAsUser != 1001 || sec.RunAsNonRoot == nil || !*sec.RunAsNonRoot {
				t.Errorf("container securityContext = %+v, want read-only root, no escalation, uid 1001", sec)
			}
			if len(ctr.Ports) != 0 || ctr.ReadinessProbe != nil {
				t.Errorf("ports %v, readiness probe %v: an agent run serves nothing", ctr.Ports, ctr.ReadinessProbe)
			}
			env := map[string]string{}
			for _, e := range ctr.Env {
				if e.ValueFrom != nil {
					t.Errorf("env %s comes from %v, want a value", e.Name, e.ValueFrom)
				}
				env[e.Name] = e.Value
			}
			if env["BERTH_API_KEY"] != "berth_sandboxkey_SECRET" || env["BERTH_RUN_REPORT"] != "gateway" || env["HOME"] != tc.wantHome {
				t.Errorf("env BERTH_API_KEY=%q BERTH_RUN_REPORT=%q HOME=%q; want the key by value, gateway, %s",
					env["BERTH_API_KEY"], env["BERTH_RUN_REPORT"], env["HOME"], tc.wantHome)
			}
			if tc.home == "" {
				if _, set := spec.Env["HOME"]; set {
					t.Error("SandboxObject wrote HOME into the caller's environment")
				}
			}
			mounts := map[string]string{}
			for _, m := range ctr.VolumeMounts {
				mounts[m.Name] = m.MountPath
			}
			sizes := map[string]string{}
			for _, v := range pod.Volumes {
				if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
					t.Errorf("volume %s is not a sized emptyDir: %+v", v.Name, v.VolumeSource)
					continue
				}
				sizes[v.Name] = v.EmptyDir.SizeLimit.String()
			}
			if got, want := fmt.Sprint(mounts, sizes), fmt.Sprint(
				map[string]string{"work": "/work", "tmp": "/tmp", "home": tc.wantHome},
				map[string]string{"work": "8Gi", "tmp": "512Mi", "home": "1Gi"}); got != want {
				t.Errorf("mounts and sizes = %s, want %s", got, want)
			}
			if b, err := yaml.Marshal(asMap(t, obj)); err != nil || strings.Contains(string(b), "hostPath") {
				t.Errorf("the object mounts a node path (or does not render: %v):\n%s", err, b)
			}
		})
	}
}

// TestKelosRunObject: a kelos image's pod runs the image unchanged on its
// interface's terms (uid 61100, /workspace/repo, HOME from its
// environment) under every run pod's hardening, with berth-init put in
// by an init container of the init image, hardened alike: copied into a
// volume of its own that the run mounts read-only and runs berth-init
// from, with no arguments (no task in the object). Without an init image
// set, it is berth's sandbox image.
func TestKelosRunObject(t *testing.T) {
	obj := kubernetes.SandboxObject(testConfig, kelosRunSpec())
	pod := obj.Spec.PodTemplate.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 1 {
		t.Fatalf("%d containers, %d init containers; want one of each", len(pod.Containers), len(pod.InitContainers))
	}
	ctr, init := pod.Containers[0], pod.InitContainers[0]
	if ctr.Image != "ghcr.io/acme/kelos-claude:1" || !slices.Equal(ctr.Command, []string{"/berth/berth-init"}) || len(ctr.Args) != 0 || ctr.WorkingDir != kelos.WorkDir {
		t.Errorf("container image %s command %q args %q workingDir %s; want the kelos image, berth-init from /berth, no arguments, %s",
			ctr.Image, ctr.Command, ctr.Args, ctr.WorkingDir, kelos.WorkDir)
	}
	wantCopy := []string{"cp", "-P", "/usr/local/bin/berth-init", "/usr/local/bin/git-credential-berth", "/berth/"}
	if init.Image != testConfig.InitImage || !slices.Equal(init.Command, wantCopy) || len(init.Args) != 0 {
		t.Errorf("init container image %s command %q; want %s copying %q", init.Image, init.Command, testConfig.InitImage, wantCopy)
	}
	for _, c := range []corev1.Container{ctr, init} {
		sec := c.SecurityContext
		if sec == nil || sec.RunAsUser == nil || *sec.RunAsUser != kelos.UID || sec.RunAsGroup == nil || *sec.RunAsGroup != kelos.UID ||
			sec.RunAsNonRoot == nil || !*sec.RunAsNonRoot || sec.AllowPrivilegeEscalation == nil || *sec.AllowPrivilegeEscalation ||
			sec.Privileged == nil || *sec.Privileged || sec.ReadOnlyRootFilesystem == nil || !*sec.ReadOnlyRootFilesystem ||
			sec.Capabilities == nil || !slices.Equal(sec.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			sec.SeccompProfile == nil || sec.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s's securityContext = %+v; want uid and gid %d, non-root, no escalation, not privileged, a read-only root, no capabilities, RuntimeDefault", c.Name, sec, kelos.UID)
		}
		if c.Resources.Limits.Cpu().String() != "1" || c.Resources.Limits.Memory().String() != "2Gi" {
			t.Errorf("%s's limits %v, want the class's", c.Name, c.Resources.Limits)
		}
	}
	if psc := pod.SecurityContext; psc == nil || *psc.RunAsUser != kelos.UID || *psc.FSGroup != kelos.UID || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v, want uid and fsGroup %d, non-root", psc, kelos.UID)
	}
	mounts := func(c corev1.Container) string {
		var ms []string
		for _, m := range c.VolumeMounts {
			ms = append(ms, fmt.Sprint(m.Name, " ", m.MountPath, " ro=", m.ReadOnly))
		}
		return strings.Join(ms, ", ")
	}
	if got, want := mounts(ctr), "work /workspace/repo ro=false, tmp /tmp ro=false, home /home/agent ro=false, berth /berth ro=true"; got != want {
		t.Errorf("the run's mounts: %s, want %s", got, want)
	}
	if got, want := mounts(init), "berth /berth ro=false"; got != want {
		t.Errorf("the init container's mounts: %s, want %s", got, want)
	}
	for _, v := range pod.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			t.Errorf("volume %s is not a sized emptyDir: %+v", v.Name, v.VolumeSource)
		}
	}
	if b, err := yaml.Marshal(asMap(t, obj)); err != nil || strings.Contains(string(b), "add a greeting") {
		t.Errorf("the object holds the task (or does not render: %v)", err)
	}

	def := testConfig
	def.InitImage = ""
	if got := kubernetes.SandboxObject(def, kelosRunSpec()).Spec.PodTemplate.Spec.InitContainers[0].Image; got != "localhost/berth-sandbox:latest" {
		t.Errorf("the init image without a setting: %s, want berth's sandbox image", got)
	}
	if n := len(kubernetes.SandboxObject(testConfig, agentRunSpec()).Spec.PodTemplate.Spec.InitContainers); n != 0 {
		t.Errorf("a run of berth's contract has %d init containers, want none: its image has berth-init", n)
	}
}
