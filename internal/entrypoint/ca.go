package entrypoint

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The deployment's certificate authority (BERTH_CA_CERTS). The gateway
// terminates TLS for a few hosts, to put secrets into requests, with
// certificates of the deployment's own CA, which the gateway hands over as
// PEM: the programs the agent runs must trust it as well as the public
// CAs. Before it starts the agent, berth-init writes two files in a
// directory of its own and names them in the variables the common clients
// read. A client told of a CA file by one of these replaces its whole
// trust store with it, so bundle.pem is the trust store the environment
// had followed by the CA; Node adds NODE_EXTRA_CA_CERTS's to its own, so
// extra.pem is an earlier NODE_EXTRA_CA_CERTS file's certificates followed
// by the CA.
const (
	envCACerts = "BERTH_CA_CERTS"
	// maxCACerts is the most BERTH_CA_CERTS may hold: a few certificates,
	// not a trust store.
	maxCACerts = 64 << 10
	envNodeCA  = "NODE_EXTRA_CA_CERTS"
	bundleName = "bundle.pem"
	extraName  = "extra.pem"
)

// bundleVars name bundle.pem for curl, git, pip, requests, and OpenSSL's
// and Go's default trust store (SSL_CERT_FILE: Python's ssl, Go programs).
func bundleVars() []string {
	return []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"}
}

// systemTrustStores are the files a distribution keeps its trust store in,
// in the order bundle.pem looks for one: Debian, Ubuntu and Alpine;
// Fedora and RHEL; Alpine's and the BSDs' other name.
func systemTrustStores() []string {
	return []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}
}

// parseCACerts checks BERTH_CA_CERTS: one or more PEM blocks, each a
// CERTIFICATE that x509 parses, in at most maxCACerts bytes. It returns the
// blocks as PEM again (text around them and headers dropped).
func parseCACerts(s string) ([]byte, error) {
	if len(s) > maxCACerts {
		return nil, fmt.Errorf("is %d bytes, more than the %d KiB it may hold", len(s), maxCACerts>>10)
	}
	var out []byte
	n := 0
	for rest := []byte(s); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			// Never the block itself: it may be a key.
			return nil, fmt.Errorf("PEM block %d is a %q block, want CERTIFICATE blocks only", n, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("PEM block %d is not a certificate: %v", n, err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	switch {
	case n == 0:
		return nil, errors.New("holds no PEM block, want one or more PEM CERTIFICATE blocks")
	case strings.Count(s, "-----BEGIN") > n:
		// pem.Decode skips a block it cannot read: a cut-off last
		// certificate would go missing without a word.
		return nil, errors.New("holds a PEM block that does not decode (cut short or damaged?)")
	}
	return out, nil
}

// caFiles are the files writeCAFiles wrote; all "" when there is no CA to
// trust.
type caFiles struct {
	dir, bundle, extra string
}

// writeCAFiles writes bundle.pem and extra.pem for the deployment's CA, when
// BERTH_CA_CERTS gave one, in a new directory of berth-init's own (0700,
// the files 0644): under XDG_RUNTIME_DIR, the user's own, else /tmp, which
// every image has writable. Not HOME, which a kept volume may carry into a
// later run, nor the checkout, which the agent commits.
func (r *starter) writeCAFiles() (caFiles, error) {
	if len(r.cfg.caCerts) == 0 {
		return caFiles{}, nil
	}
	getenv := r.env.Getenv
	base, data := baseTrustStore(getenv("SSL_CERT_FILE"), systemTrustStores())
	switch {
	case base == "":
		r.logf("found no trust store (SSL_CERT_FILE, %s): %s holds the deployment's CA alone",
			strings.Join(systemTrustStores(), ", "), bundleName)
	case getenv("SSL_CERT_FILE") != "" && base != getenv("SSL_CERT_FILE"):
		r.logf("SSL_CERT_FILE %s cannot be read: %s starts with %s instead", getenv("SSL_CERT_FILE"), bundleName, base)
	}
	var extra []byte
	if name := getenv(envNodeCA); name != "" {
		var err error
		if extra, err = readTrustFile(name); err != nil {
			r.logf("%s %s cannot be read (%v): %s holds the deployment's CA alone", envNodeCA, name, unwrapPath(err), extraName)
		}
	}

	var errs []error
	for _, parent := range []string{getenv("XDG_RUNTIME_DIR"), "/tmp"} {
		if !filepath.IsAbs(parent) {
			continue // unset, or not a place to rely on
		}
		dir, err := os.MkdirTemp(parent, "berth-ca-")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f := caFiles{dir: dir, bundle: filepath.Join(dir, bundleName), extra: filepath.Join(dir, extraName)}
		if err := f.write(data, extra, r.cfg.caCerts); err != nil {
			os.RemoveAll(dir)
			errs = append(errs, err)
			continue
		}
		r.logf("trusting the deployment's CA (%s): %s, %s", envCACerts, f.bundle, f.extra)
		return f, nil
	}
	return caFiles{}, fmt.Errorf("no directory to write the CA's files in: %w", errors.Join(errs...))
}

// write writes bundle.pem (base, then ca) and extra.pem (extra, then ca).
func (f caFiles) write(base, extra, ca []byte) error {
	if err := writeFile(f.bundle, joinPEM(base, ca), 0o644); err != nil {
		return err
	}
	return writeFile(f.extra, joinPEM(extra, ca), 0o644)
}

// remove removes the files, once the agent they were written for ended.
func (f caFiles) remove() error {
	if f.dir == "" {
		return nil
	}
	return os.RemoveAll(f.dir)
}

// env returns environ with the clients' CA variables naming the files and
// BERTH_CA_CERTS, whose work is done, left out; environ itself when there
// is no CA to trust.
func (f caFiles) env(environ []string) []string {
	if f.dir == "" {
		return environ
	}
	set := append(bundleVars(), envNodeCA)
	out := make([]string, 0, len(environ)+len(set))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name != envCACerts && !slices.Contains(set, name) {
			out = append(out, kv)
		}
	}
	for _, name := range bundleVars() {
		out = append(out, name+"="+f.bundle)
	}
	return append(out, envNodeCA+"="+f.extra)
}

// baseTrustStore is the trust store bundle.pem starts with, and its name:
// the file SSL_CERT_FILE names when it can be read (the image chose it),
// else the first of stores that can be. "" when none can.
func baseTrustStore(sslCertFile string, stores []string) (string, []byte) {
	for _, name := range slices.Concat([]string{sslCertFile}, stores) {
		if name == "" {
			continue
		}
		if data, err := readTrustFile(name); err == nil {
			return name, data
		}
	}
	return "", nil
}

// readTrustFile reads a file of certificates; a directory, a FIFO or a
// device is none.
func readTrustFile(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	return os.ReadFile(name)
}

// joinPEM is a followed by b, on a line of its own.
func joinPEM(a, b []byte) []byte {
	if len(a) > 0 && !bytes.HasSuffix(a, []byte("\n")) {
		a = append(a[:len(a):len(a)], '\n')
	}
	return slices.Concat(a, b)
}
