package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDepsStayLean keeps berth-init, which ships in every sandbox image, free
// of the gateway's weight (STYLE.md §3 rule 3): no database, no Kubernetes
// client, no CLI framework, none of the gateway's own packages. Today it
// needs only the standard library, internal/entrypoint, internal/runner
// (the runners' binaries), internal/review (a reviewer's verdict, found
// in the checkout of an in-machine run), internal/kelos (the interface of
// the kelos images it wraps in their pods), internal/secret (the one type
// that holds a credential's value) and internal/api (the gateway's wire
// types, which it reads and writes), all standard library only; anything
// else must be allowed here deliberately.
func TestDepsStayLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{
		"database/sql", "modernc.org/", "k8s.io/", "sigs.k8s.io/", "github.com/jackc/",
		"github.com/spf13/cobra", "github.com/pressly/goose",
		"berth.dev/berth/internal/store", "berth.dev/berth/internal/gateway",
		"berth.dev/berth/internal/cli", "berth.dev/berth/internal/sandbox",
		"berth.dev/berth/internal/driver",
	}
	allowed := map[string]bool{
		"berth.dev/berth/cmd/berth-init":        true,
		"berth.dev/berth/internal/entrypoint":   true,
		"berth.dev/berth/internal/runner":       true,
		"berth.dev/berth/internal/review":       true, // finding a reviewer's verdict, standard library only
		"berth.dev/berth/internal/kelos":        true, // a kelos image's entrypoint, paths and $1's limit; standard library only
		"berth.dev/berth/internal/secret":       true, // a credential's value, redacted everywhere; standard library only
		"berth.dev/berth/internal/api":          true, // the wire types it shares with the host; standard library only
		"berth.dev/berth/internal/devcontainer": true, // a postCreateCommand's forms; standard library only
		"berth.dev/berth/internal/handoff":      true, // taking a tunnel's connection over from the gateway; standard library only
	}
	for line := range strings.Lines(string(out)) {
		dep, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		for _, b := range banned {
			if strings.HasPrefix(dep, b) {
				t.Errorf("berth-init depends on %s (banned prefix %q)", dep, b)
			}
		}
		if std != "true" && !allowed[dep] {
			t.Errorf("berth-init depends on %s, outside the standard library", dep)
		}
	}
}
