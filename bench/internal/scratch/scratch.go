// Package scratch runs the benchmarks' scratch gateways: `berth serve`
// processes on a directory and a database of their own, on loopback.
package scratch

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // Schema's driver

	"berth.dev/berth/internal/api"
)

// Gateway is one `berth serve`.
type Gateway struct {
	URL string
	bin string
	env []string
	cmd *exec.Cmd
	log string // the file of its output
}

// Start runs bin's `berth serve` with dir for its HOME and data, on the
// database dbURL names and a free loopback port, with env added to its
// environment, and returns it once /healthz answers.
func Start(bin, dir, dbURL string, env ...string) (*Gateway, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return StartAt(bin, dir, dbURL, "127.0.0.1", port, env...)
}

// StartAt is Start listening on host:port (host "" is every interface:
// what a gateway needs whose sandboxes reach it on podman's bridge); its
// URL is loopback's.
func StartAt(bin, dir, dbURL, host, port string, env ...string) (*Gateway, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	g := &Gateway{URL: "http://127.0.0.1:" + port, bin: bin, log: filepath.Join(dir, "serve.log")}
	g.env = append(append(os.Environ(),
		"HOME="+dir,
		"BERTH_DATA_DIR="+filepath.Join(dir, "data"),
		"BERTH_DATABASE_URL="+dbURL,
		"BERTH_ADDR="+net.JoinHostPort(host, port),
		"BERTH_URL="+g.URL,
	), env...)
	out, err := os.Create(g.log)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the process has its own copy
	g.cmd = exec.Command(bin, "serve")
	g.cmd.Env, g.cmd.Stdout, g.cmd.Stderr = g.env, out, out
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(g.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g, nil
			}
		}
	}
	g.Stop()
	return nil, fmt.Errorf("gateway on %s did not answer:\n%s", g.URL, g.Output())
}

// PID is the gateway's process id.
func (g *Gateway) PID() int { return g.cmd.Process.Pid }

// Output is what the gateway printed so far.
func (g *Gateway) Output() string {
	b, _ := os.ReadFile(g.log)
	return string(b)
}

// Stop ends the gateway as an operator would (SIGINT), or kills it when
// it has not stopped in 30 s.
func (g *Gateway) Stop() {
	_ = g.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
	}
}

// Bootstrap makes the deployment's first organisation and operator, and
// returns the operator's key.
func (g *Gateway) Bootstrap() (string, error) {
	cmd := exec.Command(g.bin, "admin", "bootstrap", "-o", "json")
	cmd.Env = g.env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	var b api.Bootstrap
	if err := json.Unmarshal(out, &b); err != nil {
		return "", fmt.Errorf("bootstrap: %w: %s", err, out)
	}
	return b.Key.Secret, nil
}

// Schema makes a schema named prefix and a random tail in the database
// pgURL names, and returns a URL whose search_path is it, a connection to
// it, and what drops it.
func Schema(ctx context.Context, pgURL, prefix string) (string, *sql.DB, func(), error) {
	name := prefix + strings.ToLower(rand.Text()[:8])
	admin, err := sql.Open("pgx", pgURL)
	if err != nil {
		return "", nil, nil, err
	}
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		admin.Close()
		return "", nil, nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		admin.Close()
		return "", nil, nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		admin.Close()
		return "", nil, nil, err
	}
	drop := func() {
		db.Close()
		if _, err := admin.Exec(`DROP SCHEMA ` + name + ` CASCADE`); err != nil {
			fmt.Fprintf(os.Stderr, "bench: drop schema %s: %v\n", name, err)
		}
		admin.Close()
	}
	return u.String(), db, drop, nil
}

// LoadAvg is the machine's load over 1, 5 and 15 minutes.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// FreePort is a loopback port nobody listened on a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}
