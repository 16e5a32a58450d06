// Package egress is where a sandbox may go out to: a Policy, from its
// class narrowed by its organisation's and project's guardrails, and
// which addresses are the internet's (Public). The gateway's proxy
// (egress/proxy) enforces it: it resolves names itself, refuses what the
// policy does not name, and refuses the host's own, private, loopback and
// link-local addresses unless a rule names the address itself.
package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Mode is what a policy allows as a whole.
type Mode string

const (
	// ModeNone: only the gateway; no host through the proxy. An agent
	// class's default.
	ModeNone Mode = "none"
	// ModeList: the hosts of the policy's rules, nothing else.
	ModeList Mode = "list"
	// ModeOpen: any public host (an engineer class's, said explicitly);
	// the host's own and private addresses stay refused.
	ModeOpen Mode = "open"
	// ModeLearn: any public host while the sandbox's setup runs (its
	// setup command, its dependency installs), the proxy recording what
	// it reached; when setup ends the sandbox's policy becomes the list
	// of those hosts (Learned), frozen, and its agent runs under it.
	ModeLearn Mode = "learn"
)

// DefaultPort is a rule's port when it names none.
const DefaultPort = 443

// maxHost bounds a rule's host (a DNS name is at most 253 bytes).
const maxHost = 253

// maxRules bounds a policy's rules.
const maxRules = 256

// Rule is one destination a policy allows: a host and a port. Host is a
// DNS name ("registry.npmjs.org"), a wildcard for every name below a
// domain ("*.pythonhosted.org": one or more labels before it, not the
// domain itself), or an address ("10.0.0.5") or prefix ("10.0.0.0/24"),
// which alone reaches a private address.
type Rule struct {
	Host string // a name, *.domain, or a prefix ("10.0.0.5/32")
	Port int
}

// prefix is the rule's address prefix; ok is false for a name.
func (r Rule) prefix() (netip.Prefix, bool) {
	if !strings.Contains(r.Host, "/") {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(r.Host)
	return p, err == nil
}

// IsName reports whether the rule names hosts by name (a name or
// *.domain), not by address.
func (r Rule) IsName() bool {
	_, isPrefix := r.prefix()
	return !isPrefix
}

// Matches reports whether a name rule covers host name on port.
func (r Rule) Matches(host string, port int) bool {
	return r.IsName() && r.Port == port && r.matchesName(strings.ToLower(strings.TrimSuffix(host, ".")))
}

// String is the rule as it is written.
func (r Rule) String() string {
	if r.Port == DefaultPort {
		return r.Host
	}
	if p, ok := r.prefix(); ok && p.Addr().Is6() {
		return "[" + r.Host + "]:" + strconv.Itoa(r.Port)
	}
	return r.Host + ":" + strconv.Itoa(r.Port)
}

// ParseRule reads a rule: HOST or HOST:PORT, an IPv6 address or prefix
// in brackets when it has a port. It says what is wrong and what the
// limit is.
func ParseRule(s string) (Rule, error) {
	in := s
	if s == "" {
		return Rule{}, fmt.Errorf("an empty rule: name a host, *.domain or an address")
	}
	if len(s) > maxHost+7 {
		return Rule{}, fmt.Errorf("rule %.40q… is %d bytes long; a host has at most %d", s, len(s), maxHost)
	}
	host, port := s, DefaultPort
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return Rule{}, fmt.Errorf("rule %q: an unclosed [", in)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return Rule{}, fmt.Errorf("rule %q: after ] comes :PORT or nothing", in)
			}
			var err error
			if port, err = parsePort(p); err != nil {
				return Rule{}, fmt.Errorf("rule %q: %w", in, err)
			}
		}
	case strings.Count(s, ":") == 1:
		h, p, _ := strings.Cut(s, ":")
		var err error
		if port, err = parsePort(p); err != nil {
			return Rule{}, fmt.Errorf("rule %q: %w", in, err)
		}
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if pre, ok := parseAddress(host); ok {
		return Rule{Host: pre.String(), Port: port}, nil
	}
	if strings.ContainsAny(host, ":[]/") {
		return Rule{}, fmt.Errorf("rule %q: %q is neither a host name nor an address", in, host)
	}
	name, wild := strings.CutPrefix(host, "*.")
	if err := checkName(name); err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", in, err)
	}
	if wild && !strings.Contains(name, ".") {
		return Rule{}, fmt.Errorf("rule %q: a wildcard covers a domain's names (*.example.com), not a whole top-level domain", in)
	}
	return Rule{Host: host, Port: port}, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// parseAddress reads an address or a prefix.
func parseAddress(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, false
		}
		return p.Masked(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// checkName checks a DNS name: labels of letters, digits and hyphens, each
// 1 to 63 bytes, not starting or ending with a hyphen.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("no host name")
	}
	if len(name) > maxHost {
		return fmt.Errorf("the host name is %d bytes long; at most %d", len(name), maxHost)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q has a label of %d bytes; each is 1 to 63", name, len(label))
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q has a label that starts or ends with a hyphen", name)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q has %q, which is not in a host name", name, c)
			}
		}
	}
	return nil
}

