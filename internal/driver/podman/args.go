package podman

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"berth.dev/berth/internal/handoff"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// name is the container's and the volume's name for a sandbox. Sandbox ids
// are random, so names never collide across deployments; the deployment
// label tells whose an object is.
func (c Config) name(id sandbox.ID) string { return "berth-" + string(id) }

// labels are every object's labels (SPEC S11: owner, organisation, project).
func (c Config) labels(sb sandbox.Sandbox) []string {
	var args []string
	for _, kv := range c.labelPairs(sb) {
		args = append(args, "--label", kv[0]+"="+kv[1])
	}
	return args
}

// labelMap is labels as the podman service takes them.
func (c Config) labelMap(sb sandbox.Sandbox) map[string]string {
	m := map[string]string{}
	for _, kv := range c.labelPairs(sb) {
		m[kv[0]] = kv[1]
	}
	return m
}

func (c Config) labelPairs(sb sandbox.Sandbox) [][2]string {
	return [][2]string{
		{labelDeployment, c.Deployment}, {labelSandbox, string(sb.ID)}, {labelOwner, sb.Owner},
		{labelOrg, sb.Org}, {labelProject, sb.Project}, {labelPurpose, string(sb.Purpose)},
	}
}

// VolumeArgs creates the sandbox's named volume.
func VolumeArgs(c Config, sb sandbox.Sandbox) []string {
	c = c.withDefaults()
	return append(append([]string{"volume", "create"}, c.labels(sb)...), c.name(sb.ID))
}

// RunArgs is `podman run` for a sandbox: detached, labelled, non-root, all
// capabilities dropped, no new privileges, the class's limits, the tier's
// runtime, the home volume, and the environment by name only: values come
// from envFile (single-line values) and from podman's own environment
// (values with line breaks, which an env file cannot hold), never from argv.
//
// handoffDir, when not "", is the gateway's directory of the machine's
// handoff socket (package handoff), mounted read only.
func RunArgs(c Config, sb sandbox.Sandbox, envNames []string, envFile, handoffDir string) []string {
	c = c.withDefaults()
	name := c.name(sb.ID)
	args := []string{"run", "--detach", "--name", name, "--hostname", sb.Name}
	args = append(args, c.labels(sb)...)
	args = append(args, c.engineerMachine(sb.CPU, sb.Memory, name)...)
	args = append(args, handoffMount(handoffDir)...)
	args = append(args, c.engineerPlace(sb.Runtime, envFile)...)
	for _, n := range envNames {
		args = append(args, "--env", n)
	}
	return append(args, sb.Image)
}

// engineerMachine is the hardening and limits of an engineer's machine
// (a sandbox's or a warm pool member's), its volume as HOME.
func (c Config) engineerMachine(cpu quantity.Millicores, memory quantity.Bytes, volume string) []string {
	return []string{
		"--user", fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--pids-limit", itoa(c.PidsLimit),
		"--memory", fmt.Sprintf("%db", int64(memory)),
		"--cpus", fmt.Sprintf("%.3f", cpu.Cores()),
		"--stop-timeout", itoa(int(c.StopTimeout.Seconds())),
		"--volume", volume + ":" + sandboxHome,
	}
}

// handoffMount mounts dir, the gateway's directory of a machine's handoff
// socket, read only: nothing in the sandbox may put another file there.
func handoffMount(dir string) []string {
	if dir == "" {
		return nil
	}
	return []string{"--volume", dir + ":" + handoff.Mount + ":ro"}
}

// engineerPlace is the runtime, the network and the env file of an
// engineer's machine.
func (c Config) engineerPlace(runtime, envFile string) []string {
	var args []string
	if runtime != "" {
		args = append(args, "--runtime", RuntimeName(runtime))
	}
	if c.Network != "" {
		args = append(args, "--network", c.Network)
	}
	if envFile != "" {
		args = append(args, "--env-file", envFile)
	}
	return args
}

