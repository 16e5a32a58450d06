package placeholder

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/secret"
)

// TestSealing: a value opens with the key it was sealed with, for the
// project and name it was sealed for, and no other; the sealed bytes hold
// no trace of it; two seals of one value differ.
func TestSealing(t *testing.T) {
	k := NewKey(bytes.Repeat([]byte{7}, KeySize))
	v := secret.New("ghp_s3cr3tVALUEofTheTest")
	a, err := k.seal("prj_a", "GITHUB_TOKEN", v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := k.seal("prj_a", "GITHUB_TOKEN", v)
	if bytes.Equal(a, b) || bytes.Contains(a, []byte("s3cr3t")) {
		t.Errorf("sealed %x and %x: want two different seals, neither holding the value", a, b)
	}
	x := Sealed{Credential: Credential{Project: "prj_a", Name: "GITHUB_TOKEN"}, Value: a}
	if got, err := k.open(x); err != nil || !got.Equal(v) {
		t.Fatalf("open = %v, %v", got, err)
	}
	for _, bad := range []Sealed{
		{Credential: Credential{Project: "prj_b", Name: "GITHUB_TOKEN"}, Value: a},
		{Credential: Credential{Project: "prj_a", Name: "OTHER"}, Value: a},
		{Credential: Credential{Project: "prj_a", Name: "GITHUB_TOKEN"}, Value: a[:5]},
	} {
		if _, err := k.open(bad); err == nil {
			t.Errorf("a value sealed for prj_a/GITHUB_TOKEN opened as %s/%s (%d bytes)", bad.Project, bad.Name, len(bad.Value))
		}
	}
	other := NewKey(bytes.Repeat([]byte{8}, KeySize))
	if _, err := other.open(x); err == nil || !strings.Contains(err.Error(), "BERTH_SECRETS_KEY_FILE") {
		t.Errorf("another deployment's key opened it: %v", err)
	}
}

// TestPlaceholder: a placeholder is the same for one sandbox and name,
// another for another sandbox or name or key, and says nothing of the key.
func TestPlaceholder(t *testing.T) {
	k := NewKey(bytes.Repeat([]byte{7}, KeySize))
	p := k.Placeholder("sbx_a", "TOKEN")
	if !strings.HasPrefix(p, Prefix) || len(p) != len(Prefix)+32 || p != k.Placeholder("sbx_a", "TOKEN") {
		t.Errorf("placeholder %q", p)
	}
	for _, q := range []string{k.Placeholder("sbx_b", "TOKEN"), k.Placeholder("sbx_a", "TOKEN2"), NewKey(bytes.Repeat([]byte{8}, KeySize)).Placeholder("sbx_a", "TOKEN")} {
		if q == p {
			t.Errorf("two placeholders are %q", p)
		}
	}
}

// TestLoadKey: the first start makes a key (0600), later starts read the
// same; a file of the wrong size is refused, naming it.
func TestLoadKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "secrets_key") // a data directory not made yet
	k, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v, %v; want 0600", fi.Mode(), err)
	}
	again, err := LoadKey(path)
	if err != nil || !bytes.Equal(again.b, k.b) {
		t.Errorf("read again: %v", err)
	}
	if err := os.WriteFile(path, []byte("abcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a short key: %v", err)
	}
}

// TestCheckName: a secret's name is a variable's, and not one berth sets.
func TestCheckName(t *testing.T) {
	s := NewService(nil, nil, Key{}, nil, func(n string) bool { return n == "ANTHROPIC_API_KEY" }, nil)
	for name, ok := range map[string]bool{"GITHUB_TOKEN": true, "_x1": true, "1X": false, "A-B": false, "": false,
		strings.Repeat("A", MaxName+1): false, "BERTH_API_KEY": false, "berth_x": false, "ANTHROPIC_API_KEY": false} {
		if err := s.CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}
