package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/client"
)

// TestMain makes the test binary double as the berth command, so scripts
// run it as a user does. It stops on an interrupt as cmd/berth does (it is
// cli.Run), which is how testscript ends a background `berth serve` at the
// end of a script.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"berth": func() { os.Exit(cli.Run(os.Args[1:], cli.OSEnv())) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script gets its own home,
// data directory and port, with the fake driver, so a script can start its
// own gateway with `exec berth serve &` and `waitgateway`.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup:               setup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitgateway": waitGateway,
			"setkey":      setKey,
			"jsonget":     jsonGet,
			"perm":        perm,
			"exits":       exits,
			"enableclass": enableClass,
			"mksandboxes": mkSandboxes,
		},
	})
}

func setup(e *testscript.Env) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	home := filepath.Join(e.WorkDir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	// testscript passes no XDG_* variable on, so login writes
	// $HOME/.config/berth/config.json.
	e.Setenv("HOME", home)
	e.Setenv("BERTH_DATA_DIR", filepath.Join(e.WorkDir, "data"))
	e.Setenv("BERTH_SANDBOX_DRIVER", "fake")
	e.Setenv("BERTH_ADDR", "127.0.0.1:"+port)
	e.Setenv("BERTH_URL", "http://127.0.0.1:"+port)
	e.Setenv("BERTH_SWEEP_INTERVAL", "1s")
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		return err
	}
	e.Setenv("EXAMPLES", examples) // the repository's examples, as a user copies them
	if os.Getenv("GORACE") == "" {
		// A race-enabled binary sleeps a second at exit by default; every
		// berth command of a script would pay it.
		e.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	return nil
}

// freePort returns a port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// waitGateway waits until GET $BERTH_URL/healthz answers 200, for at most
// 10 seconds.
//
//	waitgateway
func waitGateway(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: waitgateway")
	}
	url := ts.Getenv("BERTH_URL") + "/healthz"
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("gateway at %s not healthy after 10s: %s", url, last)
}

var keyRE = regexp.MustCompile(`berth_[a-z0-9]{16}_[A-Za-z0-9]+`)

// setKey sets $NAME to the last berth key printed on the previous
// command's stdout and, given FILE, writes the key to it as one line (for
// `stdin FILE`).
//
//	setkey NAME [FILE]
func setKey(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: setkey NAME [FILE]")
	}
	keys := keyRE.FindAllString(ts.ReadFile("stdout"), -1)
	if len(keys) == 0 {
		ts.Fatalf("no berth_ key on stdout")
	}
	key := keys[len(keys)-1]
	ts.Setenv(args[0], key)
	if len(args) == 2 {
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(key+"\n"), 0o600))
	}
}

// jsonGet sets $NAME to the value at PATH in the JSON of the previous
// command's stdout. PATH is dot-separated object keys and array indices,
// such as key.secret or 0.id; a value that is not a string is set as JSON.
// Given FILE, it also writes the value to it as one line (for `stdin FILE`).
//
//	jsonget PATH NAME [FILE]
func jsonGet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: jsonget PATH NAME [FILE]")
	}
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile("stdout")), &v); err != nil {
		ts.Fatalf("stdout is not JSON: %v", err)
	}
	for _, step := range strings.Split(args[0], ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[step]
			if !ok {
				ts.Fatalf("%s: no field %q", args[0], step)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("%s: no element %q in an array of %d", args[0], step, len(x))
			}
			v = x[i]
		default:
			ts.Fatalf("%s: cannot step into %v with %q", args[0], v, step)
		}
	}
	s, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		ts.Check(err)
		s = string(b)
	}
	ts.Setenv(args[1], s)
	if len(args) == 3 {
		ts.Check(os.WriteFile(ts.MkAbs(args[2]), []byte(s+"\n"), 0o600))
	}
}

// perm checks a file's permission bits, given in octal.
//
//	[!] perm MODE FILE
func perm(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: perm MODE FILE")
	}
	want, err := strconv.ParseUint(args[0], 8, 32)
	if err != nil {
		ts.Fatalf("perm: %q is not an octal mode", args[0])
	}
	fi, err := os.Stat(ts.MkAbs(args[1]))
	ts.Check(err)
	got := fi.Mode().Perm()
	if (got == os.FileMode(want)) == neg {
		ts.Fatalf("%s has mode %s (%#o), want %s%#o", args[1], got, got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}

// exits runs PROG and checks its exit code, where `! exec` only checks
// that it is not 0; stdout and stderr are then checked as after exec.
//
//	exits CODE PROG [ARGS...]
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not an exit code", args[0])
	}
	got := 0
	var ee *exec.ExitError
	switch err := ts.Exec(args[1], args[2:]...); {
	case err == nil:
	case errors.As(err, &ee):
		got = ee.ExitCode()
	default:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// enableClass copies a sandboxes file, enabling the class NAME that it
// shows commented out, as a user does: the "# - name: NAME" line and the
// commented lines under it lose their "# ".
//
//	enableclass SRC NAME DST
func enableClass(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: enableclass SRC NAME DST")
	}
	var out strings.Builder
	indent, found := "", false
	for line := range strings.Lines(ts.ReadFile(args[0])) {
		trimmed := strings.TrimLeft(line, " ")
		lead := line[:len(line)-len(trimmed)]
		switch {
		case strings.TrimSpace(trimmed) == "# - name: "+args[1]:
			indent, found = lead, true
			line = lead + strings.TrimPrefix(trimmed, "# ")
		case indent != "" && lead == indent && strings.HasPrefix(trimmed, "#   "):
			line = lead + strings.TrimPrefix(trimmed, "# ")
		default:
			indent = ""
		}
		out.WriteString(line)
	}
	if !found {
		ts.Fatalf("%s shows no commented-out class %s", args[0], args[1])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[2]), []byte(out.String()), 0o644))
}

// mkSandboxes creates N sandboxes named PREFIX0 to PREFIX<N-1>, one after
// the other, of the class standard with the ssh key in KEYFILE, through
// the API with $BERTH_API_KEY: many sandboxes for a list, without a
// process per create.
//
//	mksandboxes N PREFIX KEYFILE
func mkSandboxes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mksandboxes N PREFIX KEYFILE")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	c := client.New(ts.Getenv("BERTH_URL"), ts.Getenv("BERTH_API_KEY"), nil)
	key := strings.TrimSpace(ts.ReadFile(args[2]))
	for i := range n {
		if _, err := c.CreateSandbox(context.Background(), api.CreateSandbox{Name: fmt.Sprintf("%s%d", args[1], i), Class: "standard",
			SSHKeys: []string{key}}); err != nil {
			ts.Fatalf("create %s%d: %v", args[1], i, err)
		}
	}
}
