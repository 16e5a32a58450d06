package agentrun

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"

	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// kelosEnv adds the reserved environment of the Kelos interface (SPEC
// S13.6): the caller's variables of reserved names dropped so the host's
// win, and the key under the name the agent type's image reads. The
// prompt is the image's $1, and the whole "$@" slot. The agent
// configuration goes in KELOS_AGENTS_MD, KELOS_EFFORT and, with skills,
// KELOS_PLUGIN_DIR.
// kelosSkillsVar carries a kelos run's uploaded skills (JSON) to where
// its plugin is written: the host's Prepare, or an in-machine run's
// berth-init.
const kelosSkillsVar = "BERTH_KELOS_SKILLS"

// writeKelosPlugins writes a kelos run's plugin of skills in dir: the
// uploaded ones (env's kelosSkillsVar) and those of the checkout's
// skills path, read through an os.Root of work so no link leads out.
// The two variables are taken out of env: the image's entrypoint gets
// the plugin, not them.
func writeKelosPlugins(env map[string]string, work, dir string) error {
	raw, from := env[kelosSkillsVar], env["BERTH_SKILLS_FROM"]
	delete(env, kelosSkillsVar)
	delete(env, "BERTH_SKILLS_FROM")
	root, err := os.OpenRoot(work)
	if err != nil {
		return err
	}
	defer root.Close()
	skills, err := runner.GatherSkills(raw, root.FS(), from)
	if err != nil {
		return err
	}
	return runner.WriteSkills(filepath.Join(dir, kelos.Plugin, "skills"), skills, 0o644)
}

func kelosEnv(sb sandbox.Sandbox, env map[string]string, cfg agentconfig.Config) ([]string, error) {
	for k := range env {
		if kelos.Reserved(k) {
			delete(env, k)
		}
	}
	kr := kelos.Run{AgentType: sb.Runner, Model: env["BERTH_MODEL"], BaseBranch: sb.Branch, SetupCommand: sb.SetupCommand,
		AgentsMD: cfg.Instructions, Effort: cfg.Effort}
	if len(cfg.Skills) > 0 || cfg.SkillsPath != "" {
		// The skills go in a plugin of berth's under KELOS_PLUGIN_DIR:
		// the host writes it and mounts it (Prepare), or the machine's
		// berth-init does (in-machine runs).
		kr.PluginDir = kelos.PluginDir
		if err := runner.CheckSkills(cfg.Skills); err != nil {
			return nil, err
		}
		b, err := json.Marshal(cfg.Skills)
		if err != nil {
			return nil, err
		}
		env[kelosSkillsVar] = string(b)
		if cfg.SkillsPath != "" {
			env["BERTH_SKILLS_FROM"] = cfg.SkillsPath
		}
	}
	vars, err := kelos.Env(kr)
	if err != nil {
		return nil, err
	}
	maps.Copy(env, vars)
	if name := kelos.Credential(sb.Runner); name != "" {
		env[name] = env["BERTH_API_KEY"]
	}
	return []string{sb.Task}, nil
}
