package sandbox

import (
	"maps"
	"strings"

	"berth.dev/berth/internal/kelos"
)

// checkTask refuses a task a kelos image cannot be given: it travels as
// one argument (SPEC S13.6), which Linux bounds and which cannot hold NUL.
func checkTask(c Contract, task string) error {
	if c != ContractKelos {
		return nil
	}
	if len(task) > kelos.MaxPrompt {
		return invalid("task", "%d bytes: a kelos image takes its task as an argument, at most %d bytes", len(task), kelos.MaxPrompt)
	}
	if strings.ContainsRune(task, 0) {
		return invalid("task", "holds a NUL byte, which an argument cannot")
	}
	return nil
}

// kelosEnv adds the reserved environment of the Kelos interface (SPEC
// S13.6): the caller's variables of reserved names dropped so the host's
// win, and the key under the name the agent type's image reads. The
// prompt is the image's $1, and the whole "$@" slot.
func (s *Service) kelosEnv(sb Sandbox, env map[string]string) ([]string, error) {
	for k := range env {
		if kelos.Reserved(k) {
			delete(env, k)
		}
	}
	vars, err := kelos.Env(kelos.Run{AgentType: sb.Runner, Model: env["BERTH_MODEL"], BaseBranch: sb.Branch, SetupCommand: sb.SetupCommand})
	if err != nil {
		return nil, err
	}
	maps.Copy(env, vars)
	if name := kelos.Credential(sb.Runner); name != "" {
		env[name] = env["BERTH_API_KEY"]
	}
	return []string{sb.Task}, nil
}
