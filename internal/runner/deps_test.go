package runner_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly: runner is a domain package the in-sandbox
// program may import (STYLE.md §3), so it depends on the standard library
// alone, nothing of ours and nothing from a module.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); dep != "" && dep != "berth.dev/berth/internal/runner" {
			t.Errorf("runner depends on %s: standard library only", dep)
		}
	}
}
