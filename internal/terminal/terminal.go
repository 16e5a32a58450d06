// Package terminal is the web panel's terminal (issue 18): the gateway,
// as an SSH client, opens a shell with a pseudo-terminal in a sandbox's own
// sshd, over a connection the way in (package reach) dialled after it
// decided the caller may get inside.
//
// The gateway holds no user's key (those stay on their laptops), so it
// signs in with a certificate of its own: a CA whose private half only the
// gateway holds (a file in its data directory) signs, for each terminal, a
// fresh ed25519 key valid for one minute and for one principal,
// "berth-terminal-<sandbox id>". Every engineer sandbox's authorized_keys
// trusts the CA for that principal alone, with restrict,pty (no
// forwarding, no agent, no X11, no ~/.ssh/rc): a certificate for one
// sandbox opens no other, and one that leaks is useless a minute later.
// Who may open a terminal is decided before any of this, by reach.Connect:
// the owner and operators; an administrator refused and audited.
//
// The host key is not pinned, as in the CLI's ssh configuration: the
// address is the driver's, on its own network, and the session is the
// gateway's own.
package terminal

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// User is the sandbox image's user, whom the terminal signs in as.
const User = "berth"

// CA signs the terminal's certificates.
type CA struct {
	signer ssh.Signer
	now    func() time.Time
}

// LoadCA reads the CA's private key from path, making one (0600, its
// directory 0700) when there is none yet. Replicas must share the file:
// a sandbox trusts the CA it was started with.
func LoadCA(path string) (*CA, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = newKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("terminal CA: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("terminal CA %s: %w", path, err)
	}
	return &CA{signer: signer, now: time.Now}, nil
}

func newKey(path string) ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "berth terminal CA")
	if err != nil {
		return nil, err
	}
	b := pem.EncodeToMemory(blk)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// O_EXCL: of two gateways starting at once on one directory, the
	// second reads the first's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return b, f.Close()
}

// principal is the one name a sandbox's certificates carry.
func principal(sandbox string) string { return "berth-terminal-" + sandbox }

// AuthorizedKey is the authorized_keys line that lets the terminal into
// sandbox: the CA, for that sandbox's principal only, restricted to a
// shell with a pseudo-terminal.
func (c *CA) AuthorizedKey(sandbox string) string {
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(c.signer.PublicKey())))
	return fmt.Sprintf("cert-authority,principals=%q,restrict,pty %s berth-terminal", principal(sandbox), key)
}

// certificate is a fresh key and its certificate for sandbox, valid from a
// minute ago (clocks differ) for one minute past now.
func (c *CA) certificate(sandbox string) (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	now := c.now()
	cert := &ssh.Certificate{
		Key:             key.PublicKey(),
		CertType:        ssh.UserCert,
		KeyId:           "berth terminal " + sandbox,
		ValidPrincipals: []string{principal(sandbox)},
		ValidAfter:      uint64(now.Add(-time.Minute).Unix()),
		ValidBefore:     uint64(now.Add(time.Minute).Unix()),
		Permissions:     ssh.Permissions{Extensions: map[string]string{"permit-pty": ""}},
	}
	if err := cert.SignCert(rand.Reader, c.signer); err != nil {
		return nil, err
	}
	return ssh.NewCertSigner(cert, key)
}

// Size is a terminal's size in characters.
type Size struct{ Cols, Rows int }

// Session is a shell in a sandbox: what is written to it is typed, what
// is read from it is the terminal's output.
type Session struct {
	client  *ssh.Client
	session *ssh.Session
	in      io.WriteCloser
	out     io.Reader
}

// Open signs in to the sshd at the other end of conn (sandbox's) and
// starts its user's login shell on a pseudo-terminal of size. conn is the
// session's from then on: Close closes it.
func (c *CA) Open(ctx context.Context, conn net.Conn, sandbox string, size Size) (*Session, error) {
	signer, err := c.certificate(sandbox)
	if err != nil {
		return nil, fmt.Errorf("terminal: certificate: %w", err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, "sandbox", &ssh.ClientConfig{
		User:            User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // see the package's comment
		Timeout:         30 * time.Second,
	})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("terminal: sign in to the sandbox's sshd: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	client := ssh.NewClient(cc, chans, reqs)
	s, err := open(client, size)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return s, nil
}

func open(client *ssh.Client, size Size) (*Session, error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	in, err := sess.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := sess.StdoutPipe() // a pty's stderr is its stdout
	if err != nil {
		return nil, err
	}
	if err := sess.RequestPty("xterm-256color", clamp(size.Rows), clamp(size.Cols), ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
		return nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	if err := sess.Shell(); err != nil {
		return nil, fmt.Errorf("shell: %w", err)
	}
	return &Session{client: client, session: sess, in: in, out: out}, nil
}

// clamp keeps a size the browser sent within what a terminal may be.
func clamp(n int) int { return min(max(n, 1), 1000) }

// Write types p.
func (s *Session) Write(p []byte) (int, error) { return s.in.Write(p) }

// Read reads the terminal's output; io.EOF when the shell has ended.
func (s *Session) Read(p []byte) (int, error) { return s.out.Read(p) }

// Resize tells the shell its terminal's new size.
func (s *Session) Resize(size Size) error {
	return s.session.WindowChange(clamp(size.Rows), clamp(size.Cols))
}

// Close ends the shell and the connection.
func (s *Session) Close() error {
	s.session.Close()
	return s.client.Close()
}
