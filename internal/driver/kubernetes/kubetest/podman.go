package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// EnvPodman names the podman root (a directory holding containers.conf
// and storage.conf) whose images the kubelet stand-in runs pods from.
const EnvPodman = "BERTH_TEST_PODMAN"

// Podman makes the kubelet stand-in run each pod's containers under
// podman (RunPods).
type Podman struct {
	// Root is a podman root holding containers.conf and storage.conf
	// (BERTH_TEST_PODMAN); podman runs with CONTAINERS_CONF and
	// CONTAINERS_STORAGE_CONF pointing at them.
	Root string
	// Runtimes maps a pod's runtimeClassName to the OCI runtime given to
	// `podman --runtime` (a name in containers.conf or a path, e.g.
	// "gvisor" → a runsc binary). A pod without runtimeClassName runs on
	// "runc"; one naming a class missing here does not start, as on a
	// node whose runtime handler is missing.
	Runtimes map[string]string
}

// ControllerOption changes how StartController runs the controller's
// surroundings.
type ControllerOption func(*controllerConfig)

type controllerConfig struct {
	podman *Podman
}

// RunPods makes the kubelet stand-in run pods' containers under podman
// (pods.go), instead of only reporting them Running and Ready.
func RunPods(p Podman) ControllerOption {
	return func(c *controllerConfig) { c.podman = &p }
}

// Labels on everything the stand-in makes in the podman root, so that it
// touches nothing else there (other tests share the root) and Stop finds
// all of it.
const (
	prefix         = "kubetest-"
	labelServer    = prefix + "server"
	labelNamespace = prefix + "namespace"
	labelPod       = prefix + "pod"
	labelUID       = prefix + "uid"
	labelContainer = prefix + "container"
	labelClaim     = prefix + "claim"
)

// podmanCmd runs the podman binary on one root.
type podmanCmd struct {
	root string
}

func (p podmanCmd) check() error {
	for _, f := range []string{"containers.conf", "storage.conf"} {
		if _, err := os.Stat(filepath.Join(p.root, f)); err != nil {
			return fmt.Errorf("kubelet stand-in: podman root %s: %w", p.root, err)
		}
	}
	if _, err := exec.LookPath("podman"); err != nil {
		return fmt.Errorf("kubelet stand-in: %w", err)
	}
	return nil
}

// podmanError is a podman command that failed, with what it said.
type podmanError struct {
	args   []string
	code   int
	stderr string
}

func (e *podmanError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	// podman says "Error: ..." last, after warnings such as syslog's.
	if i := strings.LastIndex(msg, "Error: "); i >= 0 {
		msg = msg[i+len("Error: "):]
	}
	return fmt.Sprintf("podman %s: exit %d: %s", e.args[0], e.code, msg)
}

// callTimeout bounds a podman call that should return at once, so a
// hung podman holds no worker for ever.
const callTimeout = 2 * time.Minute

// run runs podman with args, at most callTimeout.
func (p podmanCmd) run(ctx context.Context, extraEnv []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return p.runUntil(ctx, extraEnv, args...)
}

// runUntil runs podman with args until it ends or ctx does; extraEnv is
// added to podman's own environment (values a container gets by name).
// Only the subcommand is named in errors: argv holds no secret, but it
// is long.
func (p podmanCmd) runUntil(ctx context.Context, extraEnv []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = append(p.environ(), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("podman %s: %w", args[0], ctx.Err())
		}
		return "", &podmanError{args: args, code: code, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// environ is podman's environment: ours, on the root's configuration.
func (p podmanCmd) environ() []string {
	return append(os.Environ(),
		"CONTAINERS_CONF="+filepath.Join(p.root, "containers.conf"),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(p.root, "storage.conf"))
}

// combined runs podman with stdout and stderr in one stream (logs).
func (p podmanCmd) combined(ctx context.Context, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = p.environ()
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		return fmt.Sprintf("(podman %s: %v)\n", args[0], err)
	}
	return string(out)
}

// imageInfo is what the stand-in reads of an image.
type imageInfo struct {
	ID     string
	Digest string
	User   string
}

// image reads an image of the root; ok is false when the root does not
// have it.
func (p podmanCmd) image(ctx context.Context, ref string) (info imageInfo, ok bool, err error) {
	out, err := p.run(ctx, nil, "image", "inspect", "--format", "json", ref)
	if err != nil {
		var pe *podmanError
		if errors.As(err, &pe) && strings.Contains(pe.stderr, "image not known") {
			return imageInfo{}, false, nil
		}
		return imageInfo{}, false, err
	}
	var imgs []struct {
		ID     string `json:"Id"`
		Digest string
		Config struct{ User string }
	}
	if err := json.Unmarshal([]byte(out), &imgs); err != nil || len(imgs) != 1 {
		return imageInfo{}, false, fmt.Errorf("podman image inspect %s: %q", ref, out)
	}
	return imageInfo{ID: imgs[0].ID, Digest: imgs[0].Digest, User: imgs[0].Config.User}, true, nil
}

// containerState is what the stand-in reads of a container: podman's
// State, and the container's address.
type containerState struct {
	Status     string
	ExitCode   int
	OOMKilled  bool
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
	IP         string `json:"-"`
}

func (p podmanCmd) inspect(ctx context.Context, id string) (containerState, error) {
	out, err := p.run(ctx, nil, "container", "inspect", "--format", "json", id)
	if err != nil {
		return containerState{}, err
	}
	var cs []struct {
		State           containerState
		NetworkSettings struct {
			IPAddress string
			Networks  map[string]struct{ IPAddress string }
		}
	}
	if err := json.Unmarshal([]byte(out), &cs); err != nil || len(cs) != 1 {
		return containerState{}, fmt.Errorf("podman container inspect %s: %q", id, out)
	}
	st := cs[0].State
	st.IP = cs[0].NetworkSettings.IPAddress
	for _, n := range cs[0].NetworkSettings.Networks {
		if st.IP == "" {
			st.IP = n.IPAddress
		}
	}
	return st, nil
}

// ids lists what carries label=value: containers, or volumes with
// volumes set.
func (p podmanCmd) ids(ctx context.Context, volumes bool, label string) ([]string, error) {
	args := []string{"ps", "--all", "--quiet", "--no-trunc", "--filter", "label=" + label}
	if volumes {
		args = []string{"volume", "ls", "--quiet", "--filter", "label=" + label}
	}
	out, err := p.run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}
