package cli_test

import (
	"bytes"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/cli"
)

// TestVersion: berth version prints the client's version and, when the
// gateway answers, the gateway's with its commit; offline it says the
// gateway is not reachable and still succeeds. --version prints the
// client's alone.
func TestVersion(t *testing.T) {
	g := newEngineerGateway(t)
	code, out, errs := g.berth(t, "alice", "version")
	if code != 0 {
		t.Fatalf("version exited %d: %s", code, errs)
	}
	wantLines(t, "version", out, `^client: +berth \S+`,
		`^gateway: +berth 9\.9\.9-test \(commit 0123456789ab\) at `+regexp.QuoteMeta(g.url)+` \(driver fake\)$`)
	code, out, _ = g.berth(t, "alice", "--version")
	if code != 0 || !regexp.MustCompile(`^berth \S+`).MatchString(out) || strings.Contains(out, "9.9.9") {
		t.Errorf("--version exited %d: %q", code, out)
	}

	off := offline(t)
	code, out, errs = berthAt(t, off, "version")
	if code != 0 {
		t.Fatalf("offline version exited %d: %s", code, errs)
	}
	wantLines(t, "offline version", out, `^client: +berth \S+`)
	wantLines(t, "offline version stderr", errs, `^gateway: cannot reach the gateway at `+regexp.QuoteMeta(off)+`: nothing listens there \(connection refused\)$`,
		`^\(is berth serve running there\? The address comes from --url, else BERTH_URL, else the file berth login wrote\)$`)
}

// TestCompletion: shell completion offers the gateway's sandbox, class,
// project and runner names, and offline offers nothing, quietly.
func TestCompletion(t *testing.T) {
	g := newEngineerGateway(t)
	if code, _, errs := g.berth(t, "alice", "sandbox", "create", "dev", "--ssh-key", g.keyFile); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	for _, tt := range []struct {
		args       []string
		want, nope []string
	}{
		{[]string{"sandbox", "show", ""}, []string{"dev"}, nil},
		{[]string{"sandbox", "terminate", ""}, []string{"dev"}, nil},
		{[]string{"sandbox", "ssh", ""}, []string{"dev"}, nil},
		{[]string{"sandbox", "create", "new", "--class", ""}, []string{"standard"}, nil},
		{[]string{"sandbox", "create", "new", "--project", ""}, []string{"default"}, nil},
		{[]string{"sandbox", "create", "new", "--runner", ""}, []string{"claude-code", "codex", "opencode", "gemini", "pi"}, []string{"cursor"}},
	} {
		code, out, errs := g.berth(t, "alice", append([]string{"__complete"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("complete %v exited %d: %s", tt.args, code, errs)
		}
		got := strings.Split(strings.TrimSpace(out), "\n")
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("complete %v = %q, want %s among them", tt.args, got, w)
			}
		}
		for _, n := range tt.nope {
			if slices.Contains(got, n) {
				t.Errorf("complete %v = %q offers %s", tt.args, got, n)
			}
		}
	}
	code, out, errs := berthAt(t, offline(t), "__complete", "sandbox", "show", "")
	if code != 0 || strings.TrimSpace(out) != ":4" || strings.Contains(errs, "refused") {
		t.Errorf("offline completion exited %d, stdout %q, stderr %q; want nothing offered, quietly", code, out, errs)
	}
}

// offline is the address of a gateway that is not there.
func offline(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

// berthAt runs the command line against url with no key.
func berthAt(t *testing.T, url string, args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	env := map[string]string{"BERTH_URL": url}
	code := cli.Main(t.Context(), args, cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
		Getenv: func(k string) string { return env[k] }, HTTP: &http.Client{Timeout: 5 * time.Second}, Now: time.Now})
	return code, out.String(), errs.String()
}
