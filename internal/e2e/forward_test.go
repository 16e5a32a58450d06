package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// TestForwardThroughTheGateway is issue 18's ports on podman: a server the
// engineer starts on 3000 in their sandbox is reached from a local port
// with berth sandbox forward, through the gateway's tunnel, by its owner;
// another member does not find the sandbox, an administrator is refused
// (and audited), and port 80 is out of range; SIGINT ends it with exit 0.
func TestForwardThroughTheGateway(t *testing.T) {
	g := startGateway(t)
	alice := g.newMember(t, "alice")
	bob := g.newMember(t, "bob")
	carol := g.newPerson(t, "carol", "admin")
	sb := alice.engineer(g, "dev")

	// A server of the engineer's on 3000, a static binary sent with scp
	// and started over ssh (the image has no nc or python).
	bin := filepath.Join(alice.home, "portecho")
	build := exec.Command("go", "build", "-o", bin, "./testdata/portecho")
	build.Env = append(alice.env, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build portecho: %v\n%s", err, out)
	}
	alice.run(berthBin, "sandbox", "config", "dev")
	alice.run("scp", append(alice.sshArgs(), "-q", bin, "berth-dev:portecho")...)
	server := exec.Command("ssh", append(alice.sshArgs(), "berth-dev", "exec ./portecho 3000")...)
	server.Env = alice.env
	lines := startLines(t, server)
	if line := lines.next(t, time.Minute); !strings.Contains(line, "listening on [::]:3000") {
		t.Fatalf("portecho in the sandbox: %q", line)
	}

	// The owner forwards any free local port (0) to 3000 and carries
	// bytes both ways, half-close included, over two connections.
	fwd, local := alice.forward(t, "dev", "0:3000")
	for range 2 {
		exchange(t, local)
	}
	// Interrupted, it ends cleanly.
	if err := fwd.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := fwd.wait(t, 30*time.Second); err != nil {
		t.Fatalf("berth sandbox forward after SIGINT: %v (want exit 0)\n%s", err, fwd.stderr.String())
	}
	if fwd.stderr.String() != "" {
		t.Errorf("berth sandbox forward printed errors: %s", fwd.stderr.String())
	}

	// Nothing listening on a port yet is said, and the forward goes on.
	fwd, local = alice.forward(t, "dev", "0:4000")
	closed(t, local, "port 4000 with nothing on it")
	eventually(t, 30*time.Second, "the forward to say port 4000 does not answer", func() bool {
		return strings.Contains(fwd.stderr.String(), "does not answer on port 4000")
	})
	if err := fwd.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := fwd.wait(t, 30*time.Second); err != nil {
		t.Fatalf("berth sandbox forward after SIGTERM: %v (want exit 0)\n%s", err, fwd.stderr.String())
	}

	// Another member does not find alice's sandbox: nothing listens.
	out, err := bob.runErr(berthBin, "sandbox", "forward", sb.ID, "0:3000")
	if err == nil || !strings.Contains(out, "berth: not_found: ") || strings.Contains(out, "Forwarding") {
		t.Errorf("bob forwarding alice's sandbox: %v\n%s", err, out)
	}

	// An administrator sees it; the first connection is refused (and
	// audited) and the command exits 1 saying why.
	refused := func(who *person, spec, want string) {
		t.Helper()
		f, local := who.forward(t, "dev", spec)
		closed(t, local, spec)
		var ee *exec.ExitError
		if err := f.wait(t, 30*time.Second); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%s: berth sandbox forward exited %v, want 1", spec, err)
		}
		if !regexp.MustCompile(want).MatchString(f.stderr.String()) {
			t.Errorf("%s: stderr %q, want %s", spec, f.stderr.String(), want)
		}
	}
	refused(carol, "0:3000", `^berth: forward 127\.0\.0\.1:\d+ -> 3000: forbidden: .*may see sandbox dev but not get inside it`)
	// Out of range: the field and the range are named.
	refused(alice, "0:80", `^berth: forward 127\.0\.0\.1:\d+ -> 80: invalid: .*port: 80 is not reachable: the podman driver reaches ports 1024–65535`)

	carolID := whoami(t, carol).User.ID
	aliceID := whoami(t, alice).User.ID
	events, err := g.operator.Audit(context.Background(), client.AuditOptions{Sandbox: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e api.AuditEvent) bool {
		return e.Action == "shell.open" && e.Outcome == "refused" && e.Actor == carolID && e.Target == "port 3000"
	}) {
		t.Errorf("no refused shell.open of carol's on port 3000 in %+v", events)
	}
	var ok int
	for _, e := range events {
		if e.Action == "shell.open" && e.Outcome == "ok" && e.Actor == aliceID && e.Target == "port 3000" {
			ok++
		}
	}
	if ok != 2 {
		t.Errorf("%d shell.open entries of alice's on port 3000, want her 2 connections: %+v", ok, events)
	}
}

