package entrypoint_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/handoff"
)

// TestHandoffServesInetd: an engineer sandbox told of the gateway's
// handoff socket keeps berth-init as sshd's parent instead of exec'ing
// sshd, connects to the socket, and serves each client's socket it is
// handed with `sshd -i` (here a shell stands in for sshd, reading and
// writing the very socket); once that process is reaped, the gateway
// hears the connection ended. Nothing start-only reaches the server's
// environment.
func TestHandoffServesInetd(t *testing.T) {
	needCommand(t, "ssh-keygen")
	hub := handoff.NewHub(t.TempDir(), slog.New(slog.DiscardHandler))
	t.Cleanup(hub.Close)
	dir, err := hub.Open("berth-sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	vars := engineerVars()
	vars[handoff.EnvSocket] = filepath.Join(dir, handoff.SocketName)
	h := newHarness(t, vars)
	e := h.env()
	conf := filepath.Join(h.home, ".sshd", "sshd_config")

	var listener []string
	served := make(chan *exec.Cmd, 1)
	e.Start = func(c *exec.Cmd) error {
		if slices.Contains(c.Args, "-D") {
			listener = c.Args // sshd on its port: not run here
			return nil
		}
		if diff := cmp.Diff([]string{"/usr/sbin/sshd", "-i", "-e", "-f", conf}, c.Args); diff != "" {
			t.Errorf("the handed connection's server (-want +got):\n%s", diff)
		}
		for _, kv := range c.Env {
			if strings.HasPrefix(kv, "BERTH_GIT_TOKEN=") || strings.HasPrefix(kv, "BERTH_TASK=") {
				t.Errorf("the server's environment has start-only %s", kv)
			}
		}
		// A stand-in speaks first, as sshd does, then echoes a line.
		c.Path, c.Args = "/bin/sh", []string{"sh", "-c", `echo SSH-2.0-stand-in; read l; echo "got $l"`}
		if err := c.Start(); err != nil {
			return err
		}
		served <- c
		return nil
	}
	supervised := false
	e.Supervise = func(sshd *exec.Cmd, reaped func(int)) int {
		supervised = true
		if reaped == nil {
			t.Fatal("supervised without being told whom to tell of reaped processes")
		}
		deadline := time.Now().Add(10 * time.Second)
		for !hub.Ready("berth-sbx_1") {
			if time.Now().After(deadline) {
				t.Fatalf("berth-init never connected to the gateway's socket; stderr:\n%s", h.stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		client, server := tcpPair(t)
		f, err := server.File()
		if err != nil {
			t.Fatal(err)
		}
		server.Close()
		defer f.Close()
		ended, err := hub.Give("berth-sbx_1", f)
		if err != nil {
			t.Fatalf("give: %v", err)
		}
		br := bufio.NewReader(client)
		if line, err := br.ReadString('\n'); err != nil || line != "SSH-2.0-stand-in\n" {
			t.Errorf("the client read %q, %v; want the server's greeting", line, err)
		}
		io.WriteString(client, "hello\n")
		if line, _ := br.ReadString('\n'); line != "got hello\n" {
			t.Errorf("the client read %q, want the server's echo", line)
		}
		c := <-served
		_ = c.Wait() // PID 1's reaping
		select {
		case <-ended:
			t.Fatal("the gateway heard of the end before berth-init reaped the server")
		default:
		}
		reaped(c.Process.Pid)
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the gateway never heard that the connection ended")
		}
		return 0
	}
	if code := entrypoint.Main([]string{"/usr/local/bin/berth-init"}, e); code != 0 || !supervised {
		t.Fatalf("Main = %d, supervised %v; stderr:\n%s", code, supervised, h.stderr.String())
	}
	if len(h.execs) != 0 {
		t.Errorf("exec'd %v: berth-init must stay to take connections over", h.execs)
	}
	if diff := cmp.Diff([]string{"/usr/sbin/sshd", "-D", "-e", "-f", conf}, listener); diff != "" {
		t.Errorf("sshd on its port (-want +got):\n%s", diff)
	}
}

// tcpPair is both ends of one loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}
