package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Skill is one Agent Skill: a directory of its own, Name, whose SKILL.md
// (YAML front matter giving its name and what it is for, then how) the
// CLI lists to the model, and whose other files the model reads when it
// uses the skill (issue 23's agent configuration).
type Skill struct {
	Name string `json:"name"`
	// Files are its files, their paths relative to its directory, with
	// forward slashes; SKILL.md among them.
	Files []File `json:"files"`
}

// MCPServer is a Model Context Protocol server a run's CLI is given: a
// command in the image it starts and talks to over stdio, or a remote
// server it reaches at URL (through the sandbox's egress policy).
type MCPServer struct {
	Name    string   `json:"name"`
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
	// Env is a stdio server's environment beyond the run's own: names
	// and values, never a credential (a project's secret reaches a
	// server by its placeholder, as any program in the sandbox).
	Env map[string]string `json:"env,omitempty"`
}

// Skills' and MCP servers' limits: what a run's environment carries.
const (
	MaxSkills        = 16
	MaxSkillFiles    = 16
	MaxSkillBytes    = 32 << 10 // the files of all a run's skills together
	MaxMCPServers    = 8
	maxMCPArgs       = 32
	maxMCPArg        = 1 << 10
	maxSkillPathElem = 4
)

var (
	skillNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	mcpNameRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$`)
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	pathElemRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)
)

// CheckSkillPath says whether p may be a file's path in a skill's
// directory: relative, forward slashes, at most four elements of
// letters, digits, '_', '-' and '.', none starting with a dot.
func CheckSkillPath(p string) error {
	parts := strings.Split(p, "/")
	if p == "" || len(parts) > maxSkillPathElem || path.Clean(p) != p {
		return fmt.Errorf("%q is not a relative path of at most %d elements", p, maxSkillPathElem)
	}
	for _, e := range parts {
		if !pathElemRE.MatchString(e) {
			return fmt.Errorf("%q: path elements are letters, digits, '_', '-' and '.', not starting with a dot", p)
		}
	}
	return nil
}

// CheckRepoPath says whether p may name a directory of a repository:
// relative, forward slashes, at most eight elements, no "." or "..".
func CheckRepoPath(p string) error {
	parts := strings.Split(p, "/")
	if p == "" || len(parts) > 8 || path.Clean(p) != p || strings.HasPrefix(p, "/") {
		return fmt.Errorf("%q is not a relative path of at most 8 elements", p)
	}
	for _, e := range parts {
		if e == "." || e == ".." || !pathElemRE.MatchString(strings.TrimPrefix(e, ".")) {
			return fmt.Errorf("%q: path elements are letters, digits, '_', '-' and '.'", p)
		}
	}
	return nil
}

// CheckSkills checks a run's skills: their names, their files (SKILL.md
// in each, UTF-8 text) and their size together.
func CheckSkills(ss []Skill) error {
	if len(ss) > MaxSkills {
		return fmt.Errorf("%d skills: at most %d", len(ss), MaxSkills)
	}
	total := 0
	seen := map[string]bool{}
	for _, s := range ss {
		if !skillNameRE.MatchString(s.Name) {
			return fmt.Errorf("skill %q: a name of lowercase letters, digits, '_' and '-', at most 64", s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("skill %s is given twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Files) > MaxSkillFiles {
			return fmt.Errorf("skill %s has %d files: at most %d", s.Name, len(s.Files), MaxSkillFiles)
		}
		hasMain := false
		files := map[string]bool{}
		for _, f := range s.Files {
			if err := CheckSkillPath(f.Path); err != nil {
				return fmt.Errorf("skill %s: %w", s.Name, err)
			}
			if files[f.Path] {
				return fmt.Errorf("skill %s: %s is given twice", s.Name, f.Path)
			}
			files[f.Path] = true
			if !utf8.Valid(f.Content) || strings.ContainsRune(string(f.Content), 0) {
				return fmt.Errorf("skill %s: %s is not UTF-8 text", s.Name, f.Path)
			}
			hasMain = hasMain || f.Path == "SKILL.md"
			total += len(f.Content)
		}
		if !hasMain {
			return fmt.Errorf("skill %s has no SKILL.md", s.Name)
		}
	}
	if total > MaxSkillBytes {
		return fmt.Errorf("the skills' files are %d bytes together: at most %d", total, MaxSkillBytes)
	}
	return nil
}

// CheckMCP checks a run's MCP servers: names, a command or an http(s)
// URL (not both), bounded arguments and environment.
func CheckMCP(ms []MCPServer) error {
	if len(ms) > MaxMCPServers {
		return fmt.Errorf("%d MCP servers: at most %d", len(ms), MaxMCPServers)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if !mcpNameRE.MatchString(m.Name) {
			return fmt.Errorf("MCP server %q: a name of letters, digits, '_' and '-', at most 32", m.Name)
		}
		if seen[m.Name] {
			return fmt.Errorf("MCP server %s is given twice", m.Name)
		}
		seen[m.Name] = true
		switch {
		case len(m.Command) > 0 && m.URL != "":
			return fmt.Errorf("MCP server %s: a command or a URL, not both", m.Name)
		case len(m.Command) > 0:
			if len(m.Command) > maxMCPArgs || m.Command[0] == "" {
				return fmt.Errorf("MCP server %s: a command and at most %d arguments", m.Name, maxMCPArgs-1)
			}
			for _, a := range m.Command {
				if len(a) > maxMCPArg || !utf8.ValidString(a) || strings.ContainsAny(a, "\x00\n\r") {
					return fmt.Errorf("MCP server %s: an argument of one line of UTF-8, at most %d bytes", m.Name, maxMCPArg)
				}
			}
		case m.URL != "":
			u, err := url.Parse(m.URL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(m.URL) > 2048 {
				return fmt.Errorf("MCP server %s: the URL must be http(s)://host/… without credentials", m.Name)
			}
			if len(m.Env) > 0 {
				return fmt.Errorf("MCP server %s: a remote server takes no environment", m.Name)
			}
		default:
			return fmt.Errorf("MCP server %s: give a command (in the image) or a URL", m.Name)
		}
		if len(m.Env) > 32 {
			return fmt.Errorf("MCP server %s: at most 32 environment variables", m.Name)
		}
		for k, v := range m.Env {
			if !envNameRE.MatchString(k) || strings.HasPrefix(k, "BERTH_") || len(v) > maxMCPArg || strings.ContainsAny(v, "\x00\n\r") {
				return fmt.Errorf("MCP server %s: variable %q: a name (not BERTH_…) and a one-line value of at most %d bytes", m.Name, k, maxMCPArg)
			}
		}
	}
	return nil
}

// Skilled is implemented by a runner whose CLI reads user-level skills
// from a directory under HOME, one subdirectory per skill.
type Skilled interface {
	// SkillsDir is that directory, relative to HOME.
	SkillsDir() string
}

// MCPConfigured is implemented by a runner whose CLI can be given MCP
// servers: MCPFiles renders them into files (the CLI's own config files
// among files, which it may replace) and returns them all.
type MCPConfigured interface {
	MCPFiles(files []File, ms []MCPServer) ([]File, error)
}

// ReadSkills reads the skills under dir of fsys (a checkout, through an
// os.Root so that no link leads out of it): each subdirectory
// holding a SKILL.md, its regular files (links and hidden files left
// out), bounded as CheckSkills bounds them.
func ReadSkills(fsys fs.FS, dir string) ([]Skill, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Skill
	total := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		base := path.Join(dir, e.Name())
		if st, err := fs.Stat(fsys, path.Join(base, "SKILL.md")); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if len(out) == MaxSkills {
			return nil, fmt.Errorf("%s has over %d skills", dir, MaxSkills)
		}
		s := Skill{Name: e.Name()}
		err := fs.WalkDir(fsys, base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != base && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if len(s.Files) == MaxSkillFiles {
				return fmt.Errorf("skill %s has over %d files", s.Name, MaxSkillFiles)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += int(info.Size()); total > MaxSkillBytes {
				return fmt.Errorf("the skills in %s are over %d bytes together", dir, MaxSkillBytes)
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			s.Files = append(s.Files, File{Path: strings.TrimPrefix(p, base+"/"), Content: b})
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// GatherSkills are a run's skills: those of raw (a JSON array, as a
// run's environment carries them; "" none) and those under from in
// checkout (an os.Root's FS of the run's checkout, so no link leads out
// of it; from "" none, and none when the repository lacks it), checked
// together.
func GatherSkills(raw string, checkout fs.FS, from string) ([]Skill, error) {
	var skills []Skill
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &skills); err != nil {
			return nil, fmt.Errorf("the skills: %w", err)
		}
	}
	if from != "" {
		if err := CheckRepoPath(from); err != nil {
			return nil, err
		}
		more, err := ReadSkills(checkout, from)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the skills in the repository's %s: %w", from, err)
		}
		skills = append(skills, more...)
	}
	if err := CheckSkills(skills); err != nil {
		return nil, err
	}
	return skills, nil
}

// WriteSkills writes skills under dir, each in a directory of its name,
// files with perm (directories with perm and the search bits).
func WriteSkills(dir string, skills []Skill, perm os.FileMode) error {
	for _, s := range skills {
		for _, f := range s.Files {
			p := filepath.Join(dir, s.Name, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(p), perm|0o100|(perm&0o044)>>2); err != nil {
				return err
			}
			if err := os.WriteFile(p, f.Content, perm); err != nil {
				return err
			}
		}
	}
	return nil
}
