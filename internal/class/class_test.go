package class_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

func TestClassDefaults(t *testing.T) {
	got, err := class.Parse(class.Spec{Name: "plain", Image: "localhost/x:1"})
	if err != nil {
		t.Fatal(err)
	}
	want := class.Class{
		Name: "plain", Image: "localhost/x:1", Isolation: class.TierIsolated,
		CPU: 2000, Memory: 4 << 30, DefaultTTL: 4 * time.Hour, MaxTTL: 24 * time.Hour, Git: class.GitGateway,
		Contract: class.ContractBerth,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if !got.Allows(class.PurposeAgent) || !got.Allows(class.PurposeEngineer) {
		t.Error("a class with no purposes is not for both")
	}
}

// TestClassRanges is SPEC S4's table of fields, one row per rule.
func TestClassRanges(t *testing.T) {
	base := class.Spec{Name: "c", Image: "localhost/x:1"}
	with := func(f func(*class.Spec)) class.Spec { s := base; f(&s); return s }
	tests := []struct {
		name  string
		spec  class.Spec
		field string // "" means valid
	}{
		{"name required", with(func(s *class.Spec) { s.Name = "" }), "name"},
		{"name shape", with(func(s *class.Spec) { s.Name = "GPU_1" }), "name"},
		{"image required", with(func(s *class.Spec) { s.Image = "" }), "image"},
		{"tier", with(func(s *class.Spec) { s.Isolation = "strong" }), "isolation"},
		{"vm tier", with(func(s *class.Spec) { s.Isolation = "vm" }), ""},
		{"cpu zero", with(func(s *class.Spec) { s.CPU = "0" }), "cpu"},
		{"cpu millicores", with(func(s *class.Spec) { s.CPU = "4000m" }), ""},
		{"cpu words", with(func(s *class.Spec) { s.CPU = "four" }), "cpu"},
		{"memory zero", with(func(s *class.Spec) { s.Memory = "0" }), "memory"},
		{"memory unit", with(func(s *class.Spec) { s.Memory = "16GB" }), "memory"},
		{"disk none", with(func(s *class.Spec) { s.Disk = "none" }), ""},
		{"disk size", with(func(s *class.Spec) { s.Disk = "50Gi" }), ""},
		{"disk zero", with(func(s *class.Spec) { s.Disk = "0" }), "disk"},
		{"ttl under 5m", with(func(s *class.Spec) { s.DefaultTTL = "4m" }), "default_ttl"},
		{"ttl at 5m", with(func(s *class.Spec) { s.DefaultTTL = "5m" }), ""},
		{"max ttl past 28 days", with(func(s *class.Spec) { s.MaxTTL = "29d" }), "max_ttl"},
		{"max ttl at 28 days", with(func(s *class.Spec) { s.MaxTTL = "28d" }), ""},
		{"max below default", with(func(s *class.Spec) { s.DefaultTTL = "8h"; s.MaxTTL = "4h" }), "max_ttl"},
		{"warm 32", with(func(s *class.Spec) { s.Warm = 32 }), ""},
		{"warm 33", with(func(s *class.Spec) { s.Warm = 33 }), "warm"},
		{"warm negative", with(func(s *class.Spec) { s.Warm = -1 }), "warm"},
		{"unknown purpose", with(func(s *class.Spec) { s.Purposes = []string{"robot"} }), "purposes"},
		{"agent-only class with a pool", with(func(s *class.Spec) { s.Purposes = []string{"agent"}; s.Warm = 1 }), "warm"},
		{"engineer class with a pool", with(func(s *class.Spec) { s.Purposes = []string{"engineer"}; s.Warm = 2 }), ""},
		{"token mode for engineers", with(func(s *class.Spec) { s.Purposes = []string{"engineer"}; s.Git = "token" }), ""},
		{"token mode open to agents", with(func(s *class.Spec) { s.Git = "token" }), "git"},
		{"unknown git mode", with(func(s *class.Spec) { s.Git = "ssh" }), "git"},
		{"ports", with(func(s *class.Spec) { s.Ports = []int{3000, 8080} }), ""},
		{"port below 1024", with(func(s *class.Spec) { s.Ports = []int{80} }), "ports"},
		{"port twice", with(func(s *class.Spec) { s.Ports = []int{3000, 3000} }), "ports"},
		{"ports of an agent-only class", with(func(s *class.Spec) { s.Purposes = []string{"agent"}; s.Ports = []int{3000} }), "ports"},
		{"too many ports", with(func(s *class.Spec) { s.Ports = make([]int, class.MaxPorts+1) }), "ports"},
		{"berth contract", with(func(s *class.Spec) { s.Contract = "berth" }), ""},
		{"kelos contract for agents", with(func(s *class.Spec) { s.Contract = "kelos"; s.Purposes = []string{"agent"} }), ""},
		{"kelos contract open to engineers", with(func(s *class.Spec) { s.Contract = "kelos" }), "contract"},
		{"unknown contract", with(func(s *class.Spec) { s.Contract = "docker" }), "contract"},
		{"kelos setup command", with(func(s *class.Spec) {
			s.Contract, s.Purposes, s.SetupCommand = "kelos", []string{"agent"}, []string{"make", "deps"}
		}), ""},
		{"setup command without kelos", with(func(s *class.Spec) { s.Purposes, s.SetupCommand = []string{"agent"}, []string{"make"} }), "setup_command"},
		{"empty setup command", with(func(s *class.Spec) {
			s.Contract, s.Purposes, s.SetupCommand = "kelos", []string{"agent"}, []string{}
		}), "setup_command"},
		{"default runner", with(func(s *class.Spec) { s.Runner = "pi" }), ""},
		{"unknown runner", with(func(s *class.Spec) { s.Runner = "vim" }), "runner"},
		{"runner that bypasses the gateway", with(func(s *class.Spec) { s.Runner = "cursor" }), "runner"},
		{"runner on an engineers' class", with(func(s *class.Spec) { s.Purposes, s.Runner = []string{"engineer"}, "pi" }), "runner"},
		{"session_idle 0", with(func(s *class.Spec) { s.SessionIdle = "0" }), ""},
		{"session_idle at 1m", with(func(s *class.Spec) { s.SessionIdle = "1m" }), ""},
		{"session_idle under 1m", with(func(s *class.Spec) { s.SessionIdle = "59s" }), "session_idle"},
		{"session_idle negative", with(func(s *class.Spec) { s.SessionIdle = "-5m" }), "session_idle"},
		{"session_idle words", with(func(s *class.Spec) { s.SessionIdle = "soon" }), "session_idle"},
		{"session_idle at max_ttl", with(func(s *class.Spec) { s.MaxTTL, s.SessionIdle = "8h", "8h" }), ""},
		{"session_idle past max_ttl", with(func(s *class.Spec) { s.MaxTTL, s.SessionIdle = "8h", "9h" }), "session_idle"},
		{"session_idle past the default max_ttl", with(func(s *class.Spec) { s.SessionIdle = "2d" }), "session_idle"},
		{"session_idle on an engineers' class", with(func(s *class.Spec) { s.Purposes, s.SessionIdle = []string{"engineer"}, "2h" }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := class.Parse(tt.spec)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Parse = %v, want it valid", err)
				}
				return
			}
			var ie *fault.Error
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("Parse = %v, want an error on %s", err, tt.field)
			}
		})
	}
}

