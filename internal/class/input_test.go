package class_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
)

// aliasBomb is a sandboxes file whose setup_command aliases one string of
// size bytes n times: small as written, n times size as expanded.
func aliasBomb(size, n int) string {
	var b strings.Builder
	b.WriteString("sandboxes:\n  - name: bomb\n    image: localhost/berth-agent:1\n    purposes: [agent]\n    contract: kelos\n")
	b.WriteString("    setup_command: [&s \"" + strings.Repeat("a", size) + "\"")
	for range n - 1 {
		b.WriteString(", *s")
	}
	b.WriteString("]\n")
	return b.String()
}

// TestApplyRefusesAliasExpansion: a sandboxes file whose YAML aliases
// expand it past 1 MiB is refused before it is decoded, naming the limit;
// nothing is stored. The file (a 200 KB string aliased 4,000
// times, 212 KB written, 800 MB expanded) is refused as cheaply as a
// small one. Aliases within the budget still work.
func TestApplyRefusesAliasExpansion(t *testing.T) {
	e := newEnv(t)
	before, _, err := e.svc.List(t.Context(), e.admin, "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		size, n int
	}{
		{"2 MB from 20 KB", 20 << 10, 100},
		{"the issue's 800 MB from 212 KB", 200_000, 4000},
	} {
		file := aliasBomb(tt.size, tt.n)
		_, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(file))
		var ie *fault.Error
		if !errors.As(err, &ie) || ie.Field != "sandboxes" || !strings.Contains(err.Error(), "aliases expanded") || !strings.Contains(err.Error(), "(1048576 bytes)") {
			// On a gateway without the bound the first is stored whole; the
			// second would take gigabytes.
			t.Fatalf("%s (%d bytes written): %.300v; want it refused on sandboxes naming the 1 MiB limit", tt.name, len(file), err)
		}
	}
	after, _, err := e.svc.List(t.Context(), e.admin, "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the refused files changed the classes: %d before, %d after", len(before), len(after))
	}
	// An anchor shared within the budget is a convenience, not an attack.
	shared := "sandboxes:\n  - name: one\n    image: &img localhost/berth-sandbox:1\n    isolation: standard\n" +
		"  - name: two\n    image: *img\n    isolation: standard\n"
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(shared)); err != nil {
		t.Errorf("a file sharing its image through an alias: %v", err)
	}
}