// closed connects to a forward's local end and checks the connection is
// closed without a byte: the gateway refused its tunnel.
func closed(t *testing.T, local, what string) {
	t.Helper()
	c, err := net.Dial("tcp", local)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

// exchange connects to the local end of a forward, reads the sandbox
// server's greeting, sends 1 MiB, half-closes, and reads it all back.
func exchange(t *testing.T, local string) {
	t.Helper()
	c, err := net.Dial("tcp", local)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	greeting, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(greeting, "portecho on ") {
		t.Fatalf("greeting through the forward: %q, %v", greeting, err)
	}
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	go func() {
		_, _ = c.Write(payload)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	back, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(back, payload) {
		t.Fatalf("echo through the forward: %d bytes back, %v; want the %d sent", len(back), err, len(payload))
	}
}

// forwarding is a running berth sandbox forward.
type forwarding struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

// forward starts berth sandbox forward NAME SPEC as the person and returns
// it with the local address its "Forwarding from" line names. It is
// killed when the test ends if still running.
func (p *person) forward(t *testing.T, name, spec string) (*forwarding, string) {
	t.Helper()
	cmd := exec.Command(berthBin, "sandbox", "forward", name, spec)
	cmd.Env, cmd.Dir = p.env, p.home
	f := &forwarding{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = f.stderr
	lines := startLines(t, cmd)
	// The first line is read before anything drains the rest: wait reads
	// the same channel, and started first it could take that line.
	line := lines.next(t, 30*time.Second)
	go func() { f.done <- lines.wait() }()
	m := regexp.MustCompile(`^Forwarding from (127\.0\.0\.1:\d+) -> (\d+)$`).FindStringSubmatch(line)
	if m == nil || !strings.HasSuffix(spec, ":"+m[2]) {
		t.Fatalf("berth sandbox forward %s %s: %q\n%s", name, spec, line, f.stderr.String())
	}
	return f, m[1]
}

// wait waits for the forward to exit.
func (f *forwarding) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(within):
		t.Fatalf("berth sandbox forward still runs after %s\n%s", within, f.stderr.String())
		return nil
	}
}

// lineReader gives a started command's standard output line by line.
type lineReader struct {
	cmd   *exec.Cmd
	lines chan string
}

// startLines starts cmd with its standard output read line by line; the
// command is killed when the test ends.
func startLines(t *testing.T, cmd *exec.Cmd) *lineReader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	l := &lineReader{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			l.lines <- s.Text()
		}
		close(l.lines)
	}()
	return l
}

// next is the next line, or a failure after within.
func (l *lineReader) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-l.lines:
		if !ok {
			t.Fatalf("%s ended without a line", l.cmd.Path)
		}
		return line
	case <-time.After(within):
		t.Fatalf("%s wrote no line within %s", l.cmd.Path, within)
		return ""
	}
}

// wait drains the output and waits for the command.
func (l *lineReader) wait() error {
	for range l.lines {
	}
	return l.cmd.Wait()
}

// whoami is the person's own account.
func whoami(t *testing.T, p *person) api.Whoami {
	t.Helper()
	w, err := p.api.Whoami(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runErr runs a program as the person and returns its output, both
// streams, and its error.
func (p *person) runErr(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = p.env, p.home
	out, err := cmd.CombinedOutput()
	return string(out), err
}