func TestClassFileReportsEveryProblemWithItsLine(t *testing.T) {
	file := `sandboxes:
  - name: good
    image: localhost/x:1
  - name: bad
    image: localhost/x:1
    cpu: "0"
    memory: lots
  - name: good
    image: localhost/x:1
  - name: bad
    cpu: "0"
  - name: typo
    image: localhost/x:1
    mem: 4Gi
    warm: many
    max_ttl: 99d
`
	_, err := class.ParseFile(strings.NewReader(file))
	if !errors.Is(err, fault.Invalid) {
		t.Fatalf("ParseFile = %v, want fault.Invalid", err)
	}
	// Each problem on its field's line (the entry's when the field is
	// missing), and all of them: an unknown field, a value of the wrong
	// type or a duplicate name leaves the entry's other fields checked.
	for _, want := range []string{`sandboxes[1] bad (line 6): cpu: "0" must be more than 0`, `sandboxes[1] bad (line 7): memory: "lots" is not a size`,
		`sandboxes[2] good (line 8): name: "good" is also sandboxes[0]`,
		`sandboxes[3] bad (line 10): name: "bad" is also sandboxes[1]`, `sandboxes[3] bad (line 11): cpu: "0" must be more than 0`, "sandboxes[3] bad (line 10): image: is required",
		"sandboxes[4] typo (line 14): mem: unknown field", "sandboxes[4] typo (line 15): warm: cannot unmarshal !!str `many` into int",
		"sandboxes[4] typo (line 16): max_ttl: 99d is outside 5m to 28d"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%s", want, err)
		}
	}
	for _, bad := range []string{"", "classes: []\n", "sandboxes: 3\n", "sandboxes:\n  - [\n"} {
		if _, err := class.ParseFile(strings.NewReader(bad)); !errors.Is(err, fault.Invalid) {
			t.Errorf("ParseFile(%q) = %v, want fault.Invalid", bad, err)
		}
	}
	// JSON is YAML too: the API takes either.
	got, err := class.ParseFile(strings.NewReader(`{"sandboxes":[{"name":"j","image":"localhost/x:1","memory":"8Gi"}]}`))
	if err != nil || len(got) != 1 || got[0].Memory != quantity.Bytes(8<<30) {
		t.Errorf("JSON class file: %v, %v", got, err)
	}
}

