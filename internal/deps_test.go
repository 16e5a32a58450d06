package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "berth.dev/berth/internal/"

// TestImportDirection keeps the arrows pointing inward (STYLE.md §3): domain
// packages import no adapter, no database and no Kubernetes code; adapters
// do not import each other; the wire types import nothing of ours.
func TestImportDirection(t *testing.T) {
	adapters := []string{"store", "gateway", "client", "cli", "driver/"}
	rules := []struct {
		pkg    string
		banned []string
	}{
		{"account", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "usage"}, adapters...)},
		{"guardrail", append([]string{"database/sql", "k8s.io/", "net/http", "account", "sandbox"}, adapters...)},
		// sandbox reaches net/http only through forge, whose GitHub and
		// GitLab clients are HTTP by nature.
		{"sandbox", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/"}, adapters...)},
		{"usage", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/"}, adapters...)},
		// class is below sandbox: sandbox makes sandboxes of its classes.
		{"class", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "github.com/prometheus/"}, adapters...)},
		{"quantity", append([]string{"database/sql", "account", "sandbox", "guardrail"}, adapters...)},
		{"name", append([]string{"database/sql", "account", "sandbox", "guardrail"}, adapters...)},
		{"forge", append([]string{"database/sql", "k8s.io/", "account", "sandbox", "guardrail"}, adapters...)},
		{"audit", []string{module, "database/sql"}},
		// overload is a leaf: the store returns its error, the gateway
		// answers it.
		{"overload", []string{module, "database/sql", "net/http"}},
		// secret is a leaf both the gateway and berth-init import.
		{"secret", []string{module, "database/sql", "net/http"}},
		{"api", []string{module}},
		// paging is a leaf the domain, the store, the gateway and the panel share.
		{"paging", []string{module, "database/sql", "net/http"}},
		{"runner", []string{module, "database/sql", "net/http"}},
		// inference is pure: the gateway does its HTTP, the store its SQL.
		{"inference", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "modelserver", "github.com/prometheus/"}, adapters...)},
		{"review", []string{module, "database/sql", "net/http"}},
		{"kelos", []string{module, "database/sql", "net/http"}},
		{"modelserver", []string{module}},
		{"githttp", []string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/", module + "sandbox", module + "account", "database/sql"}},
		{"tunnel", []string{module}},
		{"store", []string{module + "gateway", module + "client", module + "cli", module + "driver/"}},
		{"driver/kubernetes", []string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/podman", module + "driver/fake", "database/sql"}},
		{"driver/fake", []string{module + "store", module + "gateway", module + "client", module + "cli", "database/sql"}},
		{"gateway", []string{module + "store", module + "client", module + "cli", module + "driver/", "database/sql", "github.com/prometheus/", "github.com/chromedp/"}},
		// The web panel is an adapter inside the gateway's edge: services
		// in, HTML out. Chromium drives it in tests only.
		{"gateway/panel", []string{module + "store", module + "client", module + "cli", module + "driver/", module + "gateway",
			"database/sql", "github.com/prometheus/", "github.com/chromedp/"}},
		{"metrics", []string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/", "database/sql"}},
		{"client", []string{module + "store", module + "gateway", module + "cli", module + "driver/", module + "sandbox", module + "account", "database/sql"}},
	}
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+r.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", r.pkg, err)
			}
			self := module + r.pkg
			for dep := range strings.Lines(string(out)) {
				dep = strings.TrimSpace(dep)
				if dep == self {
					continue
				}
				for _, b := range r.banned {
					full := b
					if !strings.Contains(b, ".") && !strings.Contains(b, "/sql") && b != "net/http" {
						full = module + b // a package of ours, by short name
					}
					if strings.HasPrefix(dep, full) {
						t.Errorf("%s imports %s (banned: %q)", r.pkg, dep, b)
					}
				}
			}
		})
	}
}
