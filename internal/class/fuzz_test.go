package class_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
)

// FuzzParseFile feeds ParseFile arbitrary sandboxes files,
// seeded with the repository's own, the tests' and the tricks of YAML
// (aliases, merge keys, tags, JSON, documents, deep nesting). It must
// never panic, and either refuse with an ErrInvalid whose message stays
// bounded, or return classes within every bound that come back the same
// when written out as a file again the way the panel's class editor
// writes one (JSON, which the parser reads too).
func FuzzParseFile(f *testing.F) {
	for _, path := range []string{"../../examples/sandboxes.yaml"} {
		if b, err := os.ReadFile(filepath.FromSlash(path)); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		templateFile,
		"sandboxes: []",
		"sandboxes:\n  - name: a\n    image: i\n    isolation: standard\n",
		"sandboxes:\n  - name: a\n    image: &i x\n  - name: b\n    image: *i\n",
		"sandboxes:\n  - &c {name: a, image: x}\n  - *c\n",
		"sandboxes:\n  - name: a\n    image: x\n    <<: {cpu: 2}\n",
		"sandboxes:\n  - name: a\n    image: x\n    purposes: [agent]\n    contract: kelos\n    setup_command: [&s aaaa, *s, *s, *s]\n",
		"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nsandboxes: [*b, *b]\n",
		`{"sandboxes": [{"name": "a", "image": "x", "warm": 3, "purposes": ["engineer"]}]}`,
		"sandboxes: !!str x",
		"sandboxes:\n  - name: a\n    image: x\n---\nsandboxes: []\n",
		"sandboxes: " + strings.Repeat("[", 50) + strings.Repeat("]", 50),
		"sandboxes:\n  - name: a\n    image: x\n    a: 1\n    b: 2\n    c: 3\n",
		"sandboxes:\n  - name: a\n    name: b\n",
		"sandboxes:\n  - {name: a, image: x, cpu: 1e9, memory: -1, disk: none, default_ttl: 5m, max_ttl: 28d}\n",
		"\xff\xfe",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		classes, err := class.ParseFile(bytes.NewReader(file))
		if err != nil {
			if !errors.Is(err, fault.Invalid) {
				t.Fatalf("refused with %v, which is no fault.Invalid", err)
			}
			// A refusal names what is wrong; it does not grow with the
			// file past a few screens.
			if n := len(err.Error()); n > 16<<10 {
				t.Fatalf("the refusal of a %d-byte file is %d bytes long", len(file), n)
			}
			return
		}
		if len(classes) > class.MaxClasses {
			t.Fatalf("%d classes; at most %d", len(classes), class.MaxClasses)
		}
		specs := make([]class.Spec, len(classes))
		size := 0
		for i, c := range classes {
			specs[i] = c.Spec()
			size += len(c.Description) + len(c.Image)
			for _, a := range c.SetupCommand {
				size += len(a)
			}
			if len(c.Description) > class.MaxDescription || len(c.Image) > class.MaxImage || len(c.SetupCommand) > class.MaxSetupArgs {
				t.Fatalf("class %s is past a bound: description %d, image %d, setup_command %d arguments",
					c.Name, len(c.Description), len(c.Image), len(c.SetupCommand))
			}
		}
		if size > class.MaxFile {
			t.Fatalf("a file of %d bytes gave classes of %d bytes", len(file), size)
		}
		again, err := json.Marshal(map[string][]class.Spec{"sandboxes": specs})
		if err != nil {
			t.Fatal(err)
		}
		back, err := class.ParseFile(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("the classes written out again are refused: %v\n%s", err, again)
		}
		if diff := cmp.Diff(classes, back); diff != "" {
			t.Fatalf("the classes written out again read differently (-first +again):\n%s", diff)
		}
	})
}
