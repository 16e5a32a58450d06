// Package podman is the single-host sandbox driver (SPEC S11): every
// sandbox is one labelled podman container and one named volume on this
// host. It calls the podman binary with its own containers.conf and
// storage.conf (notes/podman.md: runc, no default ulimits, an own store), so
// nothing under /etc is needed or touched. The argv is built by pure
// functions and checked by golden tests; values of environment variables
// never appear in it.
package podman

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the driver's settings.
type Config struct {
	// Binary is the podman command (BERTH_SANDBOX_PODMAN_BINARY).
	Binary string
	// StateDir holds the generated containers.conf and storage.conf and
	// podman's own store; images the sandboxes run must be built into it
	// (`berth admin podman-env` prints the environment for that).
	StateDir string
	// Network is the network sandboxes join (BERTH_SANDBOX_PODMAN_NETWORK);
	// "" is podman's default bridge.
	Network string
	// AgentNetwork is the allowlist network agent runs join: it reaches the
	// gateway and nothing else (`berth admin network` makes it). A run
	// fails closed when it does not exist.
	AgentNetwork string
	// Runtimes maps OCI runtime names to binaries for [engine.runtimes],
	// such as "runsc" → "/opt/gvisor/runsc". runc is the default runtime.
	Runtimes map[string]string
	// Deployment tells this gateway's containers from any other podman
	// user's, and from another gateway's sharing the store: it is the value
	// of every object's berth.deployment label, and List sees only its own.
	Deployment string
	// PidsLimit caps processes in a sandbox; 0 means 4096.
	PidsLimit int
	// ReadyTimeout bounds the wait for sshd's greeting; 0 means 2 minutes.
	ReadyTimeout time.Duration
	// StopTimeout is podman stop's grace period; 0 means 10 seconds.
	StopTimeout time.Duration
	// PublicURL is where sandboxes reach the gateway (BERTH_SANDBOX_PUBLIC_URL):
	// a warm pool's members are told it before anybody claims them.
	PublicURL string
	// HandoffDir holds the gateway's sockets through which engineers'
	// machines take their tunnels' connections over (package handoff),
	// one directory per machine; it is the gateway's own, not shared
	// with another gateway on the same podman root. "" hands nothing
	// over: every tunnel copies.
	HandoffDir string
	// OrphanAge is how old a runtime container podman does not know must
	// be before Tidy removes it; 0 means 2 minutes.
	OrphanAge time.Duration
	// Standby is how long a machine suspended with its memory waits made
	// (checkpoint.go: its container's network, conmon and runsc's
	// sandbox, 20–30 MiB of the host's memory) before Tidy lets it go
	// (BERTH_SANDBOX_PODMAN_STANDBY); its resume then makes the container
	// first. 0 keeps none.
	Standby time.Duration
}

// DefaultAgentNetwork is the allowlist network's name.
const DefaultAgentNetwork = "berth-agents"

// SandboxUID is the sandbox user of the image contract (images/build):
// an agent run's checkout must be its (a kelos image's, kelos.UID's).
const SandboxUID = sandboxUID

// The image contract (images/build): the sandbox user and its home.
const (
	sandboxUID  = 1001
	sandboxHome = "/home/berth"
	sshPort     = 2222
	// The ports the gateway's tunnel reaches: unprivileged, as on Kubernetes.
	portLo, portHi = 1024, 65535
)

// Labels on every container and volume.
const (
	labelDeployment = "berth.deployment"
	labelSandbox    = "berth.sandbox"
	labelOwner      = "berth.owner"
	labelOrg        = "berth.org"
	labelProject    = "berth.project"
	labelPurpose    = "berth.purpose"
)

