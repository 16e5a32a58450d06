package kubetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// errConfig is a pod setting the stand-in cannot honour; the container
// waits with CreateContainerConfigError, as a kubelet's does on a
// setting it cannot resolve.
var errConfig = errors.New("kubetest's kubelet stand-in")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errConfig, fmt.Sprintf(format, args...))
}

// createSpec is what the pod runner decides for one container beyond its
// spec: where it runs and what it mounts.
type createSpec struct {
	name     string
	labels   map[string]string
	runtime  string
	network  string // "" for podman's default bridge, or container:<id>
	hostname string
	mounts   []hostMount
	envFile  string // where the values go, if any
	// imageUser is the image's USER, for runAsNonRoot.
	imageUser string
}

// hostMount is a host directory bind-mounted into the container.
type hostMount struct {
	src, dst string
	ro       bool
}

// createArgs is `podman create`'s argv for container c of pod, what goes
// into the env file (NAME=value lines, 0600, removed once create returns)
// and the environment podman itself needs for the values passed by name
// (a value with a line break cannot be a line of the file: --env NAME
// takes it from podman's environment). No value of the container's
// environment is in argv.
//
// Settings, as a kubelet applies them: image, command (the entrypoint)
// and args with $(VAR) expanded, workingDir, env (plain values; no
// valueFrom or envFrom), the security context (the container's over the
// pod's): runAsUser/runAsGroup, runAsNonRoot (checked against the
// image's user), fsGroup and supplementalGroups as extra groups,
// readOnlyRootFilesystem (without podman's own tmpfs on /tmp and /run),
// capabilities, allowPrivilegeEscalation, privileged, seccompProfile
// (RuntimeDefault is podman's profile; none or Unconfined runs
// unconfined, as a kubelet without SeccompDefault does); resources:
// limits as --cpus and --memory, the cpu request as --cpu-shares.
func createArgs(pod *corev1.Pod, c *corev1.Container, cs createSpec) (args []string, envFile []byte, byName []string, err error) {
	if len(c.EnvFrom) > 0 {
		return nil, nil, nil, configErr("container %s: envFrom is not supported (plain env values only)", c.Name)
	}
	env, err := containerEnv(c)
	if err != nil {
		return nil, nil, nil, err
	}
	args = []string{"create", "--pull=never", "--name", cs.name}
	for _, k := range slices.Sorted(maps.Keys(cs.labels)) {
		args = append(args, "--label", k+"="+cs.labels[k])
	}
	args = append(args, "--runtime", cs.runtime)
	if cs.network != "" {
		args = append(args, "--network", cs.network)
	}
	if cs.hostname != "" {
		args = append(args, "--hostname", cs.hostname)
	}
	sec, err := securityArgs(pod, c, cs.imageUser)
	if err != nil {
		return nil, nil, nil, err
	}
	args = append(args, sec...)
	args = append(args, resourceArgs(c)...)
	if c.WorkingDir != "" {
		args = append(args, "--workdir", c.WorkingDir)
	}
	for _, m := range cs.mounts {
		if strings.ContainsAny(m.dst, ":,") {
			return nil, nil, nil, configErr("container %s: mount path %q holds ':' or ','", c.Name, m.dst)
		}
		v := m.src + ":" + m.dst
		if m.ro {
			v += ":ro"
		}
		args = append(args, "--volume", v)
	}
	var file strings.Builder
	for _, e := range env {
		if strings.ContainsAny(e.Value, "\r\n") {
			byName = append(byName, e.Name+"="+e.Value)
			args = append(args, "--env", e.Name)
			continue
		}
		file.WriteString(e.Name + "=" + e.Value + "\n")
	}
	if file.Len() > 0 {
		args = append(args, "--env-file", cs.envFile)
	}
	vars := map[string]string{}
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	if len(c.Command) > 0 {
		ep, _ := json.Marshal(expandAll(c.Command, vars))
		args = append(args, "--entrypoint", string(ep))
	}
	args = append(args, c.Image)
	args = append(args, expandAll(c.Args, vars)...)
	return args, []byte(file.String()), byName, nil
}

// containerEnv is c's environment as a kubelet makes it: in order, a
// later entry of a name replacing an earlier one, each value's $(NAME)
// references expanded against the entries before it.
func containerEnv(c *corev1.Container) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, configErr("container %s: env %s: valueFrom is not supported (plain values only)", c.Name, e.Name)
		}
		if e.Name == "" || strings.ContainsAny(e.Name, "= \t\r\n*\x00") || strings.HasPrefix(e.Name, "#") {
			return nil, configErr("container %s: env name %q cannot be handed to podman", c.Name, e.Name)
		}
		if strings.ContainsRune(e.Value, 0) {
			return nil, configErr("container %s: env %s holds a NUL byte", c.Name, e.Name)
		}
		v := expand(e.Value, vars)
		vars[e.Name] = v
		if i := slices.IndexFunc(out, func(o corev1.EnvVar) bool { return o.Name == e.Name }); i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
		out = append(out, corev1.EnvVar{Name: e.Name, Value: v})
	}
	return out, nil
}

