package forge

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
)

// ThreadKind says whether a comment goes on an issue or on a change (pull/merge request).
type ThreadKind string

// The kinds of thread a comment goes on.
const (
	ThreadIssue  ThreadKind = "issue"
	ThreadChange ThreadKind = "change"
)

// Thread is an issue or a change on a repository, by its number (GitHub's number, GitLab's iid).
type Thread struct {
	Kind   ThreadKind
	Number int
}

// ChangeRequest is a draft change to open: from branch Head to branch Base (names without refs/heads/).
type ChangeRequest struct {
	Head, Base  string
	Title, Body string
}

// Change is an opened pull or merge request.
type Change struct {
	Number  int
	URL     string // its web page
	Existed bool   // it was open already from that head: nothing new was opened
}

// Reporter takes a run's results back to the forge with the deployment's own credential, never a sandbox's (SPEC S13).
type Reporter interface {
	// DefaultBranch is the branch r's changes merge into unless told
	// otherwise.
	DefaultBranch(ctx context.Context, r Repo) (string, error)
	// OpenChange opens a draft change; when one is open from req.Head already it returns that one, Existed.
	OpenChange(ctx context.Context, r Repo, req ChangeRequest) (Change, error)
	// Comment posts body on t and returns the comment's web URL.
	Comment(ctx context.Context, r Repo, t Thread, body string) (string, error)
	// Review posts body as a review comment on change n (a comment: neither approval nor request for changes) and returns its URL.
	Review(ctx context.Context, r Repo, n int, body string) (string, error)
}

// MaxReportBody is the most characters (runes) of a body berth sends a
// forge: both forges accept it, with room to spare (GitHub caps bodies at
// 65536).
const MaxReportBody = 60000

// TrimBody returns s when it has at most MaxReportBody characters. A longer
// s is cut at a character boundary and ends with a line saying it was cut,
// MaxReportBody characters in all.
func TrimBody(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= MaxReportBody {
		return s
	}
	note := fmt.Sprintf("\n\n[berth cut this text here: it had %d characters, more than the %d a forge is sent]\n", n, MaxReportBody)
	keep := MaxReportBody - utf8.RuneCountInString(note)
	end := 0
	for range keep {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
	}
	// The note starts a line of its own: what is kept ends its line
	// without trailing blanks.
	return strings.TrimRight(s[:end], " \t\r\n") + note
}

// Check refuses a change request a forge would refuse, or berth should
// never make, before any call: branch names, a head that is its base, no
// title.
func (req ChangeRequest) Check() error {
	if err := CheckBranch(req.Head); err != nil {
		return fault.Field("head", "the branch name %v", err)
	}
	if err := CheckBranch(req.Base); err != nil {
		return fault.Field("base", "the branch name %v", err)
	}
	if req.Head == req.Base {
		return fault.Field("base", "is the head branch itself")
	}
	if strings.TrimSpace(req.Title) == "" {
		return fault.Field("title", "is empty")
	}
	return nil
}

// Check refuses a thread that cannot be one.
func (t Thread) Check() error {
	if t.Kind != ThreadIssue && t.Kind != ThreadChange {
		return fault.Field("thread", "kind %q is neither issue nor change", t.Kind)
	}
	if t.Number <= 0 {
		return fault.Field("thread", "number %d is not one", t.Number)
	}
	return nil
}
