package runner_test

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"berth.dev/berth/internal/runner"
)

func skill(name string, files ...string) runner.Skill {
	s := runner.Skill{Name: name}
	for _, f := range files {
		s.Files = append(s.Files, runner.File{Path: f, Content: []byte("x")})
	}
	return s
}

func TestCheckSkills(t *testing.T) {
	if err := runner.CheckSkills([]runner.Skill{skill("release", "SKILL.md", "scripts/tag.sh")}); err != nil {
		t.Errorf("a good skill: %v", err)
	}
	big := skill("big", "SKILL.md")
	big.Files[0].Content = make([]byte, runner.MaxSkillBytes+1)
	for name, ss := range map[string][]runner.Skill{
		"no SKILL.md":       {skill("a", "README.md")},
		"a bad name":        {skill("A B", "SKILL.md")},
		"twice":             {skill("a", "SKILL.md"), skill("a", "SKILL.md")},
		"a path out":        {skill("a", "SKILL.md", "../x")},
		"an absolute path":  {skill("a", "SKILL.md", "/etc/passwd")},
		"a hidden file":     {skill("a", "SKILL.md", ".env")},
		"too deep":          {skill("a", "SKILL.md", "a/b/c/d/e")},
		"over the size":     {big},
		"not text":          {{Name: "a", Files: []runner.File{{Path: "SKILL.md", Content: []byte{0xff, 0xfe}}}}},
		"the same file two": {skill("a", "SKILL.md", "SKILL.md")},
	} {
		if err := runner.CheckSkills(ss); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckMCP(t *testing.T) {
	good := []runner.MCPServer{{Name: "docs", Command: []string{"python3", "/opt/docs.py"}, Env: map[string]string{"MODE": "ro"}},
		{Name: "tracker", URL: "https://mcp.example.com/mcp"}}
	if err := runner.CheckMCP(good); err != nil {
		t.Errorf("good servers: %v", err)
	}
	for name, m := range map[string]runner.MCPServer{
		"neither":              {Name: "x"},
		"both":                 {Name: "x", Command: []string{"a"}, URL: "https://h/"},
		"a bad name":           {Name: "a b", Command: []string{"a"}},
		"credentials in a URL": {Name: "x", URL: "https://u:p@h/"},
		"another scheme":       {Name: "x", URL: "file:///etc/passwd"},
		"a BERTH_ variable":    {Name: "x", Command: []string{"a"}, Env: map[string]string{"BERTH_API_KEY": "k"}},
		"a line break":         {Name: "x", Command: []string{"a", "b\nc"}},
		"env on a remote one":  {Name: "x", URL: "https://h/", Env: map[string]string{"A": "b"}},
	} {
		if err := runner.CheckMCP([]runner.MCPServer{m}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestReadSkills: a checkout's skills are its subdirectories with a
// SKILL.md, their regular files, hidden ones left out.
func TestReadSkills(t *testing.T) {
	fsys := fstest.MapFS{
		"s/release/SKILL.md":       {Data: []byte("---\nname: release\n---\n")},
		"s/release/scripts/tag.sh": {Data: []byte("git tag\n")},
		"s/release/.secret":        {Data: []byte("x")},
		"s/notes/README.md":        {Data: []byte("no skill")},
	}
	got, err := runner.GatherSkills(`[{"name":"up","files":[{"Path":"SKILL.md","Content":"eA=="}]}]`, fsys, "s")
	if err != nil || len(got) != 2 || got[0].Name != "up" || got[1].Name != "release" || len(got[1].Files) != 2 {
		t.Fatalf("GatherSkills = %+v, %v", got, err)
	}
	if _, err := runner.GatherSkills("", fsys, "missing"); err != nil {
		t.Errorf("a repository without the directory: %v, want none", err)
	}
	dir := t.TempDir()
	if err := runner.WriteSkills(dir, got, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "release", "scripts", "tag.sh"))
	if err != nil || string(b) != "git tag\n" {
		t.Errorf("written: %q, %v", b, err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "release", "scripts")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("a directory's mode: %v", st)
	}
	if _, err := runner.GatherSkills("", fsys, "../x"); err == nil {
		t.Errorf("a path out: %v", err)
	}
}
