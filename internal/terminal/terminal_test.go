package terminal

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// The CA is made once, private to the gateway, and read back the same by
// the next start (a sandbox trusts the CA it was started with).
func TestLoadCAMakesItOnceAndKeepsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "terminal_ca")
	a, err := LoadCA(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the CA's key is %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("its directory is %v, want 0700", di.Mode().Perm())
	}
	b, err := LoadCA(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.signer.PublicKey().Marshal(), b.signer.PublicKey().Marshal()) {
		t.Error("a second start made another CA")
	}
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(path); err == nil {
		t.Error("a CA file that is no key was taken")
	}
}

// A sandbox trusts the CA for its own principal only, restricted to a
// pty; a certificate for one sandbox is refused by another and after its
// minute.
func TestCertificatesOpenOneSandboxForAMinute(t *testing.T) {
	ca, err := LoadCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ca.now = func() time.Time { return now }

	key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(ca.AuthorizedKey("sbx_a")))
	if err != nil {
		t.Fatalf("the authorized_keys line does not parse: %v", err)
	}
	if want := []string{"cert-authority", `principals="berth-terminal-sbx_a"`, "restrict", "pty"}; !slices.Equal(opts, want) {
		t.Errorf("options %q, want %q", opts, want)
	}
	if !bytes.Equal(key.Marshal(), ca.signer.PublicKey().Marshal()) {
		t.Error("the line names another key than the CA's")
	}

	signer, err := ca.certificate("sbx_a")
	if err != nil {
		t.Fatal(err)
	}
	cert := signer.PublicKey().(*ssh.Certificate)
	check := func(principal string, at time.Time) error {
		c := &ssh.CertChecker{
			IsUserAuthority: func(auth ssh.PublicKey) bool { return bytes.Equal(auth.Marshal(), ca.signer.PublicKey().Marshal()) },
			Clock:           func() time.Time { return at },
		}
		return c.CheckCert(principal, cert)
	}
	if err := check("berth-terminal-sbx_a", now); err != nil {
		t.Errorf("sandbox a refuses its own certificate: %v", err)
	}
	if err := check("berth-terminal-sbx_b", now); err == nil {
		t.Error("sandbox b takes a certificate for a")
	}
	if err := check("berth-terminal-sbx_a", now.Add(61*time.Second)); err == nil {
		t.Error("the certificate still works after its minute")
	}
	if _, ok := cert.Permissions.Extensions["permit-port-forwarding"]; ok || len(cert.Permissions.Extensions) != 1 {
		t.Errorf("extensions %v, want permit-pty alone", cert.Permissions.Extensions)
	}
}