func expandAll(in []string, vars map[string]string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vars)
	}
	return out
}

// expand resolves Kubernetes' $(NAME) references in s: a defined NAME
// becomes its value, an undefined one stays as written, $$ is a single $,
// and any other $ is kept.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// securityArgs are the security context's flags, the container's settings
// over the pod's.
func securityArgs(pod *corev1.Pod, c *corev1.Container, imageUser string) ([]string, error) {
	var (
		psc  = pod.Spec.SecurityContext
		csc  = c.SecurityContext
		args []string
	)
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	uid, gid, nonRoot, seccomp := psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot, psc.SeccompProfile
	if csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		gid = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		nonRoot = csc.RunAsNonRoot
	}
	if csc.SeccompProfile != nil {
		seccomp = csc.SeccompProfile
	}
	switch {
	case uid != nil && gid != nil:
		args = append(args, "--user", fmt.Sprintf("%d:%d", *uid, *gid))
	case uid != nil:
		args = append(args, "--user", strconv.FormatInt(*uid, 10))
	case gid != nil:
		return nil, configErr("container %s: runAsGroup without runAsUser is not supported", c.Name)
	}
	if nonRoot != nil && *nonRoot {
		if err := checkNonRoot(c.Name, uid, imageUser); err != nil {
			return nil, err
		}
	}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	for _, g := range groups {
		args = append(args, "--group-add", strconv.FormatInt(g, 10))
	}
	if csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem {
		// A kubelet mounts nothing writable by itself on a read-only root.
		args = append(args, "--read-only", "--read-only-tmpfs=false")
	}
	if caps := csc.Capabilities; caps != nil {
		for _, d := range caps.Drop {
			args = append(args, "--cap-drop", string(d))
		}
		for _, a := range caps.Add {
			args = append(args, "--cap-add", string(a))
		}
	}
	if csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if csc.Privileged != nil && *csc.Privileged {
		args = append(args, "--privileged")
	}
	switch {
	case seccomp == nil || seccomp.Type == corev1.SeccompProfileTypeUnconfined:
		args = append(args, "--security-opt", "seccomp=unconfined")
	case seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault:
	default:
		return nil, configErr("container %s: seccompProfile %s is not supported", c.Name, seccomp.Type)
	}
	return args, nil
}

// checkNonRoot refuses a container that would run as root, as the
// kubelet does for runAsNonRoot: the uid set, else the image's user.
func checkNonRoot(name string, uid *int64, imageUser string) error {
	if uid != nil {
		if *uid == 0 {
			return fmt.Errorf("%w: container %s: container's runAsUser breaks non-root policy", errConfig, name)
		}
		return nil
	}
	user, _, _ := strings.Cut(imageUser, ":")
	if user == "" {
		return fmt.Errorf("%w: container %s: container has runAsNonRoot and image will run as root", errConfig, name)
	}
	n, err := strconv.ParseInt(user, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: container %s: container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root", errConfig, name, user)
	}
	if n == 0 {
		return fmt.Errorf("%w: container %s: container has runAsNonRoot and image will run as root", errConfig, name)
	}
	return nil
}

// resourceArgs are c's limits, and its cpu request as a share, as a
// kubelet sets the container's cgroup.
func resourceArgs(c *corev1.Container) []string {
	var args []string
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && !q.IsZero() {
		args = append(args, "--cpus", strconv.FormatFloat(float64(q.MilliValue())/1000, 'f', -1, 64))
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && !q.IsZero() {
		args = append(args, "--memory", strconv.FormatInt(q.Value(), 10)+"b")
	}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok && !q.IsZero() {
		args = append(args, "--cpu-shares", strconv.FormatInt(max(2, q.MilliValue()*1024/1000), 10))
	}
	return args
}

// checkProbes refuses what the stand-in would otherwise ignore: probes
// other than a tcpSocket readiness probe, and lifecycle hooks.
func checkProbes(c *corev1.Container) error {
	switch {
	case c.LivenessProbe != nil, c.StartupProbe != nil:
		return configErr("container %s: liveness and startup probes are not supported (no restarts)", c.Name)
	case c.ReadinessProbe != nil && c.ReadinessProbe.TCPSocket == nil:
		return configErr("container %s: only tcpSocket readiness probes are supported", c.Name)
	case c.Lifecycle != nil:
		return configErr("container %s: lifecycle hooks are not supported", c.Name)
	}
	return nil
}
