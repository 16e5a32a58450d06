package internal_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "berth.dev/berth/internal/"

// TestImportDirection keeps the arrows pointing inward (STYLE.md §3): domain
// packages import no adapter, no database and no Kubernetes code; adapters
// do not import each other; the wire types import nothing of ours.
func TestImportDirection(t *testing.T) {
	adapters := []string{"store", "gateway", "client", "cli", "driver/"}
	// The forges themselves, below the forge domain: HTTP (and, for
	// GitHub, JWTs) by nature.
	forges := []string{"forge/github", "forge/gitlab", "forge/local", "forge/rest"}
	rules := []struct {
		pkg    string
		banned []string
	}{
		{"account", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "usage"}, adapters...)},
		{"guardrail", append([]string{"database/sql", "k8s.io/", "net/http", "account", "sandbox"}, adapters...)},
		// sandbox sees forges through the forge domain only: no HTTP, no
		// JWT, none of the forges, the mirrors or the checkouts. Agent runs
		// are one floor up: sandbox calls them through its Runs port, never
		// by name.
		{"sandbox", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/", "net/http", "github.com/golang-jwt/",
			"forge/", "githttp", "workspace", "repository", "agentrun", "reach", "warm", "inference", "modelserver", "usage", "metrics"}, adapters...)},
		// reach is the way into a sandbox, one floor above sandbox (its
		// Activity port): no adapter, no database, no HTTP; the driver's
		// dialling is its Reacher, the tunnel's bytes the gateway's.
		{"reach", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/", "net/http", "github.com/golang-jwt/",
			"forge/", "githttp", "workspace", "repository", "agentrun", "tunnel", "inference", "modelserver", "usage", "metrics"}, adapters...)},
		// sandbox/input checks a create's environment and ssh keys: pure,
		// the standard library and x/crypto/ssh.
		{"sandbox/input", []string{module, "database/sql", "net/http"}},
		// warm is warm pools, one floor above sandbox (its Warm port): no
		// adapter, no database, no HTTP; the driver's pools are its Pools.
		{"warm", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/", "net/http", "github.com/golang-jwt/",
			"forge/", "githttp", "workspace", "repository", "agentrun", "reach", "inference", "modelserver", "usage", "metrics"}, adapters...)},
		// repository is how a sandbox reaches its repository, one floor
		// above sandbox: the forge domain only, no HTTP.
		{"repository", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/", "net/http", "github.com/golang-jwt/",
			"forge/", "githttp", "workspace", "agentrun", "inference", "modelserver", "usage", "metrics"}, adapters...)},
		// agentrun is a domain package above sandbox: its store, driver
		// and checkouts are ports it declares; forges through their domain.
		{"agentrun", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/", "net/http", "github.com/golang-jwt/",
			"forge/", "githttp", "workspace", "repository", "modelserver"}, adapters...)},
		{"usage", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/"}, adapters...)},
		// trigger starts agent runs from forge events and reports their
		// results back, one floor above sandbox and agentrun: forges
		// through their domain, sandboxes through its ports (HTTP only as
		// trigger/event reads a delivery's headers).
		{"trigger", append([]string{"database/sql", "k8s.io/", "github.com/prometheus/", "github.com/golang-jwt/",
			"forge/", "githttp", "workspace", "repository", "agentrun", "inference", "modelserver", "metrics"}, adapters...)},
		// trigger/event reads and verifies webhook deliveries: headers
		// and bodies it is handed, nothing of berth's accounts or
		// sandboxes.
		{"trigger/event", append([]string{"database/sql", "k8s.io/", "account", "sandbox", "agentrun", "trigger/event/eventtest"}, adapters...)},
		// schedule reads cron schedules: the standard library only.
		{"schedule", []string{module, "database/sql", "net/http"}},
		// class is below sandbox: sandbox makes sandboxes of its classes.
		{"class", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "github.com/prometheus/"}, adapters...)},
		{"quantity", append([]string{"database/sql", "account", "sandbox", "guardrail"}, adapters...)},
		{"name", append([]string{"database/sql", "account", "sandbox", "guardrail"}, adapters...)},
		// forge is the domain: addresses, branch names, the Forge
		// interface and the ref policy; the forges are below it.
		{"forge", append([]string{"database/sql", "k8s.io/", "net/http", "github.com/golang-jwt/", "account", "sandbox", "guardrail", "forge/"}, adapters...)},
		{"forge/local", append([]string{"database/sql", "k8s.io/", "net/http", "github.com/golang-jwt/", "account", "sandbox", "guardrail",
			"forge/github", "forge/gitlab", "forge/rest"}, adapters...)},
		{"forge/github", append([]string{"database/sql", "k8s.io/", "account", "sandbox", "guardrail", "forge/gitlab", "forge/local"}, adapters...)},
		{"forge/gitlab", append([]string{"database/sql", "k8s.io/", "github.com/golang-jwt/", "account", "sandbox", "guardrail", "forge/github", "forge/local"}, adapters...)},
		{"forge/rest", []string{module, "database/sql", "github.com/golang-jwt/"}},
		{"audit", []string{module, "database/sql"}},
		// overload is a leaf: the store returns its error, the gateway
		// answers it.
		{"overload", []string{module, "database/sql", "net/http"}},
		// secret is a leaf both the gateway and berth-init import.
		{"secret", []string{module, "database/sql", "net/http"}},
		{"api", []string{module}},
		// paging is a leaf the domain, the store, the gateway and the panel share.
		{"paging", []string{module, "database/sql", "net/http"}},
		{"runner", []string{module, "database/sql", "net/http"}},
		// transcript reads a run's log for people, on runner's parsing.
		{"transcript", append([]string{"database/sql", "net/http", "account", "sandbox", "agentrun"}, adapters...)},
		// inference is pure: the gateway does its HTTP, the store its SQL.
		{"inference", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "modelserver", "github.com/prometheus/"}, adapters...)},
		{"review", []string{module, "database/sql", "net/http"}},
		{"kelos", []string{module, "database/sql", "net/http"}},
		{"modelserver", []string{module}},
		{"githttp", []string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/", module + "sandbox", module + "account", "database/sql"}},
		// fault is the one error vocabulary: a leaf every layer imports.
		{"fault", []string{module}},
		// terminal is the gateway's SSH client for the panel's terminal:
		// x/crypto/ssh over a connection it is handed, nothing of ours.
		{"terminal", []string{module, "database/sql", "net/http"}},
		// devcontainer reads a repository's devcontainer.json: berth-init
		// imports it, so the standard library only.
		{"devcontainer", []string{module, "database/sql", "net/http"}},
		// classimage writes berth's layer over an image and drives a build
		// through its Builder (the podman driver): no adapter, no database.
		{"classimage", append([]string{"database/sql", "k8s.io/", "net/http", "sandbox", "store"}, adapters...)},
		// idp is the identity provider's side of a sign-in (OpenID
		// Connect): HTTP to the provider, but nothing of berth's accounts,
		// sandboxes or adapters; what a sign-in makes of a person is sso's.
		{"idp", append([]string{"database/sql", "k8s.io/", "account", "sandbox", "store", "sso"}, adapters...)},
		// sso signs people in through the provider (idp) and keeps their
		// access: accounts below it; the sandboxes it ends through its own
		// port, never the sandbox package; no database, no adapter (HTTP
		// only as idp speaks it to the provider).
		{"sso", append([]string{"database/sql", "k8s.io/", "sandbox", "agentrun", "usage"}, adapters...)},
		// openssh is what the CLI hands OpenSSH: pure, stdlib only.
		{"openssh", []string{module, "database/sql", "net/http"}},
		// Where a sandbox may go out to: a pure policy, which classes and
		// guardrails use; the proxy that enforces it is told who calls
		// and where it records by the gateway.
		{"egress", append([]string{"database/sql", "k8s.io/", "net/http", "account", "sandbox"}, adapters...)},
		{"egress/proxy", append([]string{"database/sql", "k8s.io/", "account", "sandbox"}, adapters...)},
		// server is the composition root: every adapter, but never the
		// client side (TestCompositionRoot has the rest).
		{"server", []string{module + "cli", module + "client"}},
		{"store", []string{module + "gateway", module + "client", module + "cli", module + "driver/"}},
		// sqldb is the store's floor: the connection, the migrations'
		// runner, the writers' turns and the advisory locks; no concept of
		// ours (the tables and queries are the store's); a write refused
		// is fault.Busy with overload's Retry-After.
		{"store/sqldb", append([]string{"account", "sandbox", "class", "guardrail", "agentrun", "repository", "inference", "usage",
			"audit", "paging", "forge", "net/http", "k8s.io/"}, adapters...)},
		// The podman driver runs the podman binary (and asks its own podman
		// service, on a unix socket, what needs no process: HTTP as a client
		// of that socket only): no database, no other driver, none of the
		// forges.
		{"driver/podman", append([]string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/kubernetes", module + "driver/fake",
			"database/sql", "k8s.io/", "github.com/golang-jwt/", "github.com/prometheus/",
			"githttp", "workspace", "inference", "modelserver", "usage", "metrics"}, forges...)},
		// workspace makes checkouts with git on the host: it sees the forge
		// domain and the mirrors through interfaces of its own.
		{"workspace", append([]string{"database/sql", "k8s.io/", "net/http", "github.com/golang-jwt/", "github.com/prometheus/",
			"githttp", "inference", "modelserver", "usage", "metrics"}, append(adapters, forges...)...)},
		{"driver/kubernetes", []string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/podman", module + "driver/fake", "database/sql"}},
		{"driver/fake", []string{module + "store", module + "gateway", module + "client", module + "cli", "database/sql"}},
		{"gateway", []string{module + "store", module + "client", module + "cli", module + "driver/", "database/sql", "github.com/prometheus/", "github.com/chromedp/"}},
		// The web panel is an adapter inside the gateway's edge: services
		// in, HTML out. Chromium drives it in tests only.
		{"gateway/panel", []string{module + "store", module + "client", module + "cli", module + "driver/", module + "gateway",
			"database/sql", "github.com/prometheus/", "github.com/chromedp/"}},
		{"metrics", []string{module + "store", module + "gateway", module + "client", module + "cli", module + "driver/", "database/sql"}},
		{"client", []string{module + "store", module + "gateway", module + "cli", module + "driver/", module + "sandbox", module + "account", "database/sql"}},
	}
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			for dep := range deps(t, r.pkg) {
				for _, b := range r.banned {
					full := b
					if !strings.Contains(b, ".") && !strings.Contains(b, "/sql") && b != "net/http" {
						full = module + b // a package of ours, by short name
					}
					if strings.HasPrefix(dep, full) {
						t.Errorf("%s imports %s (banned: %q)", r.pkg, dep, b)
					}
				}
			}
		})
	}

	// What goes into every sandbox image (berth-init) depends on the
	// standard library and on these packages of ours alone: leaves that
	// import nothing else of ours. No database, no Kubernetes client, no
	// store, whatever arrives through a package it is allowed.
	only := []struct {
		pkg  string
		ours []string
	}{
		// api: the wire types berth-init shares with the gateway; kelos:
		// the interface of the kelos images berth-init wraps on Kubernetes;
		// devcontainer: the postCreateCommand it runs once per sandbox;
		// handoff: the tunnels' connections it takes over.
		{"entrypoint", []string{"api", "devcontainer", "handoff", "kelos", "review", "runner", "secret"}},
		// tunnel is shared by the gateway and the client as api is: its
		// refusal is a fault.UpgradeRequired. x/sys/unix reads a handed-over
		// socket's byte counts (TCP_INFO), which package syscall cannot.
		{"tunnel", []string{"fault", "golang.org/x/sys/unix"}},
		// handoff ships in berth-init too.
		{"handoff", nil},
	}
	for _, r := range only {
		t.Run(r.pkg, func(t *testing.T) {
			for dep, std := range deps(t, r.pkg) {
				if std {
					continue
				}
				ok := false
				for _, o := range r.ours {
					ok = ok || dep == module+o || dep == o
				}
				if !ok {
					t.Errorf("%s imports %s (only the standard library and %v)", r.pkg, dep, r.ours)
				}
			}
		})
	}
}