func (c Config) withDefaults() Config {
	if c.Binary == "" {
		c.Binary = "podman"
	}
	if c.Deployment == "" {
		c.Deployment = "berth"
	}
	if c.AgentNetwork == "" {
		c.AgentNetwork = DefaultAgentNetwork
	}
	if c.PidsLimit == 0 {
		c.PidsLimit = 4096
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Minute
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.OrphanAge == 0 {
		c.OrphanAge = 2 * time.Minute
	}
	return c
}

// ContainersConf is the containers.conf the driver runs podman with. Every
// line is there for a measured reason (notes/podman.md §1).
func (c Config) ContainersConf() string { return c.containersConf(nil) }

// containersConf is ContainersConf with kept's runtimes listed beside the
// configured ones (keptRuntimes).
func (c Config) containersConf(kept map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by berth; regenerated at every start. CONTAINERS_CONF replaces,
# not merges with, /etc/containers/containers.conf.
[containers]
# root lacks CAP_SYS_RESOURCE here: podman's built-in ulimits make runc fail.
default_ulimits = []
log_size_max = 1048576

[engine]
# crun fails on hybrid cgroups.
runtime = "runc"
tmp_dir = %q
# The driver's watch reads the events (a container that dies is noticed at
# once); the file is tmp_dir's events/events.log, cut at 1 MiB.
events_logger = "file"
events_logfile_max_size = "1m"
exit_command_delay = 5

[network]
network_backend = "netavark"
network_config_dir = %q
`, filepath.Join(c.StateDir, "libpod-tmp"), filepath.Join(c.StateDir, "networks"))
	paths := maps.Clone(kept)
	if paths == nil {
		paths = map[string]string{}
	}
	for name := range c.Runtimes {
		paths[name] = c.runtimePath(name)
	}
	if len(paths) > 0 {
		b.WriteString("\n[engine.runtimes]\n")
		for _, name := range slices.Sorted(maps.Keys(paths)) {
			fmt.Fprintf(&b, "%s = [%q]\n", name, paths[name])
		}
	}
	return b.String()
}

// runtimeLine is one runtime of containers.conf as ContainersConf writes
// it: name = ["path"].
var runtimeLine = regexp.MustCompile(`^([A-Za-z0-9_.-]+) = \[("(?:[^"\\]|\\.)*")\]$`)

// keptRuntimes are the runtimes of the containers.conf at path that conf
// does not configure and whose program is still there. Gateways (and
// their tests) on one podman root configure different runtimes, and each
// rewrites containers.conf at its start: podman can neither stop nor
// remove a container whose runtime its configuration has lost, so a
// runtime a container may still run on is kept. New sandboxes get only
// the configured ones: the driver names each one's runtime.
func keptRuntimes(path string, conf map[string]string) map[string]string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	kept := map[string]string{}
	in := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = line == "[engine.runtimes]"
			continue
		}
		m := runtimeLine.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		if _, ok := conf[m[1]]; ok {
			continue
		}
		bin, err := strconv.Unquote(m[2])
		if err != nil {
			continue
		}
		if fi, err := os.Stat(bin); err == nil && !fi.IsDir() {
			kept[m[1]] = bin
		}
	}
	return kept
}

// StorageConf is the storage.conf: overlay, in the driver's own state
// directory (never vfs: +633 MiB per container).
func (c Config) StorageConf() string {
	return fmt.Sprintf(`# Written by berth.
[storage]
driver = "overlay"
runroot = %q
graphroot = %q
`, filepath.Join(c.StateDir, "run"), filepath.Join(c.StateDir, "storage"))
}

// Env is the environment podman runs with: only what it needs, so nothing
// of the gateway's own environment reaches a container by accident.
func (c Config) Env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + c.StateDir,
		"CONTAINERS_CONF=" + filepath.Join(c.StateDir, "containers.conf"),
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(c.StateDir, "storage.conf"),
	}
}

// WriteConfig writes containers.conf and storage.conf into StateDir.
func (c Config) WriteConfig() error {
	for _, dir := range []string{c.StateDir, filepath.Join(c.StateDir, "networks"), filepath.Join(c.StateDir, "libpod-tmp")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("podman state: %w", err)
		}
	}
	kept := keptRuntimes(filepath.Join(c.StateDir, "containers.conf"), c.Runtimes)
	for name, body := range map[string]string{"containers.conf": c.containersConf(kept), "storage.conf": c.StorageConf()} {
		if err := replaceFile(filepath.Join(c.StateDir, name), []byte(body)); err != nil {
			return fmt.Errorf("podman state: %w", err)
		}
	}
	return c.writeRuntimes()
}

// replaceFile puts data at path unless it is there already, through a
// rename: a podman that another gateway (or `berth admin podman-env`)
// starts meanwhile reads the old file or the new one, never half of one.
func replaceFile(path string, data []byte) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// RuntimeName returns the name podman knows a configured runtime by: a
// path is registered under its base name.
func RuntimeName(rt string) string {
	if strings.Contains(rt, "/") {
		return filepath.Base(rt)
	}
	return rt
}

func itoa(n int) string { return strconv.Itoa(n) }
