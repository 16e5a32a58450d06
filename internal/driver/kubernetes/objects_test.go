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

	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/kubernetes/kubetest"
	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

var testConfig = kubernetes.Config{
	Namespace: "berth-sandboxes", Deployment: "berthtest0001", StorageClass: "fast",
	ServiceAccount: "berth-sandbox", ImagePullSecrets: []string{"registry"}, PublicURL: "http://berth.berth-system.svc:8080/",
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

func warmPool() sandbox.Pool {
	return sandbox.Pool{Org: "org_acme", Runtime: "gvisor", Class: sandbox.Class{
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
	claim.Env, claim.Bootstrap = nil, "bst_ONETIMETOKEN"
	return map[string]any{
		"sandbox-engineer":      kubernetes.SandboxObject(testConfig, eng),
		"sandbox-engineer-disk": kubernetes.SandboxObject(testConfig, disk),
		"sandbox-agent":         kubernetes.SandboxObject(testConfig, agent),
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