// deps is what the package of ours at pkg (its short name) depends on,
// itself left out, each import path with whether it is in the standard
// library.
//
// go test caches a result by the files the test itself opens, and go list
// runs in a process of its own: deps reads the directory and stats the Go
// files of every package outside the standard library, so that a changed
// import, or a new file, runs the test again instead of answering a pass
// from the cache.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Standard}}\t{{.Dir}}{{range .GoFiles}}\t{{.}}{{end}}", "./"+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	all := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		dep, std := f[0], f[1] == "true"
		if !std {
			if _, err := os.ReadDir(f[2]); err != nil {
				t.Fatal(err)
			}
			for _, name := range f[3:] {
				if _, err := os.Stat(filepath.Join(f[2], name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if dep != module+pkg {
			all[dep] = std
		}
	}
	return all
}

// TestCompositionRoot keeps server the one package that knows every
// adapter (STYLE.md §3): the adapters that make the gateway are imported
// by it alone, it by cli alone, and cli, the client side and thin commands
// over server, imports only the wire, the client, server and the few
// domain helpers its commands need. cli reaches the adapters through
// server, so its rule is on what it imports itself, not on everything
// below it.
func TestCompositionRoot(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "berth.dev/berth/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{} // package → what its non-test files import
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}

	// Who may import each of these (and its subpackages, "driver/" all
	// the drivers); a package's own subpackages may too.
	under := func(p, pkg string) bool {
		if strings.HasSuffix(pkg, "/") {
			return strings.HasPrefix(p, module+pkg)
		}
		return p == module+pkg || strings.HasPrefix(p, module+pkg+"/")
	}
	for _, r := range []struct {
		pkg       string
		importers []string
	}{
		// sandboxtest is the world of sandbox's and agentrun's tests: a
		// real store and the fake driver. Only test files import it.
		{"store", []string{module + "server", module + "sandbox/sandboxtest"}},
		// sqldb is the store's own floor: the store alone opens it.
		{"store/sqldb", []string{module + "store"}},
		// bench/start times a bare podman run of the argv the driver
		// builds for an agent run (podman.AgentArgs), its baseline.
		// bench/checkpoint times the podman driver's checkpoint and
		// restore in its own process, as bench/egress does the proxy.
		{"driver/", []string{module + "server", module + "sandbox/sandboxtest", "berth.dev/berth/bench/start", "berth.dev/berth/bench/checkpoint"}},
		{"sandbox/sandboxtest", nil},
		{"gateway", []string{module + "server"}},
		{"server", []string{module + "cli", module + "e2e/berthtest"}},
		{"cli", []string{"berth.dev/berth/cmd/berth", module + "e2e/berthtest"}},
	} {
		t.Run("importers of "+r.pkg, func(t *testing.T) {
			for imp, deps := range imports {
				if under(imp, r.pkg) || slices.Contains(r.importers, imp) {
					continue
				}
				for _, dep := range deps {
					// kubetest runs a cluster, not the driver: a benchmark
					// starts one as the driver's tests do.
					if dep == module+"driver/kubernetes/kubetest" && strings.HasPrefix(imp, "berth.dev/berth/bench/") {
						continue
					}
					if under(dep, r.pkg) {
						t.Errorf("%s imports %s: only %v may (server, the composition root, wires the adapters)", imp, dep, r.importers)
					}
				}
			}
		})
	}

	t.Run("cli imports", func(t *testing.T) {
		allowed := []string{module + "api", module + "client", module + "server", module + "openssh",
			module + "account", module + "forge", module + "forge/local", module + "quantity", module + "runner",
			// tunnel is both ends' copy loop (it imports only fault): the
			// CLI's `sandbox forward` joins local connections with it.
			module + "tunnel",
			// name is the naming rule (a leaf); classimage finds and writes
			// berth's layer, which berth image build --print prints with no
			// driver at all (it imports devcontainer only).
			module + "name", module + "classimage",
			// transcript renders a run's log for people (the CLI's logs,
			// on runner's parsing).
			module + "transcript",
			// secret holds a value that prints as [redacted] (a leaf), and
			// x/term reads one at a terminal without echo: berth secret
			// set's value is neither echoed nor shown.
			module + "secret", "golang.org/x/term",
			"github.com/spf13/cobra"}
		for _, dep := range imports[module+"cli"] {
			first, _, _ := strings.Cut(dep, "/")
			if (strings.Contains(first, ".") || dep == "database/sql") && !slices.Contains(allowed, dep) {
				t.Errorf("cli imports %s: it imports %v only, and reaches the rest through server", dep, allowed)
			}
		}
	})
}
