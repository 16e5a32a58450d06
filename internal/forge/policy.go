package forge

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RefUpdate is one command of a push: change Ref from Old to New. An
// all-zero Old creates the ref; an all-zero New deletes it.
type RefUpdate struct {
	Old, New, Ref string
}

// IsCreate reports whether the update creates its ref.
func (u RefUpdate) IsCreate() bool { return zeroID(u.Old) }

// IsDelete reports whether the update deletes its ref.
func (u RefUpdate) IsDelete() bool { return zeroID(u.New) }

func zeroID(id string) bool { return id != "" && strings.Trim(id, "0") == "" }

// PushRules are what one push may do (SPEC S9, S17).
type PushRules struct {
	// DefaultBranch is the repository's default branch (such as main):
	// nobody writes it through berth.
	DefaultBranch string
	// Only, when not empty, is the one branch (and those below it) the
	// pusher may create, and update once it created it: an agent
	// sandbox's refs/heads/berth/<name>.
	Only string
	// Created lists the refs the pusher created earlier: the only ones it
	// may delete.
	Created map[string]bool
	// DeleteAny lets the pusher delete and move any ref but the default
	// branch, as a forge token can (the local forge in token mode).
	DeleteAny bool
	// ReadOnly, when not empty, refuses every update with this reason: a
	// reviewer's work is its verdict, never a ref.
	ReadOnly string
}

// DefaultBranch is the branch a bare repository's HEAD names, such as
// main: what PushRules.DefaultBranch is for the repository at bare; "" when
// HEAD names none.
func DefaultBranch(bare string) string {
	b, err := os.ReadFile(filepath.Join(bare, "HEAD"))
	if err != nil {
		return ""
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
	if !ok {
		return ""
	}
	return ref
}

// AgentBranch is the branch an agent sandbox pushes its work to.
func AgentBranch(sandboxName string) string { return "refs/heads/berth/" + sandboxName }

// Check returns why each refused update is refused, by ref; an empty map
// means the push may go ahead. One refusal refuses the whole push.
func (p PushRules) Check(updates []RefUpdate) map[string]string {
	refused := map[string]string{}
	for _, u := range updates {
		if why := p.check(u); why != "" {
			refused[u.Ref] = why
		}
	}
	return refused
}

func (p PushRules) check(u RefUpdate) string {
	if p.ReadOnly != "" {
		return p.ReadOnly
	}
	if !validRef(u.Ref) {
		return "not a ref berth accepts"
	}
	if p.DefaultBranch != "" && u.Ref == "refs/heads/"+p.DefaultBranch {
		return fmt.Sprintf("berth never writes the default branch %s; push a branch and propose it", p.DefaultBranch)
	}
	if p.Only != "" && u.Ref != p.Only && !strings.HasPrefix(u.Ref, p.Only+"/") {
		return fmt.Sprintf("this sandbox may push only %s (and below it)", strings.TrimPrefix(p.Only, "refs/heads/"))
	}
	if p.Only == "" && !strings.HasPrefix(u.Ref, "refs/heads/") && !strings.HasPrefix(u.Ref, "refs/tags/") {
		return "only branches and tags may be pushed"
	}
	if p.DeleteAny {
		return ""
	}
	// Sandbox names repeat (another owner's, a later sandbox's): the
	// branch a name gives is the sandbox's only if it made it.
	if p.Only != "" && !u.IsCreate() && !u.IsDelete() && !p.Created[u.Ref] {
		return fmt.Sprintf("%s exists and another sandbox made it: this one may create its branch or move what it made, not another's work (name the sandbox differently)",
			strings.TrimPrefix(u.Ref, "refs/heads/"))
	}
	if u.IsDelete() && !p.Created[u.Ref] {
		return "a sandbox may delete only refs it created"
	}
	if strings.HasPrefix(u.Ref, "refs/tags/") && !u.IsCreate() && !p.Created[u.Ref] {
		return "a tag it did not create cannot be moved"
	}
	return ""
}

// validRef accepts what git's check-ref-format would, closely enough to
// refuse anything odd: refs/…, no "..", no control characters, no "@{".
func validRef(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || len(ref) > 255 || strings.Contains(ref, "..") || strings.Contains(ref, "@{") ||
		strings.Contains(ref, "//") || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".lock") || strings.HasSuffix(ref, ".") {
		return false
	}
	for _, c := range ref {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return false
		}
	}
	return true
}
