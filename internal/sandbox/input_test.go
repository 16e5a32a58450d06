package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/internal/sandbox"
)

// TestCreateRefusesBadBranches: a branch is refused at create, naming the
// field, unless git would take it as a branch name (and it is at most 255
// bytes): what the issue found accepted, and git's other rules.
func TestCreateRefusesBadBranches(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct{ branch, want string }{
		{"a b", `" "`},
		{"../../etc", `".."`},
		{"-x", "starts with -"},
		{"a\nb", "control character"},
		{"@{-1}", `"@{"`},
		{strings.Repeat("b", 300), "300 bytes; at most 255"},
		{"HEAD", "HEAD"},
		{"main.lock", ".lock"},
		{"a//b", "empty part"},
		{"a~1", `"~"`},
	} {
		for _, req := range []sandbox.CreateRequest{
			{Name: "dev", Class: "standard", SSHKeys: []string{testKey}, Repo: "acme/app", Branch: tt.branch},
			{Name: "fix", Purpose: "agent", Class: "agent", Repo: "acme/app", Branch: tt.branch, Task: "fix it"},
		} {
			_, err := e.svc.Create(t.Context(), e.alice, req)
			var ie *sandbox.InvalidError
			if !errors.As(err, &ie) || ie.Field != "branch" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("create %s with branch %.40q: %v; want it invalid on branch saying %s", req.Name, tt.branch, err, tt.want)
			}
		}
	}
	if got, _ := e.svc.List(t.Context(), e.operator, sandbox.ListOptions{All: true}); len(got) != 0 {
		t.Fatalf("refused creates left %d sandboxes behind", len(got))
	}
	if _, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey},
		Repo: "acme/app", Branch: "main"}); err != nil {
		t.Errorf("create with branch main: %v", err)
	}
}
