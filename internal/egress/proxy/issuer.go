package proxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Issuer is the deployment's certificate authority for the egress proxy:
// it signs the certificate the proxy shows a sandbox for a host whose
// requests it puts secrets into. Sandboxes trust it (BERTH_CA_CERTS);
// nothing else should. Replicas share it.
type Issuer struct {
	ca  *x509.Certificate
	key crypto.Signer
	pem []byte // ca, PEM

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// Lifetimes of the authority and of its certificates for hosts.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	// maxLeaves bounds the certificates kept for reuse.
	maxLeaves = 1024
)

// LoadIssuer reads the authority (its key and certificate, PEM) from
// path, making one there (0600) at a deployment's first start.
func LoadIssuer(path string) (*Issuer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if b, err = newAuthority(); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	i, err := parseIssuer(b)
	if err != nil {
		return nil, fmt.Errorf("egress CA %s: %w", path, err)
	}
	return i, nil
}

// newAuthority makes a key and a self-signed authority, PEM.
func newAuthority() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "berth egress CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(caLifetime),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...), nil
}

func parseIssuer(b []byte) (*Issuer, error) {
	i := &Issuer{leaves: map[string]*tls.Certificate{}}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		switch blk.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, errors.New("the key cannot sign")
			}
			i.key = s
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, err
			}
			i.ca, i.pem = c, pem.EncodeToMemory(blk)
		}
	}
	if i.ca == nil || i.key == nil || !i.ca.IsCA {
		return nil, errors.New("want a PRIVATE KEY and a CA CERTIFICATE, PEM")
	}
	return i, nil
}

// CertPEM is the authority's certificate, for sandboxes to trust.
func (i *Issuer) CertPEM() []byte { return i.pem }

// leaf is a certificate for host signed by the authority, made once and
// kept until it is near its end.
func (i *Issuer) leaf(host string) (*tls.Certificate, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > leafLifetime/2 {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(leafLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca, &key.PublicKey, i.key)
	if err != nil {
		return nil, err
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der, i.ca.Raw}, PrivateKey: key, Leaf: leaf}
	if len(i.leaves) >= maxLeaves {
		clear(i.leaves)
	}
	i.leaves[host] = c
	return c, nil
}
