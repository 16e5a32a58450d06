package sandbox_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/input"
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
			var ie *fault.Error
			if !errors.As(err, &ie) || ie.Field != "branch" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("create %s with branch %.40q: %v; want it invalid on branch saying %s", req.Name, tt.branch, err, tt.want)
			}
		}
	}
	if got, _, _ := e.svc.List(t.Context(), e.operator, sandbox.ListOptions{All: true}); len(got) != 0 {
		t.Fatalf("refused creates left %d sandboxes behind", len(got))
	}
	if _, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey},
		Repo: "acme/app", Branch: "main"}); err != nil {
		t.Errorf("create with branch main: %v", err)
	}
}

// TestCreateBoundsItsFields: what a sandbox keeps of its request and
// shows in every answer, lists included, is bounded: the environment in
// all and per name, and the ssh keys in number and size.
func TestCreateBoundsItsFields(t *testing.T) {
	e := newEnv(t)
	vars := func(n, size int) map[string]string {
		env := map[string]string{}
		for i := range n {
			env[fmt.Sprintf("V%d", i)] = strings.Repeat("v", size)
		}
		return env
	}
	keys := make([]string, input.MaxSSHKeys+1)
	for i := range keys {
		keys[i] = testKey
	}
	for _, tt := range []struct {
		name        string
		env         map[string]string
		keys        []string
		field, want string
	}{
		{"environment in all", vars(3, 30<<10), nil, "env", "bytes of names and values; at most 65536"},
		{"a variable's name", map[string]string{strings.Repeat("N", 300): "1"}, nil, "env", "a name of 300 bytes; at most 256"},
		{"a value", vars(1, 40<<10), nil, "env.V0", "the value is 40960 bytes; at most 32768"},
		{"variables", vars(101, 1), nil, "env", "101 variables; at most 100"},
		{"ssh keys", nil, keys, "ssh_keys", "33 keys; at most 32"},
		{"an ssh key", nil, []string{testKey + strings.Repeat(" x", 9<<10)}, "ssh_keys[0]", "bytes; at most 16384"},
	} {
		req := sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}, Env: tt.env}
		if tt.keys != nil {
			req.SSHKeys = tt.keys
		}
		_, err := e.svc.Create(t.Context(), e.alice, req)
		var ie *fault.Error
		if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %.200v; want it invalid on %s saying %q", tt.name, err, tt.field, tt.want)
		}
	}
	if _, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: keys[:input.MaxSSHKeys],
		Env: vars(2, 32<<10-8)}); err != nil {
		t.Errorf("a sandbox at the bounds: %v", err)
	}
}