func TestClassSpecRoundTrips(t *testing.T) {
	for _, spec := range []class.Spec{
		{Name: "c", Image: "i", Isolation: "vm", CPU: "1500m", Memory: "1536Mi",
			Disk: "50Gi", DefaultTTL: "90m", MaxTTL: "7d", Warm: 3, Purposes: []string{"engineer"}},
		{Name: "k", Image: "ghcr.io/acme/kelos-claude:1", Purposes: []string{"agent"}, Contract: "kelos",
			SetupCommand: []string{"sh", "-c", "make deps"}},
		{Name: "s", Image: "localhost/berth-agent:1", Purposes: []string{"agent"}, MaxTTL: "3d", SessionIdle: "36h"},
	} {
		c, err := class.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := class.Parse(c.Spec())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Errorf("Spec() of %s does not round-trip (-want +got):\n%s", spec.Name, diff)
		}
	}
}

// TestSessionIdle: session_idle as an administrator writes it, none when
// absent or 0, and its bounds named in the refusal.
func TestSessionIdle(t *testing.T) {
	got, err := class.ParseFile(strings.NewReader(`sandboxes:
  - name: talk
    image: localhost/berth-agent:1
    purposes: [agent]
    max_ttl: 2d
    session_idle: 1d12h
  - name: once
    image: localhost/berth-agent:1
    purposes: [agent]
  - name: zero
    image: localhost/berth-agent:1
    session_idle: 0s
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{36 * time.Hour, 0, 0} {
		if got[i].SessionIdle != want {
			t.Errorf("%s: session_idle %v, want %v", got[i].Name, got[i].SessionIdle, want)
		}
	}
	if s := got[0].Spec().SessionIdle; s != "36h" {
		t.Errorf("Spec().SessionIdle = %q, want 36h", s)
	}
	if s := got[1].Spec().SessionIdle; s != "" {
		t.Errorf("Spec().SessionIdle of a class without one = %q, want it left out", s)
	}
	for _, tt := range []struct{ idle, maxTTL, want string }{
		{"30s", "", "session_idle: 30s is outside 1m to max_ttl 1d"},
		{"5h", "4h", "session_idle: 5h is outside 1m to max_ttl 4h"},
		{"later", "", `session_idle: "later" is not a duration`},
	} {
		_, err := class.Parse(class.Spec{Name: "c", Image: "localhost/x:1", MaxTTL: tt.maxTTL, SessionIdle: tt.idle})
		if !errors.Is(err, fault.Invalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("session_idle %s, max_ttl %q: %v; want invalid saying %q", tt.idle, tt.maxTTL, err, tt.want)
		}
	}
}

// TestKelosClassFromYAML: the fields as an administrator writes them.
func TestKelosClassFromYAML(t *testing.T) {
	got, err := class.ParseFile(strings.NewReader(`sandboxes:
  - name: kelos-claude
    image: ghcr.io/acme/kelos-claude:1
    purposes: [agent]
    contract: kelos
    setup_command: ["sh", "-c", "pip install --user tool"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Contract != class.ContractKelos || !slices.Equal(got[0].SetupCommand, []string{"sh", "-c", "pip install --user tool"}) {
		t.Errorf("class %+v, want the kelos contract with its setup command", got[0])
	}
}

// TestImageRule is SPEC S4's image rule.
func TestImageRule(t *testing.T) {
	p := class.ImagePolicy{
		Template: []string{"registry.internal/berth/base:1"},
		Allowed:  []string{"registry.internal/team/", "ghcr.io/acme/tool", "host:5000/app:2"},
	}
	tests := []struct {
		image, current string
		want           bool
	}{
		{"registry.internal/berth/base:1", "", true},           // in the template file
		{"registry.internal/berth/base:2", "", false},          // another tag of a template image is not
		{"registry.internal/team/anything:7", "", true},        // under a prefix entry
		{"registry.internal/teammate/x:1", "", false},          // a prefix is a path, not a string
		{"ghcr.io/acme/tool:3", "", true},                      // that image, any tag
		{"ghcr.io/acme/tool@sha256:abcd", "", true},            // or digest
		{"ghcr.io/acme/toolbox:1", "", false},                  // not another image
		{"host:5000/app:9", "", true},                          // an entry's own tag does not pin it
		{"evil.example/miner:1", "evil.example/miner:1", true}, // the class's current image
		{"evil.example/miner:1", "", false},
	}
	for _, tt := range tests {
		if got := p.Allows(tt.image, tt.current); got != tt.want {
			t.Errorf("Allows(%q, current %q) = %v, want %v", tt.image, tt.current, got, tt.want)
		}
	}
}

// TestClassEgress: a class's egress as written (a word or a list, YAML's
// scalar or sequence, JSON's string or array), its defaults by purpose,
// and what it may not say.
func TestClassEgress(t *testing.T) {
	parse := func(egress, purposes string) (class.Class, error) {
		file := "sandboxes:\n  - name: c\n    image: localhost/x:1\n    purposes: " + purposes + "\n"
		if egress != "" {
			file += "    egress: " + egress + "\n"
		}
		cs, err := class.ParseFile(strings.NewReader(file))
		if err != nil {
			return class.Class{}, err
		}
		return cs[0], nil
	}
	for _, c := range []struct {
		egress, purposes string
		agent, engineer  string // EgressFor each purpose, written
	}{
		{"", "[agent]", "none", "open"},
		{"none", "[agent]", "none", "open"},
		{"open", "[agent, engineer]", "open", "open"},
		{"[registry.npmjs.org, \"*.pythonhosted.org:8443\"]", "[agent]", "registry.npmjs.org, *.pythonhosted.org:8443", "open"},
		{"registry.npmjs.org", "[agent]", "registry.npmjs.org", "open"},
	} {
		got, err := parse(c.egress, c.purposes)
		if err != nil {
			t.Errorf("egress %s: %v", c.egress, err)
			continue
		}
		if a, e := got.EgressFor(class.PurposeAgent).String(), got.EgressFor(class.PurposeEngineer).String(); a != c.agent || e != c.engineer {
			t.Errorf("egress %s: agent %q engineer %q, want %q and %q", c.egress, a, e, c.agent, c.engineer)
		}
		back, err := class.Parse(got.Spec())
		if err != nil || back.Egress.String() != got.Egress.String() {
			t.Errorf("egress %s: written back as %v and read again as %v, %v", c.egress, got.Spec().Egress, back.Egress, err)
		}
	}
	for _, c := range []struct{ egress, purposes, says string }{
		{"[registry.npmjs.org]", "[engineer, agent]", "an engineer sandbox's network is open"},
		{"none", "[engineer]", "an engineer sandbox's network is open"},
		{"[\"bad host\"]", "[agent]", "is not in a host name"},
		{"[\"a.com:0\"]", "[agent]", "port"},
	} {
		_, err := parse(c.egress, c.purposes)
		if err == nil || !strings.Contains(err.Error(), "egress") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("egress %s for %s: %v, want an error on egress saying %q", c.egress, c.purposes, err, c.says)
		}
	}
	got, err := class.ParseFile(strings.NewReader(`{"sandboxes":[{"name":"j","image":"localhost/x:1","purposes":["agent"],"egress":"open"}]}`))
	if err != nil || got[0].EgressFor(class.PurposeAgent).String() != "open" {
		t.Errorf("JSON egress as a string: %v, %v", got, err)
	}
}
