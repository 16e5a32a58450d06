package entrypoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/runner"
)

// Skills from the repository (issue 23): an agent configuration may name
// a directory of the run's repository (BERTH_SKILLS_FROM) whose
// subdirectories are skills; berth-init copies them, as the checkout has
// them, to where the runner's CLI reads user-level skills under HOME
// (BERTH_SKILLS_DIR). The checkout is the repository's, so nothing in it
// is trusted further than a file's bytes: links are not followed (the
// copy goes through an os.Root), only regular files are copied, hidden
// ones are left out, and the runner's limits hold (16 skills of 16 files,
// 32 KiB together). A run whose repository has no such directory runs
// without them, saying so.

const (
	envSkillsFrom = "BERTH_SKILLS_FROM"
	envSkillsDir  = "BERTH_SKILLS_DIR"
)

// copyRepoSkills copies the repository's skills under HOME; it reports
// how many it copied.
func (r *starter) copyRepoSkills() (int, error) {
	from, to := r.env.Getenv(envSkillsFrom), r.env.Getenv(envSkillsDir)
	if from == "" || to == "" {
		return 0, nil
	}
	if err := runner.CheckRepoPath(from); err != nil {
		return 0, fmt.Errorf("%s: %w", envSkillsFrom, err)
	}
	if p := filepath.FromSlash(to); !filepath.IsLocal(p) {
		return 0, fmt.Errorf("%s %q is not a path under HOME", envSkillsDir, to)
	}
	root, err := os.OpenRoot(r.cfg.work)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	skills, err := runner.GatherSkills("", root.FS(), from)
	if err != nil {
		return 0, err
	}
	if len(skills) == 0 {
		r.logf("the repository has no skills in %s", from)
		return 0, nil
	}
	if err := runner.WriteSkills(filepath.Join(r.cfg.home, filepath.FromSlash(to)), skills, 0o600); err != nil {
		return 0, err
	}
	return len(skills), nil
}

// envKelosSkills carries a kelos run's uploaded skills (JSON) to an
// in-machine run's berth-init.
const envKelosSkills = "BERTH_KELOS_SKILLS"

// kelosPlugins writes an in-machine kelos run's skills (uploaded, and
// the repository's) as berth's plugin under HOME and points
// KELOS_PLUGIN_DIR at it in env, which it returns without the two
// variables that carried them.
func (r *starter) kelosPlugins(env []string) ([]string, error) {
	raw, from := r.env.Getenv(envKelosSkills), r.env.Getenv(envSkillsFrom)
	if raw == "" && from == "" {
		return env, nil
	}
	root, err := os.OpenRoot(r.cfg.work)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	skills, err := runner.GatherSkills(raw, root.FS(), from)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.cfg.home, ".kelos-plugins")
	if err := runner.WriteSkills(filepath.Join(dir, kelos.Plugin, "skills"), skills, 0o600); err != nil {
		return nil, err
	}
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != envKelosSkills && name != envSkillsFrom && name != "KELOS_PLUGIN_DIR" {
			out = append(out, kv)
		}
	}
	r.logf("wrote %d skills as the plugin %s in %s", len(skills), kelos.Plugin, dir)
	return append(out, "KELOS_PLUGIN_DIR="+dir), nil
}
