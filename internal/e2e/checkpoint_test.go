package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// TestSuspendWithMemory suspends an engineer sandbox on the isolated tier
// (gVisor) and resumes it: its processes go on where they were. A loop
// started over ssh counts into a file and a Python HTTP server counts the
// requests it answered; after suspend and resume through the CLI the loop
// counts on from where it was (not from 0, and as the same process) and
// the server, never restarted, answers with its count going on; ssh is
// the real OpenSSH client through the gateway's tunnel before and after. show says
// how the sandbox suspends and how much memory was saved; the audit log
// says it was saved and restored; terminate leaves no checkpoint.
func TestSuspendWithMemory(t *testing.T) {
	w := newIsolatedWorld(t, "1Gi")
	g, alice, ctx := w.g, w.alice, context.Background()
	sb, sh := w.sandbox(t, "warm")
	if sb.Suspend != api.SuspendMemory {
		t.Errorf("an isolated sandbox suspends by %q, want %q", sb.Suspend, api.SuspendMemory)
	}
	// A loop and a server that outlive the ssh session that starts them.
	sh(`setsid sh -c 'i=0; while :; do i=$((i+1)); echo "$$ $i" > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
cat > /tmp/serve.py <<'EOF'
import http.server, os
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        body = ("%d %d\n" % (os.getpid(), n)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
EOF
setsid python3 /tmp/serve.py </dev/null >/dev/null 2>&1 &`)
	var served string
	waitFor(t, "the server answers", 20*time.Second, func() bool {
		served = sh("curl -sf http://127.0.0.1:8000/ || true")
		return served != ""
	})
	count := func() (string, int) {
		t.Helper()
		f := strings.Fields(sh("cat /tmp/count"))
		if len(f) != 2 {
			t.Fatalf("/tmp/count holds %q", f)
		}
		n, _ := strconv.Atoi(f[1])
		return f[0], n
	}
	waitFor(t, "the loop counts", 10*time.Second, func() bool { _, n := count(); return n > 20 })
	pid, before := count()
	counted := time.Now()

	out := alice.run(berthBin, "sandbox", "suspend", "warm")
	suspending := time.Since(counted)
	if !strings.Contains(out, "suspended with its memory") {
		t.Errorf("suspend said %q, want that its memory was saved", out)
	}
	var shown api.Sandbox
	if err := json.Unmarshal([]byte(alice.run(berthBin, "sandbox", "show", "warm", "-o", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.State != api.StateSuspended || shown.CheckpointBytes <= 0 {
		t.Fatalf("after suspend: %s with %d bytes saved, want suspended with its memory", shown.State, shown.CheckpointBytes)
	}
	checkpoints := filepath.Join(g.root, "checkpoints", "berth-"+sb.ID)
	if _, err := os.Stat(filepath.Join(checkpoints, "image", "checkpoint.img")); err != nil {
		t.Errorf("no checkpoint beside the volume: %v", err)
	}
	time.Sleep(2 * time.Second) // a loop started again would count past 40 by now

	resumed := time.Now()
	alice.run(berthBin, "sandbox", "resume", "warm")
	pid2, after := count()
	// The loop counts every 50 ms or slower while it runs: until the save,
	// and from the restore until it is read. How far it can have gone is
	// bound by those times, not by a count a loaded machine outlasts.
	most := before + int((suspending+time.Since(resumed))/(50*time.Millisecond)) + 10
	if pid2 != pid || after < before || after > most {
		t.Errorf("after resume the loop is pid %s at %d; want pid %s going on from between %d and %d", pid2, after, pid, before, most)
	}
	waitFor(t, "the restored loop counts on", 10*time.Second, func() bool { p, n := count(); return p == pid && n > after+5 })
	again := sh("curl -sf http://127.0.0.1:8000/")
	sf, af := strings.Fields(served), strings.Fields(again)
	if len(sf) != 2 || len(af) != 2 || af[0] != sf[0] || af[1] == "1" {
		t.Errorf("the server answered %q before suspend and %q after: want the same process, its count going on", served, again)
	}
	shown = api.Sandbox{}
	if err := json.Unmarshal([]byte(alice.run(berthBin, "sandbox", "show", "warm", "-o", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.State != api.StateRunning || shown.CheckpointBytes != 0 {
		t.Errorf("after resume: %s with %d bytes saved (%s), want running with none", shown.State, shown.CheckpointBytes, shown.Reason)
	}
	if _, err := os.Stat(filepath.Join(checkpoints, "image")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkpoint outlived its restore (%v)", err)
	}
	audit := string(g.berth("audit", "--sandbox", sb.ID))
	for _, want := range []string{"sandbox.checkpoint", "its memory saved", "sandbox.restore", "restored from its checkpoint"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, audit)
		}
	}

	// Suspended again and terminated: nothing of the checkpoint is left.
	alice.run(berthBin, "sandbox", "suspend", "warm")
	if _, err := os.Stat(filepath.Join(checkpoints, "image")); err != nil {
		t.Errorf("no checkpoint after the second suspend: %v", err)
	}
	alice.run(berthBin, "sandbox", "terminate", "warm")
	if _, err := os.Stat(checkpoints); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("terminate left the checkpoint (%v)", err)
	}

	// A sandbox on runc says it suspends by stopping.
	plain, err := alice.api.CreateSandbox(ctx, api.CreateSandbox{Name: "plain", Class: "plain", SSHKeys: []string{w.pub}})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Suspend != api.SuspendStop {
		t.Errorf("a runc sandbox suspends by %q, want %q", plain.Suspend, api.SuspendStop)
	}
}

// TestSuspendWithMemoryGatewayKilled: a gateway killed with SIGKILL while
// it saves a sandbox's memory leaves the sandbox suspended with its
// volume, and the next gateway's resume starts it from its volume: its
// home kept, nothing of the half-made checkpoint left.
func TestSuspendWithMemoryGatewayKilled(t *testing.T) {
	w := newIsolatedWorld(t, "3Gi")
	g, alice := w.g, w.alice
	sb, sh := w.sandbox(t, "big")
	// 1.5 GiB in its memory makes a checkpoint of a couple of seconds;
	// a file in the home volume is what a cold start keeps.
	sh("echo kept > ~/mine; head -c 1610612736 /dev/urandom > /var/tmp/fill")

	suspend := exec.Command(berthBin, "sandbox", "suspend", "big")
	suspend.Env = alice.env
	if err := suspend.Start(); err != nil {
		t.Fatal(err)
	}
	checkpoints := filepath.Join(g.root, "checkpoints", "berth-"+sb.ID)
	waitFor(t, "the checkpoint under way", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(checkpoints, "image"))
		return err == nil
	})
	g.kill()
	_ = suspend.Wait()
	g.start()

	sb = g.waitState(alice.api, sb.ID, "suspended", 30*time.Second)
	if sb.CheckpointBytes != 0 {
		t.Errorf("a checkpoint cut off by the gateway's death is recorded: %d bytes", sb.CheckpointBytes)
	}
	alice.run(berthBin, "sandbox", "resume", "big")
	if got := sh("cat ~/mine; test -e /var/tmp/fill && echo memory || echo cold"); got != "kept\ncold" {
		t.Errorf("after the resume the sandbox says %q, want its home kept and a cold start", got)
	}
	if _, err := os.Stat(filepath.Join(checkpoints, "image")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cut-off checkpoint is still there after the resume (%v)", err)
	}
}

// isolatedWorld is a gateway whose isolated tier is runsc, with the class
// isolated of the memory given and a runc class, plain, and alice, a member
// with an ssh key (pub).
type isolatedWorld struct {
	g     *gateway
	alice *person
	pub   string
}

func newIsolatedWorld(t *testing.T, memory string) isolatedWorld {
	t.Helper()
	runsc := os.Getenv("BERTH_TEST_RUNSC")
	if runsc == "" {
		t.Skip("set BERTH_TEST_RUNSC to a runsc binary to suspend with memory on the isolated tier")
	}
	g := startGateway(t, "BERTH_SANDBOX_RUNTIME_ISOLATED="+runsc)
	file := `sandboxes:
  - name: isolated
    image: localhost/berth-sandbox:latest
    isolation: isolated
    cpu: "1"
    memory: ` + memory + `
    purposes: [engineer]
  - name: plain
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    purposes: [engineer]
`
	if _, err := g.operator.ApplyClasses(context.Background(), "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	alice := g.newMember(t, "alice")
	pub, err := os.ReadFile(alice.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return isolatedWorld{g: g, alice: alice, pub: strings.TrimSpace(string(pub))}
}

// sandbox makes alice's isolated sandbox called name and waits for it to
// run; sh runs a command in it with the real OpenSSH client through the
// gateway's tunnel, as its owner.
func (w isolatedWorld) sandbox(t *testing.T, name string) (api.Sandbox, func(command string) string) {
	t.Helper()
	sb, err := w.alice.api.CreateSandbox(context.Background(), api.CreateSandbox{Name: name, Class: "isolated", SSHKeys: []string{w.pub}})
	if err != nil {
		t.Fatal(err)
	}
	sb = w.g.waitState(w.alice.api, sb.ID, "running", 2*time.Minute)
	return sb, func(command string) string {
		t.Helper()
		return strings.TrimSpace(w.alice.run(berthBin, "sandbox", "ssh", name, "-i", w.alice.key, "--", command))
	}
}
