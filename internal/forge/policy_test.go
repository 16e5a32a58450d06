package forge_test

import (
	"testing"

	"berth.dev/berth/internal/forge"
)

const (
	zero = "0000000000000000000000000000000000000000"
	a    = "1111111111111111111111111111111111111111"
	b    = "2222222222222222222222222222222222222222"
)

// TestPushRules is the ref policy of SPEC S9 and S17, one row per rule.
func TestPushRules(t *testing.T) {
	agent := forge.PushRules{DefaultBranch: "main", Only: forge.AgentBranch("fix-1"),
		Created: map[string]bool{"refs/heads/berth/fix-1/old": true}}
	// The same sandbox once it has pushed its branch.
	pushed := forge.PushRules{DefaultBranch: "main", Only: forge.AgentBranch("fix-1"),
		Created: map[string]bool{"refs/heads/berth/fix-1": true}}
	engineer := forge.PushRules{DefaultBranch: "main", Created: map[string]bool{"refs/heads/mine": true, "refs/tags/v1": true}}
	// A reviewer's sandbox: its work is its verdict.
	reviewer := agent
	reviewer.ReadOnly = "a reviewer pushes nothing"
	tests := []struct {
		name    string
		rules   forge.PushRules
		update  forge.RefUpdate
		allowed bool
	}{
		{"agent creates its branch", agent, forge.RefUpdate{zero, a, "refs/heads/berth/fix-1"}, true},
		{"reviewer creates its branch", reviewer, forge.RefUpdate{zero, a, "refs/heads/berth/fix-1"}, false},
		{"agent updates the branch it created", pushed, forge.RefUpdate{a, b, "refs/heads/berth/fix-1"}, true},
		{"agent moves its name's branch another sandbox made", agent, forge.RefUpdate{a, b, "refs/heads/berth/fix-1"}, false},
		{"agent moves a ref below its branch another sandbox made", agent, forge.RefUpdate{a, b, "refs/heads/berth/fix-1/x"}, false},
		{"agent pushes below its branch", agent, forge.RefUpdate{zero, a, "refs/heads/berth/fix-1/try-2"}, true},
		{"agent pushes the default branch", agent, forge.RefUpdate{a, b, "refs/heads/main"}, false},
		{"agent pushes another sandbox's branch", agent, forge.RefUpdate{zero, a, "refs/heads/berth/fix-2"}, false},
		{"agent pushes a look-alike branch", agent, forge.RefUpdate{zero, a, "refs/heads/berth/fix-10"}, false},
		{"agent pushes a feature branch", agent, forge.RefUpdate{zero, a, "refs/heads/feature"}, false},
		{"agent pushes a tag", agent, forge.RefUpdate{zero, a, "refs/tags/v1"}, false},
		{"agent deletes a ref it created", agent, forge.RefUpdate{a, zero, "refs/heads/berth/fix-1/old"}, true},
		{"agent deletes its branch it did not create here", agent, forge.RefUpdate{a, zero, "refs/heads/berth/fix-1"}, false},
		{"engineer pushes a feature branch", engineer, forge.RefUpdate{zero, a, "refs/heads/feature"}, true},
		{"engineer pushes the default branch", engineer, forge.RefUpdate{a, b, "refs/heads/main"}, false},
		{"engineer deletes another's branch", engineer, forge.RefUpdate{a, zero, "refs/heads/theirs"}, false},
		{"engineer deletes their branch", engineer, forge.RefUpdate{a, zero, "refs/heads/mine"}, true},
		{"engineer creates a tag", engineer, forge.RefUpdate{zero, a, "refs/tags/v2"}, true},
		{"engineer moves someone's tag", engineer, forge.RefUpdate{a, b, "refs/tags/v0"}, false},
		{"engineer pushes notes", engineer, forge.RefUpdate{zero, a, "refs/notes/commits"}, false},
		{"odd ref", engineer, forge.RefUpdate{zero, a, "refs/heads/a..b"}, false},
		{"not a ref", engineer, forge.RefUpdate{zero, a, "HEAD"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused := tt.rules.Check([]forge.RefUpdate{tt.update})
			if got := len(refused) == 0; got != tt.allowed {
				t.Errorf("allowed = %v (%v), want %v", got, refused, tt.allowed)
			}
		})
	}
}
