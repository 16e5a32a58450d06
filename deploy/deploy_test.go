// Package deploy_test checks the Kubernetes manifests in deploy/kubernetes:
// every document parses, the gateway's Role stays namespaced and small
// (SPEC S11: no Secrets, no pods/portforward), the sandboxes' namespace
// denies by default, and the gateway's settings load as `berth serve`
// would load them.
package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/server"
)

// object is the part of a manifest the checks read.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Rules []struct {
		APIGroups     []string `yaml:"apiGroups"`
		Resources     []string `yaml:"resources"`
		Verbs         []string `yaml:"verbs"`
		ResourceNames []string `yaml:"resourceNames"`
	} `yaml:"rules"`
	RoleRef struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"roleRef"`
	Spec struct {
		PodSelector map[string]any `yaml:"podSelector"`
		PolicyTypes []string       `yaml:"policyTypes"`
		Ingress     []any          `yaml:"ingress"`
		Egress      []any          `yaml:"egress"`
		Template    struct {
			Spec struct {
				Containers []struct {
					Env []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
	Data map[string]string `yaml:"data"`
}

func manifests(t *testing.T) []object {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	var out []object
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s, document %d: %v", p, i, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s, document %d: apiVersion, kind and metadata.name are required", p, i)
			}
			if o.Kind != "Namespace" && o.Metadata.Namespace == "" {
				t.Errorf("%s: %s %s names no namespace", p, o.Kind, o.Metadata.Name)
			}
			out = append(out, o)
		}
	}
	return out
}

// TestRoleIsNamespacedAndSmall: nothing cluster-scoped, no wildcard, no
// Secrets, nothing of pods (no portforward, no exec): the gateway dials
// pod IPs and keeps the sandbox's key in its pod spec.
func TestRoleIsNamespacedAndSmall(t *testing.T) {
	var roles int
	for _, o := range manifests(t) {
		switch o.Kind {
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("%s %s: the gateway gets nothing cluster-scoped", o.Kind, o.Metadata.Name)
		case "RoleBinding":
			if o.RoleRef.Kind != "Role" {
				t.Errorf("RoleBinding %s binds a %s, want a Role", o.Metadata.Name, o.RoleRef.Kind)
			}
		case "Role":
			roles++
			for _, r := range o.Rules {
				for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs} {
					if slices.Contains(list, "*") {
						t.Errorf("Role %s has a wildcard: %v", o.Metadata.Name, r)
					}
				}
				for _, res := range r.Resources {
					if res == "secrets" || strings.HasPrefix(res, "pods") || strings.Contains(res, "portforward") || strings.Contains(res, "exec") {
						t.Errorf("Role %s grants %s", o.Metadata.Name, res)
					}
				}
				for _, g := range r.APIGroups {
					if g != "agents.x-k8s.io" && g != "extensions.agents.x-k8s.io" {
						t.Errorf("Role %s reaches API group %q, want agent-sandbox's only", o.Metadata.Name, g)
					}
				}
			}
		}
	}
	if roles != 1 {
		t.Errorf("%d Roles, want the gateway's one", roles)
	}
}

// TestSandboxNamespaceDeniesByDefault: one policy selects every pod of
// the sandboxes' namespace for both directions with no rule, and the
// others open DNS and the gateway only.
func TestSandboxNamespaceDeniesByDefault(t *testing.T) {
	var deny bool
	for _, o := range manifests(t) {
		if o.Kind != "NetworkPolicy" || o.Metadata.Namespace != "berth-sandboxes" {
			continue
		}
		if len(o.Spec.PodSelector) == 0 && len(o.Spec.Ingress) == 0 && len(o.Spec.Egress) == 0 &&
			slices.Contains(o.Spec.PolicyTypes, "Ingress") && slices.Contains(o.Spec.PolicyTypes, "Egress") {
			deny = true
		}
	}
	if !deny {
		t.Error("no default-deny NetworkPolicy (podSelector {}, Ingress and Egress, no rules) in berth-sandboxes")
	}
}

// TestGatewaySettingsLoad: the Deployment's settings are what `berth
// serve` accepts, with the ConfigMap's sandboxes file.
func TestGatewaySettingsLoad(t *testing.T) {
	env := map[string]string{}
	var classes string
	for _, o := range manifests(t) {
		if o.Kind == "Deployment" && o.Metadata.Name == "berth" {
			for _, e := range o.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
		}
		if o.Kind == "ConfigMap" && o.Metadata.Name == "berth-config" {
			classes = o.Data["sandboxes.yaml"]
		}
	}
	if env["BERTH_SANDBOX_DRIVER"] != "kubernetes" || env["BERTH_SANDBOX_NAMESPACE"] != "berth-sandboxes" {
		t.Fatalf("the gateway's driver and namespace = %q, %q", env["BERTH_SANDBOX_DRIVER"], env["BERTH_SANDBOX_NAMESPACE"])
	}
	file := filepath.Join(t.TempDir(), "sandboxes.yaml")
	if err := os.WriteFile(file, []byte(classes), 0o644); err != nil {
		t.Fatal(err)
	}
	env["BERTH_SANDBOXES_FILE"] = file
	cfg, err := server.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("berth serve would refuse the Deployment's settings:\n%v", err)
	}
	// A kelos pod's berth-init comes from the sandbox image the manifests
	// ship, where the cluster pulls it: not localhost/'s default.
	if len(cfg.Classes) == 0 || cfg.InitImage != cfg.Classes[0].Image {
		t.Errorf("BERTH_SANDBOX_INIT_IMAGE = %q, want the sandbox image the classes name", cfg.InitImage)
	}
}
