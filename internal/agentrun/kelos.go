package agentrun

import (
	"maps"

	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/sandbox"
)

// kelosEnv adds the reserved environment of the Kelos interface (SPEC
// S13.6): the caller's variables of reserved names dropped so the host's
// win, and the key under the name the agent type's image reads. The
// prompt is the image's $1, and the whole "$@" slot. The agent
// configuration goes in KELOS_AGENTS_MD and KELOS_EFFORT.
func kelosEnv(sb sandbox.Sandbox, env map[string]string, cfg agentconfig.Config) ([]string, error) {
	for k := range env {
		if kelos.Reserved(k) {
			delete(env, k)
		}
	}
	vars, err := kelos.Env(kelos.Run{AgentType: sb.Runner, Model: env["BERTH_MODEL"], BaseBranch: sb.Branch, SetupCommand: sb.SetupCommand,
		AgentsMD: cfg.Instructions, Effort: cfg.Effort})
	if err != nil {
		return nil, err
	}
	maps.Copy(env, vars)
	if name := kelos.Credential(sb.Runner); name != "" {
		env[name] = env["BERTH_API_KEY"]
	}
	return []string{sb.Task}, nil
}
