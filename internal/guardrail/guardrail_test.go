package guardrail_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/quantity"
)

func ptr[T any](v T) *T { return &v }

func TestCombineCeilingsTakeTheMinimum(t *testing.T) {
	org := guardrail.Guardrail{MaxSandboxes: ptr(10), MaxSandboxMemory: ptr(int64(32768)), MaxSandboxTTL: ptr(8 * time.Hour)}
	prj := guardrail.Guardrail{MaxSandboxes: ptr(20), MaxSandboxCPU: ptr(quantity.Millicores(4000)), MaxSandboxTTL: ptr(2 * time.Hour)}
	got := guardrail.Combine(org, prj)
	if *got.MaxSandboxes != 10 || *got.MaxSandboxMemory != 32768 || *got.MaxSandboxCPU != 4000 || *got.MaxSandboxTTL != 2*time.Hour {
		t.Fatalf("Combine = sandboxes %d memory %d cpu %d ttl %v; want 10 32768 4000 2h",
			*got.MaxSandboxes, *got.MaxSandboxMemory, *got.MaxSandboxCPU, *got.MaxSandboxTTL)
	}
	if none := guardrail.Combine(guardrail.Guardrail{}, guardrail.Guardrail{}); none.MaxSandboxes != nil || none.MaxSandboxTTL != nil {
		t.Fatal("two empty guardrails combined into a limit")
	}
}

