package forge

import (
	"fmt"
	"strings"
)

// MaxBranch is the longest branch name berth takes, in bytes: git allows
// longer, but a name becomes a file under refs/heads/, and 255 is what
// most file systems allow one.
const MaxBranch = 255

// CheckBranch refuses what git would not take as a branch name, as `git
// check-ref-format --branch` does outside a repository (a test compares
// the two on a corpus): refs/heads/<name> must be a valid ref name and
// name must not start with "-" nor be HEAD. @{-N} names a branch only in a
// repository, and no ref name holds "@{", so it is refused. Past git's
// rules, a name longer than MaxBranch bytes is refused. The error says
// why, without the name.
func CheckBranch(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case len(name) > MaxBranch:
		return fmt.Errorf("is %d bytes; at most %d", len(name), MaxBranch)
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("starts with -, which git would read as an option")
	case name == "HEAD":
		return fmt.Errorf("HEAD names the checked-out commit, not a branch")
	}
	return checkRefName("refs/heads/" + name)
}

// checkRefName applies git's rules for a ref name (git-check-ref-format(1)),
// without --allow-onelevel, --refspec-pattern or --normalize.
func checkRefName(ref string) error {
	for i := range len(ref) {
		switch c := ref[i]; {
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("holds a control character (%q)", string(c))
		case strings.IndexByte(" ~^:?*[\\", c) >= 0:
			return fmt.Errorf("holds %q, which git does not allow in a branch name", string(c))
		}
	}
	switch {
	case strings.Contains(ref, ".."):
		return fmt.Errorf(`holds "..", which git does not allow in a branch name`)
	case strings.Contains(ref, "@{"):
		return fmt.Errorf(`holds "@{", which git reads as a reflog or upstream selector`)
	case strings.HasSuffix(ref, "/"):
		return fmt.Errorf("ends with /")
	case strings.HasSuffix(ref, "."):
		return fmt.Errorf("ends with .")
	}
	for _, c := range strings.Split(ref, "/") {
		switch {
		case c == "":
			return fmt.Errorf("has an empty part (// or a leading /)")
		case strings.HasPrefix(c, "."):
			return fmt.Errorf("has a part starting with . (%q)", c)
		case strings.HasSuffix(c, ".lock"):
			return fmt.Errorf("has a part ending with .lock (%q)", c)
		}
	}
	return nil
}