// AgentArgs is `podman run` for an agent run (SPEC S13): the runner's
// image with its arguments in the "$@" slot, the checkout the only mount
// at /work (also the working directory), a read-only root, /tmp a noexec
// tmpfs, HOME an exec tmpfs owned by the sandbox user (a session's own
// directory, run.Home, kept across its tasks), every capability
// dropped, no new privileges, the class's limits, and the network the run
// asked for. Environment by name only, as for RunArgs.
//
// An image of the Kelos interface (S13.6) runs on that interface's terms,
// under the same hardening: uid 61100, the checkout at /workspace/repo,
// HOME at /home/agent, /kelos_entrypoint.sh as the entrypoint and the
// prompt as its $1. The prompt is then in argv: the interface puts it
// there, and the container's own process shows it to the host anyway.
func AgentArgs(c Config, sb sandbox.Sandbox, run sandbox.RunSpec, envNames []string, envFile string) []string {
	c = c.withDefaults()
	uid, home, work := sandboxUID, sandboxHome, "/work"
	if run.Contract == sandbox.ContractKelos {
		uid, home, work = kelos.UID, kelos.Home, kelos.WorkDir
	}
	args := []string{"run", "--detach", "--name", c.name(sb.ID), "--hostname", sb.Name}
	args = append(args, c.labels(sb)...)
	if run.Home != "" {
		// A session's HOME: the CLI's own state, kept across its tasks.
		args = append(args, agentHardening(uid, c.PidsLimit, "--volume", run.Home+":"+home)...)
	} else {
		args = append(args, AgentHardening(uid, home, c.PidsLimit)...)
	}
	args = append(args,
		"--memory", fmt.Sprintf("%db", int64(sb.Memory)),
		"--cpus", fmt.Sprintf("%.3f", sb.CPU.Cores()),
		"--stop-timeout", itoa(int(c.StopTimeout.Seconds())),
		"--volume", run.Work+":"+work,
		"--workdir", work,
	)
	if run.Contract == sandbox.ContractKelos {
		entry := kelos.Entrypoint
		if run.KelosSession {
			entry = kelos.SessionShell // which runs the entrypoint first
		}
		args = append(args, "--entrypoint", entry)
		if run.Plugins != "" {
			args = append(args, "--volume", run.Plugins+":"+kelos.PluginDir+":ro")
		}
	}
	if sb.Runtime != "" {
		args = append(args, "--runtime", RuntimeName(sb.Runtime))
	}
	if network := c.agentNetwork(run.Network); network != "" {
		args = append(args, "--network", network)
	}
	if envFile != "" {
		args = append(args, "--env-file", envFile)
	}
	for _, n := range envNames {
		args = append(args, "--env", n)
	}
	args = append(args, sb.Image)
	return append(args, run.Args...)
}

// AgentHardening is what confines every agent run (SPEC S13), and what
// `berth image check` runs an image under: uid, a read-only root, /tmp a
// noexec tmpfs, HOME an exec tmpfs the uid owns, every capability dropped,
// no new privileges, a pids limit.
func AgentHardening(uid int, home string, pids int) []string {
	return agentHardening(uid, pids, "--tmpfs", home+":rw,exec,mode=0700,U,size=1g")
}

// agentHardening is AgentHardening with HOME mounted as the two
// arguments say: a tmpfs, or a session's own directory, kept across its
// tasks.
func agentHardening(uid, pids int, homeFlag, homeMount string) []string {
	return []string{
		"--user", fmt.Sprintf("%d:%d", uid, uid),
		"--read-only",
		"--tmpfs", "/tmp:rw,noexec,nosuid,size=512m",
		homeFlag, homeMount,
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--pids-limit", itoa(pids),
	}
}

// agentNetwork is the podman network an agent run joins: the allowlist
// network, or for an "open" run the sandboxes' network.
func (c Config) agentNetwork(mode string) string {
	if mode == "open" {
		return c.Network
	}
	return c.AgentNetwork
}

// splitEnv sorts a sandbox's environment into what an env file can carry
// (one line each) and the names whose values have line breaks, which go
// through podman's own environment.
func splitEnv(env map[string]string) (file string, multiline []string) {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if strings.ContainsAny(v, "\r\n") {
			multiline = append(multiline, k)
			continue
		}
		b.WriteString(k + "=" + v + "\n")
	}
	return b.String(), multiline
}