func TestCombineRepos(t *testing.T) {
	tests := []struct {
		name     string
		org, prj []string
		want     []string
	}{
		{"organisation unset allows nothing", nil, []string{"acme"}, []string{}},
		{"project unset narrows nothing", []string{"acme", "tools/ci"}, nil, []string{"acme", "tools/ci"}},
		{"star narrowed by the project", []string{"*"}, []string{"acme/app"}, []string{"acme/app"}},
		{"group narrowed to one repository", []string{"acme"}, []string{"acme/app", "other/x"}, []string{"acme/app"}},
		{"project wider than organisation", []string{"acme/app"}, []string{"acme"}, []string{"acme/app"}},
		{"case does not matter", []string{"ACME"}, []string{"acme/App"}, []string{"acme/App"}},
		{"empty project list allows nothing", []string{"*"}, []string{}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := guardrail.Combine(guardrail.Guardrail{AllowedRepos: tt.org}, guardrail.Guardrail{AllowedRepos: tt.prj})
			if diff := cmp.Diff(tt.want, got.AllowedRepos); diff != "" {
				t.Errorf("allowed repos (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowsRepo(t *testing.T) {
	g := guardrail.Guardrail{AllowedRepos: []string{"acme", "tools/ci"}}
	for path, want := range map[string]bool{
		"acme/app": true, "ACME/App.git": true, "acme/sub/deep": true, "acmeco/app": false,
		"tools/ci": true, "tools/cider": false, "tools/other": false,
	} {
		if got := g.AllowsRepo(path); got != want {
			t.Errorf("AllowsRepo(%q) = %v, want %v", path, got, want)
		}
	}
	if !(guardrail.Guardrail{AllowedRepos: []string{"*"}}).AllowsRepo("any/thing") {
		t.Error("* does not allow any/thing")
	}
}

func TestCheckSizeRefuses(t *testing.T) {
	g := guardrail.Guardrail{MaxSandboxCPU: ptr(quantity.Millicores(4000)), MaxSandboxMemory: ptr(int64(8192))}
	if err := g.CheckSize(4000, 8<<30); err != nil {
		t.Errorf("a machine at the ceiling is refused: %v", err)
	}
	if err := g.CheckSize(8000, 1<<30); !errors.Is(err, fault.Exceeded) {
		t.Errorf("8 cores under a 4-core ceiling: err = %v, want fault.Exceeded", err)
	}
	if err := g.CheckSize(1000, 16<<30); !errors.Is(err, fault.Exceeded) {
		t.Errorf("16Gi under an 8192 MiB ceiling: err = %v, want fault.Exceeded", err)
	}
}

func TestCutTTLAndCount(t *testing.T) {
	g := guardrail.Guardrail{MaxSandboxTTL: ptr(2 * time.Hour)}
	if got := g.CutTTL(8 * time.Hour); got != 2*time.Hour {
		t.Errorf("CutTTL(8h) = %v, want 2h", got)
	}
	if got := g.CutTTL(time.Hour); got != time.Hour {
		t.Errorf("CutTTL(1h) = %v, want 1h", got)
	}
	if err := guardrail.CheckCount(ptr(2), 2, "project p"); !errors.Is(err, fault.Exceeded) {
		t.Errorf("CheckCount(2 of 2) = %v, want fault.Exceeded", err)
	}
	if err := guardrail.CheckCount(ptr(2), 1, "project p"); err != nil {
		t.Errorf("CheckCount(1 of 2) = %v", err)
	}
	if err := guardrail.CheckCount(nil, 1000, "project p"); err != nil {
		t.Errorf("CheckCount(no limit) = %v", err)
	}
}

func TestValidate(t *testing.T) {
	bad := guardrail.Guardrail{MaxSandboxes: ptr(-1), MaxSandboxTTL: ptr(time.Minute), AllowedRepos: []string{"acme/", "a b"}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate accepted a negative max, a 1m ttl and bad repository entries")
	}
	for _, field := range []string{"max_sandboxes", "max_sandbox_ttl", "allowed_repos"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate error %q does not name %s", err, field)
		}
	}
}

func TestStringNamesEveryField(t *testing.T) {
	ttl, cpu, n, mem := 8*time.Hour, quantity.Millicores(4000), 10, int64(32768)
	tests := []struct {
		g    guardrail.Guardrail
		want string
	}{
		{guardrail.Guardrail{}, "max-sandboxes=none max-sandbox-memory=none max-sandbox-cpu=none max-sandbox-ttl=none allowed-repos=unset egress=unset"},
		{guardrail.Guardrail{MaxSandboxes: &n, MaxSandboxMemory: &mem, MaxSandboxCPU: &cpu, MaxSandboxTTL: &ttl, AllowedRepos: []string{"acme/app", "acme/web"},
			Egress: []string{"a.com", "*.b.org:8443"}},
			"max-sandboxes=10 max-sandbox-memory=32Gi max-sandbox-cpu=4 max-sandbox-ttl=8h allowed-repos=[acme/app,acme/web] egress=[a.com,*.b.org:8443]"},
		{guardrail.Guardrail{AllowedRepos: []string{}}, "max-sandboxes=none max-sandbox-memory=none max-sandbox-cpu=none max-sandbox-ttl=none allowed-repos=[] egress=unset"},
	}
	for _, tt := range tests {
		if got := tt.g.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestEgressNarrows: a guardrail's egress only takes away from a class's,
// an organisation's and a project's combine restrict-only, and a bad one
// is named by Validate.
func TestEgressNarrows(t *testing.T) {
	class, err := egress.ParsePolicy("", []string{"registry.npmjs.org", "*.pythonhosted.org", "api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	org := guardrail.Guardrail{Egress: []string{"registry.npmjs.org", "files.pythonhosted.org"}}
	prj := guardrail.Guardrail{Egress: []string{"*.pythonhosted.org", "registry.npmjs.org:8443"}}
	for _, c := range []struct {
		name string
		g    guardrail.Guardrail
		want string
	}{
		{"no guardrail", guardrail.Guardrail{}, "registry.npmjs.org, *.pythonhosted.org, api.example.com"},
		{"the organisation's", org, "registry.npmjs.org, files.pythonhosted.org"},
		{"organisation and project", guardrail.Combine(org, prj), "files.pythonhosted.org"},
		{"none", guardrail.Guardrail{Egress: []string{"none"}}, "none"},
		{"open narrows nothing", guardrail.Guardrail{Egress: []string{"open"}}, "registry.npmjs.org, *.pythonhosted.org, api.example.com"},
	} {
		if got := c.g.NarrowEgress(class).String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := guardrail.Combine(guardrail.Guardrail{}, prj).Egress; !slices.Equal(got, prj.Egress) {
		t.Errorf("a project's egress under an organisation without one: %q", got)
	}
	if err := (guardrail.Guardrail{Egress: []string{"bad host"}}).Validate(); err == nil || !strings.Contains(err.Error(), "egress") {
		t.Errorf("Validate of a bad egress: %v", err)
	}
}
