package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/openssh"
)

func newSandboxConfigCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "config [NAME...]",
		Short: "Write ssh config entries (host berth-NAME) for your sandboxes",
		Long: `Write an ssh config entry for each sandbox named, or for all your running
and suspended engineer sandboxes, so that ssh, scp, sftp and editors
(VS Code Remote-SSH, JetBrains Gateway) reach them as berth-NAME through
the gateway. Port and unix-socket forwards work over them (ssh -L, -D, and
-R, which binds the sandbox's loopback only), and so does ControlMaster;
the sandbox refuses agent (-A) and X11 (-X) forwarding.

The entries go in ~/.ssh/berth/config, which berth owns and rewrites;
~/.ssh/config gets one line at its top, "Include" of that file, added
once; your own entries are left as they are. Each entry runs
this berth binary as its ProxyCommand, with the gateway it was made for
(--url, BERTH_URL or the login file); the key comes from BERTH_API_KEY or
the login file when ssh connects. Host-key checking is off for these hosts
only (the gateway authenticates the path).

A sandbox created with --ssh-key FILE gets "IdentityFile" (the private key
beside FILE, else FILE itself, for a key in your agent) and "IdentitiesOnly
yes": this CLI remembered the file at create, beside the login file
(config.json's is config.ssh-keys.json). Other sandboxes get ssh's own keys
as it always chooses them.

There is one entry per gateway and sandbox, and each says whose run wrote
it: a run without names replaces the entries it wrote before for you at
this gateway, a run with names adds or updates those, and entries of other
gateways or written under another user's key are left alone. A name
(berth-NAME) is one sandbox's: an entry of another sandbox that had it gives
it up, and config says so.`,
		Example: `  berth sandbox config && ssh berth-dev
  berth sandbox config dev && scp notes.txt berth-dev:`,
		RunE: func(cmd *cobra.Command, names []string) error {
			c, url, err := g.clientAndURL()
			if err != nil {
				return err
			}
			who, err := c.Whoami(cmd.Context())
			if err != nil {
				return err
			}
			sbs, err := configTargets(cmd, c, who.User.ID, names)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the berth binary for ssh's ProxyCommand: %w", err)
			}
			home := g.env.Getenv("HOME")
			if home == "" {
				return errors.New("config: HOME is unset: cannot find ~/.ssh")
			}
			ids, err := g.readIdentities()
			if err != nil {
				return err
			}
			var hosts []openssh.Host
			for _, sb := range sbs {
				ref := sb.Name // the caller's own: a name follows a sandbox re-made under it
				if sb.Owner != who.User.ID {
					ref = sb.ID // another's: the caller's name would resolve to their own first
				}
				hosts = append(hosts, openssh.Host{Alias: openssh.HostAlias(sb.Name), URL: url, ID: sb.ID, Writer: who.User.ID,
					Proxy: openssh.ProxyCommand(exe, url, ref), Identities: ids.of(url, sb.ID)})
			}
			include := filepath.Join(home, ".ssh", "berth", "config")
			written, err := writeSSHHosts(g.env.Stderr, include, url, who.User.ID, hosts, len(names) == 0)
			if err != nil {
				return err
			}
			added, err := ensureInclude(filepath.Join(home, ".ssh", "config"), include)
			if err != nil {
				return err
			}
			if added {
				fmt.Fprintf(g.env.Stdout, "added Include %s to the top of ~/.ssh/config\n", include)
			}
			fmt.Fprintf(g.env.Stdout, "%s: %d hosts\n", include, written)
			for _, h := range hosts {
				fmt.Fprintf(g.env.Stdout, "  ssh %s\n", h.Alias)
			}
			return nil
		},
	}
}

// configTargets are the sandboxes named, or the caller's own live engineer
// sandboxes that a shell can reach now or after a resume.
func configTargets(cmd *cobra.Command, c *client.Client, me string, names []string) ([]api.Sandbox, error) {
	var out []api.Sandbox
	if len(names) > 0 {
		for _, n := range names {
			sb, err := c.Sandbox(cmd.Context(), n)
			if err != nil {
				return nil, err
			}
			if sb.Purpose != "engineer" {
				return nil, fmt.Errorf("sandbox %s is an agent sandbox: nothing attaches to it", sb.Name)
			}
			out = append(out, sb)
		}
		return out, nil
	}
	all, err := c.Sandboxes(cmd.Context(), client.ListOptions{Purpose: "engineer"})
	if err != nil {
		return nil, err
	}
	for _, sb := range all {
		if sb.Owner == me && (sb.State == api.StateRunning || sb.State == api.StateSuspended) {
			out = append(out, sb)
		}
	}
	return out, nil
}

// writeSSHHosts writes hosts, from writer's run at the gateway url, into
// berth's include file (openssh.Hosts), and says on stderr which entries
// gave up their name. It returns how many entries the file holds.
func writeSSHHosts(stderr io.Writer, path, url, writer string, hosts []openssh.Host, replace bool) (int, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	file, n, displaced := openssh.Hosts(string(old), url, writer, hosts, replace)
	for _, d := range displaced {
		fmt.Fprintf(stderr, "replaced %s\n", d)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	return n, writeAtomic(path, []byte(file), 0o600)
}

// ensureInclude puts "Include path" at the top of the ssh config file
// unless it includes path already (openssh.Include), and says whether it
// added it.
func ensureInclude(config, path string) (bool, error) {
	if real, err := filepath.EvalSymlinks(config); err == nil {
		config = real // a dotfiles link stays a link: write where it points
	}
	old, err := os.ReadFile(config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", config, err)
	}
	file, added := openssh.Include(string(old), path)
	if !added {
		return false, nil
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(config); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(config), 0o700); err != nil {
		return false, err
	}
	return true, writeAtomic(config, []byte(file), mode)
}

// writeAtomic replaces path with b: a reader sees the old file or the new
// one, never half of it.
func writeAtomic(path string, b []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
