package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

func newSandboxConfigCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "config [NAME...]",
		Short: "Write ssh config entries (host berth-NAME) for your sandboxes",
		Long: `Write an ssh config entry for each sandbox named, or for all your running
and suspended engineer sandboxes, so that ssh, scp, sftp and editors
(VS Code Remote-SSH, JetBrains Gateway) reach them as berth-NAME through
the gateway.

The entries go in ~/.ssh/berth/config, which berth owns and rewrites: a run
without names replaces this gateway's entries, a run with names adds or
updates those. ~/.ssh/config gets one line at its top, "Include" of that
file, added once; your own entries are left as they are. Each entry runs
this berth binary as its ProxyCommand, with the gateway it was made for
(--url, BERTH_URL or the login file); the key comes from BERTH_API_KEY or
the login file when ssh connects. Host-key checking is off for these hosts
only (the gateway authenticates the path); ssh uses your own keys as it
always does.`,
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
			var hosts []sshHost
			for _, sb := range sbs {
				ref := sb.Name // the caller's own: a name follows a sandbox re-made under it
				if sb.Owner != who.User.ID {
					ref = sb.ID // another's: the caller's name would resolve to their own first
				}
				hosts = append(hosts, sshHost{alias: hostAlias(sb.Name), url: url, id: sb.ID,
					proxy: proxyCommand(exe, url, ref)})
			}
			include := filepath.Join(home, ".ssh", "berth", "config")
			written, err := writeSSHHosts(include, url, hosts, len(names) == 0)
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
				fmt.Fprintf(g.env.Stdout, "  ssh %s\n", h.alias)
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

// sshHost is one entry of berth's ssh include file.
type sshHost struct {
	alias, url, id string
	proxy          string // the ProxyCommand
}

const includeHeader = `# Written by berth sandbox config: one entry per sandbox, reached through
# the gateway named in its ProxyCommand. berth rewrites this file; edit
# ~/.ssh/config instead.
`

// entry renders h. The first line is a comment berth reads back: it says
// which gateway the entry is for.
func (h sshHost) entry() string {
	fdpass := ""
	if fdPassable(h.url) {
		fdpass = "  ProxyUseFdpass yes\n"
	}
	return fmt.Sprintf(`# sandbox %s at %s
Host %s
  User %s
  Port %d
  ProxyCommand %s
%s  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
`, h.id, h.url, h.alias, sshUser, sshPort, h.proxy, fdpass)
}

// writeSSHHosts writes hosts into berth's include file, keeping the entries
// of other gateways and, unless replace, this gateway's other entries. It
// returns how many entries the file holds.
func writeSSHHosts(path, url string, hosts []sshHost, replace bool) (int, error) {
	entries := map[string]string{} // alias → entry
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	for _, e := range splitEntries(string(old)) {
		if replace && e.url == url {
			continue
		}
		entries[e.alias] = e.text
	}
	for _, h := range hosts {
		entries[h.alias] = h.entry()
	}
	var b strings.Builder
	b.WriteString(includeHeader)
	for _, alias := range slices.Sorted(maps.Keys(entries)) {
		b.WriteString("\n" + entries[alias])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	return len(entries), writeAtomic(path, []byte(b.String()), 0o600)
}

type parsedEntry struct{ alias, url, text string }

// splitEntries reads back the entries of berth's include file: each starts
// with its "# sandbox ID at URL" line and runs to the next.
func splitEntries(s string) []parsedEntry {
	var out []parsedEntry
	var cur *parsedEntry
	for line := range strings.Lines(s) {
		if rest, ok := strings.CutPrefix(line, "# sandbox "); ok {
			_, url, _ := strings.Cut(strings.TrimSpace(rest), " at ")
			out = append(out, parsedEntry{url: url})
			cur = &out[len(out)-1]
		}
		if cur == nil {
			continue // the header
		}
		if alias, ok := strings.CutPrefix(line, "Host "); ok {
			cur.alias = strings.TrimSpace(alias)
		}
		if strings.TrimSpace(line) != "" {
			cur.text += line
		}
	}
	return slices.DeleteFunc(out, func(e parsedEntry) bool { return e.alias == "" })
}

// ensureInclude puts "Include path" at the top of the ssh config file
// unless it includes path already, and says whether it added it. At the
// top, because ssh takes the first value it finds for each setting and an
// Include under a Host line would only apply to that host.
func ensureInclude(config, path string) (bool, error) {
	if real, err := filepath.EvalSymlinks(config); err == nil {
		config = real // a dotfiles link stays a link: write where it points
	}
	old, err := os.ReadFile(config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", config, err)
	}
	// The forms a person may have written it in by hand count too.
	forms := []string{sshQuote(path), "berth/config", "~/.ssh/berth/config"}
	for line := range strings.Lines(string(old)) {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.EqualFold(f[0], "Include") && slices.ContainsFunc(f[1:], func(w string) bool { return slices.Contains(forms, w) }) {
			return false, nil
		}
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(config); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(config), 0o700); err != nil {
		return false, err
	}
	top := "# Added by berth sandbox config: the berth-NAME hosts of your sandboxes.\nInclude " + sshQuote(path) + "\n\n"
	return true, writeAtomic(config, append([]byte(top), old...), mode)
}

// sshQuote quotes a path for an ssh config file when it needs it.
func sshQuote(s string) string {
	if strings.ContainsAny(s, " \t\"") {
		return `"` + s + `"`
	}
	return s
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
