package egress

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rule
	}{
		{"registry.npmjs.org", Rule{Host: "registry.npmjs.org", Port: 443}},
		{"Registry.NPMjs.org.", Rule{Host: "registry.npmjs.org", Port: 443}},
		{"*.pythonhosted.org", Rule{Host: "*.pythonhosted.org", Port: 443}},
		{"proxy.golang.org:8443", Rule{Host: "proxy.golang.org", Port: 8443}},
		{"10.0.0.5:5432", Rule{Host: "10.0.0.5/32", Port: 5432}},
		{"10.1.2.3/24", Rule{Host: "10.1.2.0/24", Port: 443}},
		{"[fd00::1]:80", Rule{Host: "fd00::1/128", Port: 80}},
	} {
		got, err := ParseRule(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"", "*", "*.com", "a..b", "-a.com", "a-.com", "a b.com", "host:0", "host:65536", "host:08", "host:x", "a.com:443:1",
		"[::1", "[::1]x", "*.*.com", "a/b", strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 200) + "com", "a.com:+443",
	} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %+v; want an error", in, r)
		} else if !strings.Contains(err.Error(), "rule") && !strings.Contains(err.Error(), "host") {
			t.Errorf("ParseRule(%q): %v does not say which rule", in, err)
		}
	}
}

// FuzzParseRule: no panic; what parses is written back as it parses.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"a.com", "*.b.org:8443", "10.0.0.0/8", "[fd00::1]:22", "host:0", "[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil || again != r {
			t.Errorf("ParseRule(%q) = %+v, written %q, read again %+v, %v", s, r, r.String(), again, err)
		}
		if r.Port < 1 || r.Port > 65535 || len(r.Host) > maxHost+4 {
			t.Errorf("ParseRule(%q) = %+v: out of bounds", s, r)
		}
	})
}

func policy(t *testing.T, rules ...string) Policy {
	t.Helper()
	p, err := ParsePolicy("", rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyAllows(t *testing.T) {
	p := policy(t, "registry.npmjs.org", "*.pythonhosted.org", "proxy.golang.org:8443", "10.0.0.0/24:5432")
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"registry.npmjs.org", 443, true},
		{"REGISTRY.npmjs.org.", 443, true},
		{"registry.npmjs.org", 80, false},
		{"evil-registry.npmjs.org", 443, false},
		{"files.pythonhosted.org", 443, true},
		{"a.b.pythonhosted.org", 443, true},
		{"pythonhosted.org", 443, false},
		{"xpythonhosted.org", 443, false},
		{"proxy.golang.org", 8443, true},
		{"proxy.golang.org", 443, false},
		{"10.0.0.7", 5432, false}, // an address is never allowed by name
	} {
		if got := p.AllowsName(c.host, c.port); got != c.want {
			t.Errorf("AllowsName(%s, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	if !p.NamesAddr(netip.MustParseAddr("10.0.0.7"), 5432) || p.NamesAddr(netip.MustParseAddr("10.0.1.7"), 5432) || p.NamesAddr(netip.MustParseAddr("10.0.0.7"), 443) {
		t.Error("NamesAddr does not follow the prefix rule and its port")
	}
	if None.AllowsName("registry.npmjs.org", 443) || !(Policy{Mode: ModeOpen}).AllowsName("anything.example", 8080) {
		t.Error("none must allow nothing, open every name")
	}
}

func TestParsePolicy(t *testing.T) {
	for _, c := range []struct {
		mode  string
		rules []string
		ok    bool
	}{
		{"none", nil, true}, {"open", nil, true}, {"", []string{"a.com"}, true}, {"list", nil, true},
		{"none", []string{"a.com"}, false}, {"everything", nil, false}, {"", []string{"bad host"}, false},
	} {
		_, err := ParsePolicy(c.mode, c.rules)
		if (err == nil) != c.ok {
			t.Errorf("ParsePolicy(%q, %q): %v", c.mode, c.rules, err)
		}
	}
	if p, _ := ParsePolicy("", nil); p.Mode != ModeNone {
		t.Errorf("an empty list is %v, want none", p)
	}
	many := make([]string, maxRules+1)
	for i := range many {
		many[i] = "h" + strings.Repeat("x", i%50) + ".example.com"
	}
	if _, err := ParsePolicy("", many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d rules: %v, want the limit named", len(many), err)
	}
}

// TestNarrow: a guardrail only takes away (restrict-only, as allowed_repos).
func TestNarrow(t *testing.T) {
	open, learn := Policy{Mode: ModeOpen}, Policy{Mode: ModeLearn}
	for _, c := range []struct {
		name      string
		class, gr Policy
		want      []string // the rules; nil: none
		mode      Mode
	}{
		{"open guardrail keeps the class's", policy(t, "a.com"), open, []string{"a.com"}, ModeList},
		{"open class takes the guardrail's", open, policy(t, "a.com"), []string{"a.com"}, ModeList},
		{"both open", open, open, nil, ModeOpen},
		{"none wins", open, None, nil, ModeNone},
		{"a name inside a wildcard", policy(t, "*.example.com"), policy(t, "api.example.com", "b.org"), []string{"api.example.com"}, ModeList},
		{"a wildcard inside a wildcard", policy(t, "*.a.example.com"), policy(t, "*.example.com"), []string{"*.a.example.com"}, ModeList},
		{"ports differ", policy(t, "a.com:80"), policy(t, "a.com"), nil, ModeNone},
		{"prefixes", policy(t, "10.0.0.0/8:22"), policy(t, "10.1.0.0/16:22", "10.0.0.1:23"), []string{"10.1.0.0/16:22"}, ModeList},
		{"nothing shared", policy(t, "a.com"), policy(t, "b.com"), nil, ModeNone},
		{"open guardrail keeps learn", learn, open, nil, ModeLearn},
		{"a guardrail of learn narrows open", open, learn, nil, ModeLearn},
		{"a list leaves nothing to learn", learn, policy(t, "a.com"), []string{"a.com"}, ModeList},
		{"learn keeps a class's list", policy(t, "a.com"), learn, []string{"a.com"}, ModeList},
		{"none stops learning", learn, None, nil, ModeNone},
		{"both learn", learn, learn, nil, ModeLearn},
	} {
		got := c.class.Narrow(c.gr)
		var rules []string
		for _, r := range got.Rules {
			rules = append(rules, r.String())
		}
		if got.Mode != c.mode || !slices.Equal(rules, c.want) {
			t.Errorf("%s: %v narrowed by %v = %v (%s), want %q (%s)", c.name, c.class, c.gr, rules, got.Mode, c.want, c.mode)
		}
	}
}

func TestPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"93.184.215.14": true, "2606:4700::6810:85e5": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "::1": false, "fe80::1": false, "fd00::1": false, "::ffff:127.0.0.1": false,
		"::ffff:169.254.169.254": false, "64:ff9b::a9fe:a9fe": false, "224.0.0.1": false, "255.255.255.255": false,
	} {
		if got := Public(netip.MustParseAddr(s)); got != want {
			t.Errorf("Public(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestParseWritten: a policy read back from its written form is itself.
func TestParseWritten(t *testing.T) {
	for _, p := range []Policy{None, {Mode: ModeOpen}, policy(t, "a.com", "*.b.org:8443", "10.0.0.0/8:22", "[fd00::1]:80")} {
		got, err := Parse(p.String())
		if err != nil || got.String() != p.String() || got.Mode != p.Mode {
			t.Errorf("Parse(%q) = %v (%s), %v", p.String(), got, got.Mode, err)
		}
	}
}