// matchesName reports whether the rule covers host name (lower case, no
// trailing dot).
func (r Rule) matchesName(host string) bool {
	if _, ok := r.prefix(); ok {
		return false
	}
	if suffix, ok := strings.CutPrefix(r.Host, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return host == r.Host
}

// covers reports whether every destination r allows, q allows too.
func (r Rule) coveredBy(q Rule) bool {
	if r.Port != q.Port {
		return false
	}
	rp, rok := r.prefix()
	qp, qok := q.prefix()
	if rok || qok {
		return rok && qok && qp.Bits() <= rp.Bits() && qp.Contains(rp.Addr())
	}
	if r.Host == q.Host {
		return true
	}
	if strings.HasPrefix(r.Host, "*.") {
		// *.a.b.c is inside *.b.c; never inside a single name.
		return strings.HasPrefix(q.Host, "*.") && strings.HasSuffix(r.Host, q.Host[1:])
	}
	return q.matchesName(r.Host)
}

// Policy is where a sandbox may go through the proxy.
type Policy struct {
	Mode  Mode
	Rules []Rule // ModeList's
}

// None allows nothing.
var None = Policy{Mode: ModeNone}

// ParsePolicy reads a policy as a class writes it: "none", "open", or a
// list of rules.
func ParsePolicy(mode string, rules []string) (Policy, error) {
	switch Mode(mode) {
	case ModeNone, ModeOpen, ModeLearn:
		if len(rules) > 0 {
			return Policy{}, fmt.Errorf("egress %q names no hosts; drop them or give the list alone", mode)
		}
		return Policy{Mode: Mode(mode)}, nil
	case "", ModeList:
	default:
		return Policy{}, fmt.Errorf("egress %q is not none, open, learn or a list of hosts", mode)
	}
	if len(rules) > maxRules {
		return Policy{}, fmt.Errorf("egress names %d hosts; at most %d", len(rules), maxRules)
	}
	p := Policy{Mode: ModeList}
	for _, s := range rules {
		r, err := ParseRule(s)
		if err != nil {
			return Policy{}, err
		}
		if !slices.Contains(p.Rules, r) {
			p.Rules = append(p.Rules, r)
		}
	}
	if len(p.Rules) == 0 {
		return None, nil
	}
	return p, nil
}

// ParseWords reads a policy as classes and guardrails write it: one word
// (none, open, learn) or a list of rules.
func ParseWords(words []string) (Policy, error) {
	if len(words) == 1 && (words[0] == string(ModeNone) || words[0] == string(ModeOpen) || words[0] == string(ModeLearn)) {
		return ParsePolicy(words[0], nil)
	}
	return ParsePolicy("", words)
}

// Words is the policy as classes and guardrails write it (ParseWords).
func (p Policy) Words() []string {
	if p.Mode != ModeList {
		return []string{p.String()}
	}
	words := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		words[i] = r.String()
	}
	return words
}

// String is the policy as `show` says it.
func (p Policy) String() string {
	switch p.Mode {
	case ModeList:
		s := make([]string, len(p.Rules))
		for i, r := range p.Rules {
			s[i] = r.String()
		}
		return strings.Join(s, ", ")
	case "":
		return string(ModeNone)
	}
	return string(p.Mode)
}

// AllowsName reports whether the policy lets a sandbox reach host name on
// port. An address is never reached by name alone when it is private
// (see Proxy).
func (p Policy) AllowsName(host string, port int) bool {
	switch p.Mode {
	case ModeOpen, ModeLearn:
		return true
	case ModeList:
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		return slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.Port == port && r.matchesName(host) })
	}
	return false
}

// NamesAddr reports whether one of the policy's rules names addr on port
// itself: the one way to a private address.
func (p Policy) NamesAddr(addr netip.Addr, port int) bool {
	if p.Mode != ModeList {
		return false
	}
	addr = addr.Unmap()
	return slices.ContainsFunc(p.Rules, func(r Rule) bool {
		pre, ok := r.prefix()
		return r.Port == port && ok && pre.Contains(addr)
	})
}

// Narrow is p restricted by q (a guardrail): only what both allow. open
// narrows nothing; none leaves nothing; of two lists, the rules of each
// that the other covers. learn is open until setup ends, then a list
// within what it was open to: open narrows it to itself, a list to the
// list (nothing is left to learn beyond it).
func (p Policy) Narrow(q Policy) Policy {
	switch {
	case p.Mode == ModeNone || q.Mode == ModeNone || p.Mode == "" || q.Mode == "":
		return None
	case q.Mode == ModeOpen:
		return p
	case p.Mode == ModeOpen && q.Mode == ModeLearn:
		return q
	case p.Mode == ModeOpen || p.Mode == ModeLearn:
		if q.Mode == ModeLearn {
			return p
		}
		return q
	case q.Mode == ModeLearn:
		return p
	}
	var out []Rule
	for _, r := range p.Rules {
		if slices.ContainsFunc(q.Rules, r.coveredBy) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, r := range q.Rules {
		if slices.ContainsFunc(p.Rules, r.coveredBy) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return None
	}
	return Policy{Mode: ModeList, Rules: out}
}

// Public reports whether a is an address of the internet: not loopback,
// private, link-local (cloud metadata services live there), shared
// (CGNAT), multicast or unspecified.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// notPublic are the ranges netip does not name that are not the internet.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64: would reach any IPv4 address
	netip.MustParsePrefix("2001:db8::/32"),
}

// Parse reads a policy as String writes it ("none", "open", or rules
// joined by ", "), as a sandbox's row keeps it.
func Parse(written string) (Policy, error) {
	if written == "" {
		return None, nil
	}
	return ParseWords(strings.Split(written, ", "))
}
