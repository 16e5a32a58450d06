// Package openssh is berth's side of the OpenSSH client (SPEC S10): the
// berth-NAME host entries berth sandbox config keeps in an include file of
// its own, the Include line ~/.ssh/config gets, the ProxyCommand that
// reaches a sandbox through the gateway, and handing the tunnel's
// connection to ssh (ProxyUseFdpass). It reads and writes no file: the
// CLI does. It imports nothing of ours.
package openssh

import (
	"cmp"
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
	// Writer is the user whose run of berth sandbox config wrote the
	// entry: a later run without names replaces that user's entries at
	// URL only.
	Writer string
	// Identities are the key files ssh offers for this host alone
	// (IdentityFile, with IdentitiesOnly): the keys the sandbox was
	// created with, when they were files. None: ssh's own choice.
	Identities []string
}

const includeHeader = `# Written by berth sandbox config: one entry per sandbox, reached through
# the gateway named in its ProxyCommand. berth rewrites this file; edit
# ~/.ssh/config instead.
`

// entry renders h. The first line is a comment berth reads back: it says
// which sandbox at which gateway the entry is for, and whose run wrote it.
func (h Host) entry() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# sandbox %s at %s", h.ID, h.URL)
	if h.Writer != "" {
		fmt.Fprintf(&b, " for %s", h.Writer)
	}
	fmt.Fprintf(&b, "\nHost %s\n  User %s\n  Port %d\n  ProxyCommand %s\n", h.Alias, User, Port, h.Proxy)
	if FdPassable(h.URL) {
		b.WriteString("  ProxyUseFdpass yes\n")
	}
	for _, f := range h.Identities {
		// ssh expands % tokens and a leading ~ in IdentityFile.
		fmt.Fprintf(&b, "  IdentityFile %s\n", strings.ReplaceAll(sshQuote(f), "%", "%%"))
	}
	if len(h.Identities) > 0 {
		b.WriteString("  IdentitiesOnly yes\n")
	}
	b.WriteString("  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
	return b.String()
}

// Hosts is berth's include file, old, with hosts written into it by
// writer's run at the gateway url. There is one entry per gateway and
// sandbox. Every entry is kept but those of the sandboxes written now and,
// when replace (a run that lists all of writer's sandboxes), those writer
// wrote for url before: entries of other gateways and of other users
// stay. An alias is one sandbox's: an entry of another sandbox that held
// it gives it up, and displaced says which. Hosts also returns how many
// entries the file holds.
func Hosts(old, url, writer string, hosts []Host, replace bool) (file string, n int, displaced []string) {
	type key struct{ url, id string }
	entries := map[key]parsedEntry{}
	for _, e := range splitEntries(old) {
		if replace && e.url == url && e.writer == writer {
			continue
		}
		entries[key{e.url, e.id}] = e
	}
	written := map[key]bool{}
	for _, h := range hosts {
		written[key{h.URL, h.ID}] = true
	}
	for _, h := range hosts {
		for k, e := range entries {
			if e.alias == h.Alias && !written[k] {
				displaced = append(displaced, fmt.Sprintf("%s (sandbox %s at %s)", e.alias, e.id, e.url))
				delete(entries, k)
			}
		}
		entries[key{h.URL, h.ID}] = parsedEntry{alias: h.Alias, url: h.URL, id: h.ID, writer: h.Writer, text: h.entry()}
	}
	sorted := slices.SortedFunc(maps.Values(entries), func(a, b parsedEntry) int {
		return cmp.Or(cmp.Compare(a.alias, b.alias), cmp.Compare(a.url, b.url), cmp.Compare(a.id, b.id))
	})
	var b strings.Builder
	b.WriteString(includeHeader)
	for _, e := range sorted {
		b.WriteString("\n" + e.text)
	}
	return b.String(), len(sorted), displaced
}

type parsedEntry struct{ alias, url, id, writer, text string }

// splitEntries reads back the entries of berth's include file: each starts
// with its "# sandbox ID at URL [for USER]" line and runs to the next.
// An entry an older berth wrote names no user.
func splitEntries(s string) []parsedEntry {
	var out []parsedEntry
	var cur *parsedEntry
	for line := range strings.Lines(s) {
		if rest, ok := strings.CutPrefix(line, "# sandbox "); ok {
			id, where, _ := strings.Cut(strings.TrimSpace(rest), " at ")
			url, writer, _ := strings.Cut(where, " for ")
			out = append(out, parsedEntry{id: id, url: url, writer: writer})
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
