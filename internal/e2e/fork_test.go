package e2e_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// TestFork forks a running engineer sandbox on the isolated tier (gVisor)
// into two, through the CLI, and looks at each fork over ssh (the real
// OpenSSH client through the gateway's tunnel): its loop is the source's
// process, counting on from where the source stood at the save; its home
// is a copy of the source's; a new ssh session is told the fork's own
// name and a key of its own; the source's loop went on. Then each writes
// its own file and the three differ. The source's audit log names the
// forks; terminating all three leaves no checkpoint, volume or save.
func TestFork(t *testing.T) {
	w := newIsolatedWorld(t, "1Gi")
	g, alice := w.g, w.alice
	src, sh := w.sandbox(t, "origin")
	sh(`setsid sh -c 'i=0; while :; do i=$((i+1)); echo "$$ $i" > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
echo origin > ~/mine`)
	in := func(name string) func(string) string {
		return func(command string) string {
			t.Helper()
			return strings.TrimSpace(alice.run(berthBin, "sandbox", "ssh", name, "-i", alice.key, "--", command))
		}
	}
	count := func(sh func(string) string) (string, int) {
		t.Helper()
		f := strings.Fields(sh("cat /tmp/count"))
		if len(f) != 2 {
			t.Fatalf("/tmp/count holds %q", f)
		}
		n, _ := strconv.Atoi(f[1])
		return f[0], n
	}
	waitFor(t, "the loop counts", 10*time.Second, func() bool { _, n := count(sh); return n > 10 })
	pid, before := count(sh)
	srcKey := sh(`echo "$BERTH_API_KEY"`)

	out := alice.run(berthBin, "sandbox", "fork", "origin", "copy", "--count", "2", "-o", "json")
	forks := decodeSandboxes(t, out)
	if len(forks) != 2 || forks[0].Name != "copy-1" || forks[1].Name != "copy-2" {
		t.Fatalf("fork made %q, want copy-1 and copy-2", out)
	}
	_, after := count(sh)
	forked := time.Now()
	keys := map[string]string{"origin": srcKey}
	for _, f := range forks {
		f = g.waitState(alice.api, f.ID, "running", 2*time.Minute)
		fsh := in(f.Name)
		fpid, n := count(fsh)
		// The fork's loop counted on from the save (which the source's
		// count after the fork passed) every 50 ms or slower since its
		// restore, which came after the fork returned.
		most := after + int(time.Since(forked)/(50*time.Millisecond)) + 10
		if fpid != pid || n < before || n > most {
			t.Errorf("%s's loop is pid %s at %d; want the source's pid %s, from between %d and %d", f.Name, fpid, n, pid, before, most)
		}
		waitFor(t, f.Name+"'s loop counts on", 10*time.Second, func() bool { p, m := count(fsh); return p == pid && m > n+5 })
		if got := fsh("cat ~/mine"); got != "origin" {
			t.Errorf("%s's ~/mine = %q, want the source's", f.Name, got)
		}
		if got := fsh(`echo "$BERTH_SANDBOX_NAME $BERTH_SANDBOX_ID"`); got != f.Name+" "+f.ID {
			t.Errorf("a new session in %s is told %q, want %q", f.Name, got, f.Name+" "+f.ID)
		}
		key := fsh(`echo "$BERTH_API_KEY"`)
		for name, k := range keys {
			if key == "" || key == k {
				t.Errorf("%s's sessions hold the key of %s", f.Name, name)
			}
		}
		keys[f.Name] = key
		fsh("echo " + f.Name + " > ~/mine")
	}
	if p, n := count(sh); p != pid || n <= after {
		t.Errorf("the source's loop is pid %s at %d after the fork; want pid %s past %d", p, n, pid, after)
	}
	for name, want := range map[string]string{"origin": "origin", "copy-1": "copy-1", "copy-2": "copy-2"} {
		if got := in(name)("cat ~/mine"); got != want {
			t.Errorf("%s's ~/mine = %q, want %q", name, got, want)
		}
	}
	audit := string(g.berth("audit", "--sandbox", src.ID))
	if !strings.Contains(audit, "sandbox.fork") || !strings.Contains(audit, "forked into copy-1, copy-2") {
		t.Errorf("the source's audit log does not name its forks:\n%s", audit)
	}

	for _, name := range []string{"origin", "copy-1", "copy-2"} {
		alice.run(berthBin, "sandbox", "terminate", name)
	}
	for _, sb := range append(forks, src) {
		machine := "berth-" + sb.ID
		if _, err := os.Stat(filepath.Join(g.root, "checkpoints", machine)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's checkpoint directory outlived its terminate (%v)", sb.Name, err)
		}
		if err := podmanOn(g.root, "volume", "exists", machine).Run(); err == nil {
			t.Errorf("%s's volume outlived its terminate", sb.Name)
		}
	}
}

// decodeSandboxes reads the sandboxes a command printed with -o json: a
// list, or the API's list object.
func decodeSandboxes(t *testing.T, out string) []api.Sandbox {
	t.Helper()
	var list []api.Sandbox
	if err := json.Unmarshal([]byte(out), &list); err == nil {
		return list
	}
	var obj api.SandboxList
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not a list of sandboxes: %v\n%s", err, out)
	}
	return obj.Sandboxes
}
