package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWritesPrintJSON: every command that changes something takes -o json
// and prints the object it made or changed, so a script can capture its id.
func TestWritesPrintJSON(t *testing.T) {
	g := newEngineerGateway(t)
	classes := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(classes, []byte("sandboxes:\n  - name: small\n    image: localhost/berth-sandbox:1\n    isolation: standard\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// jsonOf runs a command as who and decodes its stdout.
	jsonOf := func(who string, args ...string) map[string]any {
		t.Helper()
		code, out, errs := g.berth(t, who, append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("%v exited %d: %s", args, code, errs)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v -o json printed no JSON object (%v):\n%s", args, err, out)
		}
		return v
	}
	field := func(v map[string]any, path ...string) any {
		var x any = v
		for _, p := range path {
			m, ok := x.(map[string]any)
			if !ok {
				return nil
			}
			x = m[p]
		}
		return x
	}
	sb := jsonOf("alice", "sandbox", "create", "dev", "--ssh-key", g.keyFile, "--class", "standard")
	id, _ := sb["id"].(string)
	if id == "" || sb["state"] != "running" {
		t.Fatalf("create -o json: %v", sb)
	}
	for _, tt := range []struct {
		who  string
		args []string
		path []string
		want any
	}{
		{"alice", []string{"sandbox", "extend", "dev", "--ttl", "1h", "--shorten"}, []string{"id"}, id},
		{"alice", []string{"sandbox", "suspend", "dev"}, []string{"state"}, "suspended"},
		{"alice", []string{"sandbox", "resume", "dev"}, []string{"state"}, "running"},
		{"alice", []string{"sandbox", "terminate", "dev"}, []string{"state"}, "terminated"},
		{"ann", []string{"sandbox", "apply", "-f", classes}, []string{"created"}, []any{"small"}},
		{"ann", []string{"project", "create", "ml"}, []string{"name"}, "ml"},
		{"ann", []string{"user", "disable", "alice"}, []string{"user", "name"}, "alice"},
		{"ann", []string{"user", "enable", "alice"}, []string{"name"}, "alice"},
	} {
		v := jsonOf(tt.who, tt.args...)
		got, _ := json.Marshal(field(v, tt.path...))
		want, _ := json.Marshal(tt.want)
		if string(got) != string(want) {
			t.Errorf("%v -o json: %v is %s, want %s (all: %v)", tt.args, tt.path, got, want, v)
		}
	}
	k := jsonOf("alice", "key", "create", "--name", "ci")
	kid, _ := k["id"].(string)
	if kid == "" {
		t.Fatalf("key create -o json: %v", k)
	}
	if v := jsonOf("alice", "key", "revoke", kid); v["id"] != kid || v["revoked"] != true {
		t.Errorf("key revoke -o json: %v", v)
	}
}