// TestClassFieldsAreBounded: every field of a class has a bound, refused
// naming the field and the limit, in a file as in the panel's one-class
// form (both go through Parse); the file has a bound as written, and
// in classes, per file and per organisation.
func TestClassFieldsAreBounded(t *testing.T) {
	e := newEnv(t)
	entry := func(fields string) string {
		return "sandboxes:\n  - name: c\n    image: localhost/berth-agent:1\n    purposes: [agent]\n    contract: kelos\n" + fields
	}
	args := func(n, size int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = strings.Repeat("x", size)
		}
		return "    setup_command: [" + strings.Join(parts, ", ") + "]\n"
	}
	for _, tt := range []struct {
		name, file, field, want string
	}{
		{"description", entry("    description: " + strings.Repeat("d", 1025) + "\n"), "description", "is 1025 bytes; at most 1024"},
		{"image", strings.Replace(entry(""), "localhost/berth-agent:1", strings.Repeat("i", 513), 1), "image", "is 513 bytes; at most 512"},
		{"cpu", entry("    cpu: \"" + strings.Repeat("1", 65) + "\"\n"), "cpu", "is 65 bytes; at most 64"},
		{"default_ttl", entry("    default_ttl: " + strings.Repeat("1", 65) + "h\n"), "default_ttl", "is 66 bytes; at most 64"},
		{"runner", entry("    runner: " + strings.Repeat("r", 100) + "\n"), "runner", "is 100 bytes; at most 64"},
		{"session_idle", entry("    session_idle: " + strings.Repeat("1", 65) + "m\n"), "session_idle", "is 66 bytes; at most 64"},
		{"purposes", strings.Replace(entry(""), "[agent]", "[agent, agent, agent]", 1), "purposes", "has 3 entries; at most 2"},
		{"setup_command arguments", entry(args(65, 1)), "setup_command", "has 65 arguments; at most 64"},
		{"setup_command bytes", entry(args(2, 9<<10)), "setup_command", "is 18432 bytes; at most 16384"},
		{"name", strings.Replace(entry(""), "name: c", "name: "+strings.Repeat("n", 70), 1), "name", "is 70 bytes; at most 64"},
		{"ports", strings.Replace(entry("    ports: ["+strings.TrimSuffix(strings.Repeat("3000, ", 65), ", ")+"]\n"), "[agent]", "[engineer]", 1), "ports", "has 65 entries; at most 64"},
	} {
		_, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(tt.file))
		var ie *fault.Error
		if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %.200v; want it invalid on %s saying %q", tt.name, err, tt.field, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "\n") || len(err.Error()) > 300) {
			t.Errorf("%s: the refusal says more than the bound: %.300q", tt.name, err)
		}
	}
	// At each bound the field is accepted.
	ok := entry("    description: " + strings.Repeat("d", 1024) + "\n" + args(64, 256))
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(ok)); err != nil {
		t.Errorf("a class at every bound: %v", err)
	}

	// The file as written, at start-up (no body limit in front of it).
	big := "sandboxes: []\n# " + strings.Repeat("x", class.MaxFile) + "\n"
	if _, err := class.ParseFile(strings.NewReader(big)); err == nil || !strings.Contains(err.Error(), "sandboxes: the file is larger than 1Mi (1048576 bytes)") {
		t.Errorf("a file over 1 MiB: %v", err)
	}
	// In classes: per file, then per organisation.
	many := func(from, n int) string {
		var b strings.Builder
		b.WriteString("sandboxes:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: c%d, image: localhost/berth-sandbox:1, isolation: standard}\n", from+i)
		}
		return b.String()
	}
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(many(0, class.MaxClasses+1))); err == nil ||
		!strings.Contains(err.Error(), "names 101 classes; at most 100") {
		t.Errorf("a file of 101 classes: %v", err)
	}
	have, _, err := e.svc.List(t.Context(), e.admin, "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(many(0, class.MaxClasses-len(have)))); err != nil {
		t.Fatalf("filling the organisation to %d classes: %v", class.MaxClasses, err)
	}
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(many(500, 1))); err == nil ||
		!strings.Contains(err.Error(), "acme would have 101 classes; at most 100") {
		t.Errorf("a class past the organisation's 100: %v", err)
	}
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader(many(0, 1))); err != nil {
		t.Errorf("changing a class of a full organisation: %v", err)
	}
}

// TestClassFileRefusalsStayCheap: what YAML makes expensive is refused
// before it costs anything, with a short answer: a mapping with a key
// twice (which the YAML library would compare pair by pair, reporting
// every pair), a top-level mapping of many unknown keys (compared the same
// way: a 1 MiB file took 41 s and gave a 9.7 MB answer), a second
// document, and problems by the thousand (the first 20 are listed).
func TestClassFileRefusalsStayCheap(t *testing.T) {
	keys := func(format string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, format, i)
		}
		return b.String()
	}
	big := keys("k%d: 1\n", 150_000)
	big = big[:strings.LastIndexByte(big[:class.MaxFile-20], '\n')+1] + "sandboxes: []\n"
	for _, tt := range []struct{ name, file, want string }{
		{"a key twice", "sandboxes:\n  - name: a\n    image: x\n" + strings.Repeat("    name: a\n", 300), `line 4: name is also on line 2`},
		{"unknown top-level keys", keys("k%d: 1\n", 5000) + "sandboxes: []\n", `line 1: unknown field k0 (a sandboxes file has only sandboxes:)`},
		{"a 1 MiB file of them", big, "unknown field k0"},
		{"a top-level key twice", "sandboxes: []\nsandboxes: []\n", "line 2: sandboxes is also on line 1"},
		{"a second document", "sandboxes: []\n---\nsandboxes: [{name: a}]\n", "holds more than one YAML document"},
		{"problems by the thousand", "sandboxes:\n" + keys("  - {name: c%d, image: x, cpu: \"0\", memory: \"0\", disk: \"0\"}\n", 100),
			"and 280 more problems"},
	} {
		start := time.Now()
		_, err := class.ParseFile(strings.NewReader(tt.file))
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %.300v; want it refused saying %q", tt.name, err, tt.want)
			continue
		}
		if n := len(err.Error()); n > 16<<10 {
			t.Errorf("%s: a %d-byte file's refusal is %d bytes", tt.name, len(tt.file), n)
		}
		// Generous for a loaded machine and the race detector (the
		// linear checks take a second or so there); the quadratic
		// comparisons took 41 s without either.
		if took > time.Minute {
			t.Errorf("%s: refusing a %d-byte file took %v", tt.name, len(tt.file), took)
		}
	}
}
