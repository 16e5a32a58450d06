package entrypoint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBaseTrustStore: bundle.pem starts with SSL_CERT_FILE's file when it
// can be read, else with the first of the system's that can.
func TestBaseTrustStore(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	own, first, second := file("own.pem", "own"), file("first.pem", "first"), file("second.pem", "second")
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name, sslCertFile string
		stores            []string
		want              string
	}{
		{"SSL_CERT_FILE first", own, []string{first, second}, own},
		{"SSL_CERT_FILE unset", "", []string{first, second}, first},
		{"SSL_CERT_FILE missing", missing, []string{first, second}, first},
		{"SSL_CERT_FILE a directory", dir, []string{missing, second}, second},
		{"first store missing", "", []string{missing, second}, second},
		{"none", missing, []string{missing}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, data := baseTrustStore(tt.sslCertFile, tt.stores)
			if name != tt.want {
				t.Errorf("baseTrustStore = %q, want %q", name, tt.want)
			}
			if want, _ := os.ReadFile(tt.want); tt.want != "" && string(data) != string(want) {
				t.Errorf("baseTrustStore's data = %q, want %s's %q", data, tt.want, want)
			}
		})
	}
}

// TestParseCACertsLimit: 64 KiB is allowed, a byte more is not; text
// around the blocks and their headers are dropped.
func TestParseCACertsLimit(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	plain := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	headed := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: der}))
	s := "# the deployment's CA\n" + headed
	s += strings.Repeat(" ", maxCACerts-len(s))
	got, err := parseCACerts(s)
	if err != nil || string(got) != plain {
		t.Errorf("parseCACerts(64 KiB) = %q, %v; want the certificate alone", got, err)
	}
	if _, err := parseCACerts(s + " "); err == nil || !strings.Contains(err.Error(), "more than the 64 KiB") {
		t.Errorf("parseCACerts(64 KiB + 1) = %v, want refused", err)
	}
}
