// Package openssh is berth's side of the OpenSSH client (SPEC S10): the
// berth-NAME host entries berth sandbox config keeps in an include file of
// its own, the Include line ~/.ssh/config gets, the ProxyCommand that
// reaches a sandbox through the gateway, and handing the tunnel's
// connection to ssh (ProxyUseFdpass). It reads and writes no file: the
// CLI does. It imports nothing of ours.
package openssh

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Port is where sshd listens in every sandbox (SPEC S10).
const Port = 2222

// User is the sandbox image's user.
const User = "berth"

// HostAlias is the ssh host name berth gives a sandbox.
func HostAlias(name string) string { return "berth-" + name }

// Host is one entry of berth's include file.
type Host struct {
	Alias, URL, ID string
	Proxy          string // the ProxyCommand
}

const includeHeader = `# Written by berth sandbox config: one entry per sandbox, reached through
# the gateway named in its ProxyCommand. berth rewrites this file; edit
# ~/.ssh/config instead.
`

// entry renders h. The first line is a comment berth reads back: it says
// which gateway the entry is for.
func (h Host) entry() string {
	fdpass := ""
	if FdPassable(h.URL) {
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
`, h.ID, h.URL, h.Alias, User, Port, h.Proxy, fdpass)
}

// Hosts is berth's include file, old, with hosts written into it: the
// entries of other gateways are kept and, unless replace, this gateway's
// (url's) other entries too. It returns the file and how many entries it
// holds.
func Hosts(old, url string, hosts []Host, replace bool) (string, int) {
	entries := map[string]string{} // alias → entry
	for _, e := range splitEntries(old) {
		if replace && e.url == url {
			continue
		}
		entries[e.alias] = e.text
	}
	for _, h := range hosts {
		entries[h.Alias] = h.entry()
	}
	var b strings.Builder
	b.WriteString(includeHeader)
	for _, alias := range slices.Sorted(maps.Keys(entries)) {
		b.WriteString("\n" + entries[alias])
	}
	return b.String(), len(entries)
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

// Include is the ssh config file config with "Include path" put at its
// top, unless it includes path already; added says whether it was put
// there. At the top, because ssh takes the first value it finds for each
// setting and an Include under a Host line would only apply to that host.
func Include(config, path string) (out string, added bool) {
	// The forms a person may have written it in by hand count too.
	forms := []string{sshQuote(path), "berth/config", "~/.ssh/berth/config"}
	for line := range strings.Lines(config) {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.EqualFold(f[0], "Include") && slices.ContainsFunc(f[1:], func(w string) bool { return slices.Contains(forms, w) }) {
			return config, false
		}
	}
	top := "# Added by berth sandbox config: the berth-NAME hosts of your sandboxes.\nInclude " + sshQuote(path) + "\n\n"
	return top + config, true
}

// sshQuote quotes a path for an ssh config file when it needs it.
func sshQuote(s string) string {
	if strings.ContainsAny(s, " \t\"") {
		return `"` + s + `"`
	}
	return s
}

// ProxyCommand is ssh's ProxyCommand for a sandbox: the berth binary exe
// (an absolute path) as `berth sandbox proxy`, with the gateway it was made
// for. ssh hands it to a shell, so each word is quoted for one, and %
// (ssh's token sign) doubled.
func ProxyCommand(exe, url, ref string) string {
	words := []string{ShellQuote(exe), "sandbox", "proxy", "--url", ShellQuote(url)}
	if FdPassable(url) {
		words = append(words, "--fd-pass")
	}
	words = append(words, ShellQuote(ref))
	return strings.ReplaceAll(strings.Join(words, " "), "%", "%%")
}

// FdPassable reports whether a tunnel to the gateway at url can be handed
// to ssh: over TLS, the bytes ssh needs exist only in this process.
func FdPassable(url string) bool { return strings.HasPrefix(url, "http://") }

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
