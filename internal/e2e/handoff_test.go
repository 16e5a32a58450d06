package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTunnelHandedOver: on podman the gateway hands a client's connection
// to the sandbox's own sshd (package handoff) instead of copying it. With
// the real ssh and a podman sandbox: sessions work and the gateway's log
// says each was handed over; the sandbox cannot change the directory of
// the gateway's socket; a gateway that stops cuts a handed session off,
// as it cuts the copied ones; once it is back, the sandbox's berth-init
// connects again and the next session is handed over too; a terminated
// sandbox leaves no directory behind.
func TestTunnelHandedOver(t *testing.T) {
	g := startGateway(t)
	alice := g.newMember(t, "alice")
	sb := alice.engineer(g, "dev")
	alice.run(berthBin, "sandbox", "config")
	ssh := func(args ...string) string {
		return alice.run("ssh", append(alice.sshArgs(), args...)...)
	}
	handed := func() int { return strings.Count(g.log.String(), `"handed":true`) }

	// The socket is there for berth-init to connect to; nothing else in
	// the directory can be made, replaced or removed by the sandbox.
	got := strings.TrimSpace(ssh("berth-dev", `test -S /run/berth-handoff/sshd.sock && echo socket;
		touch /run/berth-handoff/x 2>/dev/null && echo wrote;
		rm -f /run/berth-handoff/sshd.sock 2>/dev/null; test -S /run/berth-handoff/sshd.sock && echo kept;
		ln -s /etc/passwd /run/berth-handoff/y 2>/dev/null && echo linked; true`))
	if got != "socket\nkept" {
		t.Errorf("inside the sandbox, the handoff directory: %q, want the socket there and nothing changed", got)
	}
	eventually(t, 10*time.Second, "the gateway to log a handed-over tunnel", func() bool { return handed() >= 1 })
	if strings.Contains(g.log.String(), `"handed":false`) {
		t.Errorf("a tunnel was copied, not handed over:\n%s", g.log.String())
	}

	// The gateway stops: an open session through it ends, though the
	// sandbox and its sshd run on.
	bg := exec.Command("ssh", append(alice.sshArgs(), "berth-dev", "sleep 120")...)
	bg.Env = alice.env
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- bg.Wait() }()
	g.waitConnections(alice.api, sb.ID, 1, 10*time.Second)
	g.stop()
	select {
	case err := <-ended:
		if err == nil {
			t.Errorf("the session cut off by the gateway's stop exited 0")
		}
	case <-time.After(20 * time.Second):
		_ = bg.Process.Kill()
		t.Fatalf("a handed session outlived the gateway's stop by 20s")
	}

	// Back again on the same data: berth-init finds the new socket.
	g.start()
	before := handed()
	deadline := time.Now().Add(20 * time.Second)
	for handed() == before {
		if out := strings.TrimSpace(ssh("berth-dev", "echo ok")); out != "ok" {
			t.Fatalf("ssh after the gateway's restart: %q", out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tunnel was handed over in 20s after the gateway's restart:\n%s", g.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	dir := filepath.Join(g.dataDir, "handoff", "berth-"+sb.ID)
	if !exists(dir) {
		t.Fatalf("no handoff directory at %s", dir)
	}
	alice.run(berthBin, "sandbox", "terminate", "dev")
	g.waitEnded(sb.ID, time.Minute)
	eventually(t, 30*time.Second, "the terminated sandbox's handoff directory to go", func() bool { return !exists(dir) })
}

// exists reports whether path is there.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
