package entrypoint

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepoSkills: the repository's skills are copied under HOME where
// the runner reads them, as regular files only: a link in a skill (to a
// file outside the checkout) is not followed, a hidden file is left out,
// a directory without SKILL.md is no skill, and a skills directory that
// is itself a link out of the checkout is refused.
func TestRepoSkills(t *testing.T) {
	work, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret"), "host secret")
	skills := filepath.Join(work, ".berth", "skills")
	write(filepath.Join(skills, "release", "SKILL.md"), "---\nname: release\ndescription: cut a release\n---\n")
	write(filepath.Join(skills, "release", "scripts", "tag.sh"), "git tag v1\n")
	write(filepath.Join(skills, "release", ".env"), "TOKEN=x\n")
	write(filepath.Join(skills, "notes", "README.md"), "no skill here\n")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(skills, "release", "leak.txt")); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{envSkillsFrom: ".berth/skills", envSkillsDir: ".claude/skills"}
	r := &starter{cfg: config{work: work, home: home}, env: Env{Getenv: func(k string) string { return vars[k] }, Stderr: io.Discard}}
	n, err := r.copyRepoSkills()
	if err != nil || n != 1 {
		t.Fatalf("copyRepoSkills = %d, %v; want the one skill", n, err)
	}
	var got []string
	_ = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(home, p)
			got = append(got, rel)
		}
		return nil
	})
	if strings.Join(got, " ") != ".claude/skills/release/SKILL.md .claude/skills/release/scripts/tag.sh" {
		t.Errorf("copied %v, want SKILL.md and scripts/tag.sh only", got)
	}

	// A skills directory that leads out of the checkout.
	if err := os.RemoveAll(filepath.Join(work, ".berth")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(outside, "evil", "SKILL.md"), "---\nname: evil\n---\n")
	if err := os.Symlink(outside, filepath.Join(work, ".berth")); err != nil {
		t.Fatal(err)
	}
	vars[envSkillsFrom] = ".berth"
	if n, err := r.copyRepoSkills(); err == nil && n > 0 {
		t.Errorf("a skills directory linked out of the checkout: copied %d", n)
	}
	// None at all: the run goes on.
	vars[envSkillsFrom] = "no/such/dir"
	if n, err := r.copyRepoSkills(); err != nil || n != 0 {
		t.Errorf("no such directory: %d, %v", n, err)
	}
}
