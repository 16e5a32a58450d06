package secret_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/secret"
)

// value is what no output may show.
const value = "berth_key_s3cr3tVALUE"

// holder holds a secret the ways code does: in an exported field, an
// unexported one, behind a pointer, in a slice and in a map.
type holder struct {
	Key    secret.Secret
	key    secret.Secret
	Ptr    *secret.Secret
	List   []secret.Secret
	ByName map[string]secret.Secret
}

// TestSecretNeverShowsItsValue: every way of printing, logging or
// marshalling a Secret, alone or inside a struct, shows [redacted] and
// never the value.
func TestSecretNeverShowsItsValue(t *testing.T) {
	s := secret.New(value)
	h := holder{Key: s, key: s, Ptr: &s, List: []secret.Secret{s}, ByName: map[string]secret.Secret{"k": s}}
	outputs := map[string]string{"String": s.String(), "GoString": s.GoString()}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		outputs["fmt "+verb] = fmt.Sprintf(verb, s)
		outputs["fmt "+verb+" of a struct"] = fmt.Sprintf(verb, h)
		outputs["fmt "+verb+" of a pointer to a struct"] = fmt.Sprintf(verb, &h)
	}
	outputs["fmt.Errorf"] = fmt.Errorf("login with %v failed", s).Error()
	outputs["fmt.Sprint"] = fmt.Sprint(s, h)
	outputs["fmt.Sprintln"] = fmt.Sprintln(s, &s)
	for name, v := range map[string]any{"alone": s, "in a struct": h} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal %s: %v", name, err)
		}
		outputs["json "+name] = string(b)
	}
	type doc struct{ Key secret.Secret }
	b, err := xml.Marshal(doc{s})
	if err != nil {
		t.Fatal(err)
	}
	outputs["xml"] = string(b)
	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(newHandler(&buf))
		log.Info("key", "secret", s, "pointer", &s, "holder", h, "holder pointer", &h)
		log.Info("grouped", slog.Group("g", "secret", s), slog.Any("any", s))
		log.With("with", s).Info("attr", slog.Any("list", []secret.Secret{s}))
		outputs["slog "+name+" handler"] = buf.String()
	}
	for how, out := range outputs {
		if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
			t.Errorf("%s shows the value: %s", how, out)
		}
	}
	for _, how := range []string{"String", "fmt %v", "fmt %q", "json alone", "slog json handler", "slog text handler"} {
		if !strings.Contains(outputs[how], secret.Redacted) {
			t.Errorf("%s does not say it is redacted: %s", how, outputs[how])
		}
	}
	if s.Reveal() != value {
		t.Errorf("Reveal = %q, want the value", s.Reveal())
	}
}

func TestSecretZeroAndEqual(t *testing.T) {
	if !secret.New("").IsZero() || !(secret.Secret{}).IsZero() || secret.New("x").IsZero() {
		t.Error("IsZero: want true for none and the empty value only")
	}
	if (secret.Secret{}).Reveal() != "" {
		t.Error("the zero Secret reveals a value")
	}
	if !secret.New("a").Equal(secret.New("a")) || secret.New("a").Equal(secret.New("b")) || secret.New("a").Equal(secret.Secret{}) {
		t.Error("Equal compares values")
	}
}

// TestOneSecretType: no package declares a Secret type of its own beside
// this one; three of them, only one of which redacted itself under slog's
// JSON handler, is how a value leaks.
func TestOneSecretType(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Dir(path) == "." {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				if name := spec.(*ast.TypeSpec).Name.Name; strings.HasSuffix(name, "Secret") && f.Name.Name != "secret" {
					t.Errorf("%s declares type %s: hold a credential's value in secret.Secret", path, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
