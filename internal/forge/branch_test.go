package forge_test

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/forge"
)

// branchCorpus is what the issue found accepted, git's documented rules
// one by one, every byte between two letters, and names drawn from the
// characters the rules are about.
func branchCorpus() []string {
	corpus := []string{
		"main", "feature/x", "a b", "../../etc", "-x", "-", "a\nb", "@{-1}", "@{-2}", "@{upstream}", "main@{u}", "a@{b",
		"HEAD", "HEAD/x", "x/HEAD", "@", "@/a", "a/@", "a@b", "refs/heads/x", "a.lock", "a/b.lock/c", "a.lock/b", "a.lockb",
		"a/.b", ".a", "a.", "a..b", "a/", "/a", "a//b", "a/./b", "a/../b", "é", "日本語", "a;b", "a$b", "a'b", `a"b`, "a~1",
		"a^", "a:b", "a?", "a*", "a[b", "a]b", `a\b`, "a{b", "a}b", "a#b", "a%b", "a!b", "a=b", "a,b", "a+b", "a\tb",
		"a\x7fb", "a\x1fb", "...", ".", "..", "a/b/c/d/e", "v1.2.3", "release-2024.01", "user@host", "{", "}", "@{", "@}",
		strings.Repeat("a", forge.MaxBranch), strings.Repeat("ab/", 80) + "c",
	}
	for c := 1; c < 256; c++ {
		corpus = append(corpus, "a"+string(rune(c))+"b", string([]byte{'a', byte(c), 'b'}))
	}
	rng := rand.New(rand.NewPCG(14, 13))
	alphabet := []string{"a", "b", ".", "/", "@", "{", "}", "-", ".lock", "lock", " ", "~", "HEAD", "é"}
	for range 600 {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		corpus = append(corpus, b.String())
	}
	return corpus
}

// TestCheckBranchAgreesWithGit: CheckBranch takes exactly the names the
// real `git check-ref-format --branch` takes outside a repository, up to
// berth's length bound.
func TestCheckBranchAgreesWithGit(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	dir := t.TempDir()
	env := append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "LC_ALL=C")
	checked := 0
	for _, name := range branchCorpus() {
		if strings.IndexByte(name, 0) >= 0 {
			continue // no argument holds a NUL; CheckBranch's own test refuses it
		}
		cmd := exec.Command(gitBin, "check-ref-format", "--branch", name)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		gitTakes := err == nil
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			t.Fatalf("git check-ref-format: %v", err)
		}
		ours := forge.CheckBranch(name)
		if gitTakes != (ours == nil) {
			t.Errorf("branch %q: git check-ref-format --branch says %v (%s), CheckBranch says %v", name, gitTakes, strings.TrimSpace(string(out)), ours)
		}
		checked++
	}
	t.Logf("%d names compared with %s", checked, gitBin)
}

func TestCheckBranchBounds(t *testing.T) {
	for _, tt := range []struct {
		name, want string
	}{
		{strings.Repeat("a", forge.MaxBranch+1), "is 256 bytes; at most 255"},
		{strings.Repeat("a", 300), "is 300 bytes; at most 255"},
		{"a\x00b", "control character"},
		{"", "is empty"},
	} {
		err := forge.CheckBranch(tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckBranch(%.20q…): %v, want it refused: %s", tt.name, err, tt.want)
		}
	}
	if err := forge.CheckBranch(strings.Repeat("a", forge.MaxBranch)); err != nil {
		t.Errorf("a name of %d bytes: %v", forge.MaxBranch, err)
	}
}
