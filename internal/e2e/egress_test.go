package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// TestEgressThroughTheProxy is an agent sandbox's way out as its tools
// meet it. In a real agent run on the allowlist network, whose class
// names its hosts in egress:, curl, git, pip and npm reach HTTPS servers
// of their own (on the host's loopback, by the gateway's
// BERTH_EGRESS_CONNECT_TO) through the gateway's egress proxy, with no
// setting but the HTTPS_PROXY berth gave them. A host off the list is
// refused with the policy's words in curl's output and never contacted;
// names on the list that resolve (BERTH_EGRESS_RESOLVE) to the metadata
// address, the host's loopback, another sandbox or the host's bridge are
// refused for their address; every refusal is in the audit log; and
// without the proxy nothing connects and no name resolves.
func TestEgressThroughTheProxy(t *testing.T) {
	began := time.Now()
	ca := newTestCA(t)
	files := []byte(strings.Repeat("berth egress probe "+rand.Text()+"\n", 512))
	filesSum := sha256.Sum256(files)
	// 16 MiB for the isolated tier's download, which the proxy hands on
	// by splice rather than copying.
	big := []byte(strings.Repeat(rand.Text()+"\n", 16<<20/27))
	bigSum := sha256.Sum256(big)
	gitToken := "probe " + rand.Text()
	npmToken := "probe " + rand.Text()
	wheel := probeWheel(t)
	wheelSum := sha256.Sum256(wheel)
	sites := map[string]*site{
		"files.test": serveSite(t, ca, "files.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/big" {
				_, _ = w.Write(big)
				return
			}
			_, _ = w.Write(files)
		})),
		"git.test":     serveSite(t, ca, "git.test", gitServer(t, "probe.git", map[string]string{"hello.txt": gitToken})),
		"pypi.test":    serveSite(t, ca, "pypi.test", pypiServer(wheel)),
		"npm.test":     serveSite(t, ca, "npm.test", npmServer(t, npmToken)),
		"blocked.test": serveSite(t, ca, "blocked.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello")) })),
	}
	var connectTo []string
	for _, name := range slices.Sorted(maps.Keys(sites)) {
		connectTo = append(connectTo, name+":443="+sites[name].addr)
	}
	// A service on every host address: through the proxy or around it, a
	// sandbox must not reach it.
	host := listenHost(t)

	g := startAgentGatewayWith(t, inferenceYAML, []string{"BERTH_EGRESS_CONNECT_TO=" + strings.Join(connectTo, ",")}, "claude-code")
	ctx := context.Background()
	// Another sandbox, whose address the proxy must not reach either.
	_, pub := sshKey(t)
	peer, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "peer", Class: "standard", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, peer.ID, "running", 2*time.Minute)
	peerIP := g.ip(peer.ID)
	bridge := g.allowlistBridge()
	g.stop()
	g.env = append(g.env, "BERTH_EGRESS_RESOLVE="+strings.Join([]string{
		"meta.test=169.254.169.254", "self.test=127.0.0.1", "peer.test=" + peerIP, "bridge.test=" + bridge,
	}, ","))
	runsc := os.Getenv("BERTH_TEST_RUNSC")
	if runsc != "" {
		g.env = append(g.env, "BERTH_SANDBOX_RUNTIME_ISOLATED="+runsc)
	}
	g.start()

	image, npm := buildProbeImage(t, g.root, ca.pem)
	gatewayPort := g.url[strings.LastIndex(g.url, ":")+1:]
	refusedByAddress := map[string]string{ // label → host:port
		"meta":   "meta.test:80",
		"self":   "self.test:" + gatewayPort,
		"peer":   "peer.test:2222",
		"bridge": "bridge.test:" + host.port,
	}
	egressList := "    egress:\n      - files.test\n      - git.test\n      - pypi.test\n      - npm.test\n"
	for _, label := range slices.Sorted(maps.Keys(refusedByAddress)) {
		egressList += "      - " + refusedByAddress[label] + "\n"
	}
	g.kelosClassOf(image, "probe", egressList)
	if runsc != "" {
		g.kelosClassOn(image, "probe-isolated", "isolated", egressList)
	}
	g.seedRepo("acme/app")

	t.Run("curl", func(t *testing.T) {
		_, log := g.probe(t, "probe-curl", `curl -sS --max-time 30 -o /tmp/files.out https://files.test/
echo "curl.rc $?"
echo "curl.sha256 $(sha256sum </tmp/files.out | cut -d' ' -f1)"
echo "proxy ${HTTPS_PROXY##*@} ${https_proxy##*@} NO_PROXY=$NO_PROXY"`)
		wantSaid(t, log, "curl.rc", "0")
		wantSaid(t, log, "curl.sha256", hex.EncodeToString(filesSum[:]))
		hostPort := "host.containers.internal:" + gatewayPort
		wantSaid(t, log, "proxy", hostPort+" "+hostPort+" NO_PROXY=host.containers.internal")
		wantRequests(t, sites["files.test"], "GET /")
	})

	// On the isolated tier gVisor's netstack is the sandbox's own, and
	// the proxy hands what comes down a tunnel on by splice instead of
	// copying it: every byte of 16 MiB arrives, and the sandbox's egress
	// record counts them.
	t.Run("curl on the isolated tier", func(t *testing.T) {
		if runsc == "" {
			t.Skip("set BERTH_TEST_RUNSC to a runsc binary for the isolated tier")
		}
		sb, log := g.probeOf(t, "probe-isolated", "probe-gvisor", `curl -sS --max-time 60 -o /tmp/big.out https://files.test/big
echo "curl.rc $?"
echo "curl.sha256 $(sha256sum </tmp/big.out | cut -d' ' -f1)"
echo "kernel $(uname -r)"`)
		wantSaid(t, log, "curl.rc", "0")
		wantSaid(t, log, "curl.sha256", hex.EncodeToString(bigSum[:]))
		if k, _ := said(log, "kernel"); !strings.Contains(k, "gvisor") {
			t.Errorf("the isolated probe's kernel is %q, want gVisor's", k)
		}
		wantRequests(t, sites["files.test"], "GET /big")
		e, err := g.operator.SandboxEgress(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		var down int64
		for _, h := range e.Hosts {
			if h.Host == "files.test" && h.Decision == "allowed" {
				down += h.BytesDown
			}
		}
		if down < int64(len(big)) {
			t.Errorf("the isolated probe's egress counts %d bytes from files.test, want at least %d: %+v", down, len(big), e.Hosts)
		}
	})

	t.Run("git", func(t *testing.T) {
		_, log := g.probe(t, "probe-git", `git clone -q https://git.test/probe.git "$HOME/probe"
echo "git.rc $?"
echo "git.hello $(cat "$HOME/probe/hello.txt")"`)
		wantSaid(t, log, "git.rc", "0")
		wantSaid(t, log, "git.hello", gitToken)
		wantRequests(t, sites["git.test"], "GET /probe.git/info/refs", "POST /probe.git/git-upload-pack")
	})

	t.Run("pip", func(t *testing.T) {
		_, log := g.probe(t, "probe-pip", `pip3 download -q --no-deps --index-url https://pypi.test/simple/ probe-pkg -d /tmp/dl
echo "pip.rc $?"
echo "pip.wheel $(cd /tmp/dl && sha256sum *.whl)"`)
		wantSaid(t, log, "pip.rc", "0")
		wantSaid(t, log, "pip.wheel", hex.EncodeToString(wheelSum[:])+"  probe_pkg-1.0-py3-none-any.whl")
		wantRequests(t, sites["pypi.test"], "GET /simple/probe-pkg/", "GET /files/probe_pkg-1.0-py3-none-any.whl")
	})

	t.Run("npm", func(t *testing.T) {
		if npm != "" {
			t.Skip(npm)
		}
		_, log := g.probe(t, "probe-npm", `mkdir -p "$HOME/scratch" && cd "$HOME/scratch" &&
	npm install --no-audit --no-fund --no-update-notifier --loglevel=error --registry https://npm.test/ probe-pkg
echo "npm.rc $?"
echo "npm.index $(node -p 'require("probe-pkg")')"
echo "fetch.name $(node -e 'fetch("https://npm.test/probe-pkg").then(r => r.json()).then(j => console.log(j.name), e => console.log("failed", e.cause && e.cause.code))' 2>/dev/null)"`)
		wantSaid(t, log, "npm.rc", "0")
		wantSaid(t, log, "npm.index", npmToken)
		// Node's own fetch (a CLI's remote MCP server, a script) goes
		// through the proxy too: NODE_USE_ENV_PROXY.
		wantSaid(t, log, "fetch.name", "probe-pkg")
		wantRequests(t, sites["npm.test"], "GET /probe-pkg", "GET /probe-pkg/-/probe-pkg-1.0.0.tgz")
	})

	// try LABEL URL [CURL ARGS]: curl through the proxy, and what came
	// back: its exit code, its error line, and the proxy's answer as curl
	// -v shows it (the status line, and X-Berth-Egress).
	const try = `try() {
	local out
	out=$(curl -sS -v --max-time 30 -o /dev/null "${@:3}" "$2" 2>&1)
	echo "$1.rc $?"
	echo "$1.error $(grep -m1 '^curl: ' <<<"$out")"
	echo "$1.status $(grep -m1 '^< HTTP/' <<<"$out" | cut -d' ' -f3- | tr -d '\r')"
	echo "$1.why $(grep -m1 -i '^< x-berth-egress: ' <<<"$out" | cut -d' ' -f3- | tr -d '\r')"
}
`
	t.Run("off the list", func(t *testing.T) {
		sb, log := g.probe(t, "probe-blocked", try+`try blocked https://blocked.test/`)
		wantRefused(t, log, "blocked", "CONNECT tunnel failed, response 403",
			"berth egress: blocked.test port 443 is not in this sandbox's egress policy (")
		if n, reqs := sites["blocked.test"].seen(); n != 0 {
			t.Errorf("blocked.test was contacted: %d connections, requests %q", n, reqs)
		}
		g.wantAudited(t, sb.ID, "blocked.test:443", "not in this sandbox's egress policy")
		// The run says what it wanted and did not get.
		var refused []string
		if sb.Run != nil {
			refused = sb.Run.EgressRefused
		}
		if !slices.Equal(refused, []string{"blocked.test"}) {
			t.Errorf("the run names %q as refused, want [blocked.test]", refused)
		}
	})

	t.Run("addresses no sandbox may reach", func(t *testing.T) {
		script := try
		for label, target := range refusedByAddress {
			if strings.HasSuffix(target, ":80") {
				// The proxy's absolute-form path: a 403 is an answer, -f
				// makes it curl's failure.
				script += fmt.Sprintf("try %s http://%s/ -f\n", label, target)
				continue
			}
			script += fmt.Sprintf("try %s https://%s/\n", label, target)
		}
		sb, log := g.probe(t, "probe-ssrf", script)
		for label, target := range refusedByAddress {
			name, port, _ := strings.Cut(target, ":")
			curlSays := "CONNECT tunnel failed, response 403"
			if port == "80" {
				curlSays = "The requested URL returned error: 403"
			}
			wantRefused(t, log, label, curlSays, "berth egress: "+name+" resolves only to addresses a sandbox may not reach")
			g.wantAudited(t, sb.ID, target, "resolves only to addresses a sandbox may not reach")
		}
	})

	t.Run("no way around", func(t *testing.T) {
		_, log := g.probe(t, "probe-around", fmt.Sprintf(`direct() {
	curl --noproxy '*' -sS --max-time 5 -o /dev/null "$2" 2>/dev/null
	echo "$1.rc $?"
}
direct gateway http://host.containers.internal:%s/healthz
direct internet https://1.1.1.1/
direct metadata http://169.254.169.254/
direct bridge http://%s:%s/
direct peer http://%s:2222/
getent hosts files.test
echo "dns.rc $?"`, gatewayPort, bridge, host.port, peerIP))
		// The network works: the gateway answers straight.
		wantSaid(t, log, "gateway.rc", "0")
		for _, label := range []string{"internet", "metadata", "bridge", "peer"} {
			if rc, ok := said(log, label+".rc"); !ok || rc == "0" {
				t.Errorf("curl --noproxy to the %s: exit %q, want a failure; log:\n%s", label, rc, log)
			}
		}
		wantSaid(t, log, "dns.rc", "2") // getent: not found
	})

	// A learnt list: setup reaches two hosts (egress: learn lets it reach
	// any); the agent, which calls its model first as an agent does,
	// reaches one of them and is refused a third, which its run names.
	t.Run("learned", func(t *testing.T) {
		g.kelosClassOf(image, "learner", `    egress: learn
    setup_command: [bash, -c, "curl -sS -o /dev/null https://files.test/ && pip3 download -q --no-deps --index-url https://pypi.test/simple/ probe-pkg -d /tmp/dl"]`)
		sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "probe-learn", Class: "learner", Purpose: "agent", Repo: "acme/app",
			Task: try + `echo "model.status $(curl -sS -o /dev/null -w '%{http_code}' "$ANTHROPIC_BASE_URL/v1/messages" \
	-H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \
	-d '{"model":"'"$KELOS_MODEL"'","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}')"
try learnt https://files.test/
try unlearnt https://npm.test/probe-pkg`})
		if err != nil {
			t.Fatal(err)
		}
		if sb.Egress != "learn" {
			t.Errorf("a sandbox of the learner class has egress %q, want learn", sb.Egress)
		}
		end := g.waitEnded(sb.ID, 2*time.Minute)
		out, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
		log := string(out)
		if end.State != "terminated" {
			t.Fatalf("%s: %s (%s); log:\n%s", sb.Name, end.State, end.Reason, log)
		}
		if status, _ := said(log, "model.status"); status == "" || status == "000" {
			t.Errorf("the probe's model call got %q: it did not reach the gateway; log:\n%s", status, log)
		}
		wantSaid(t, log, "learnt.rc", "0")
		wantRefused(t, log, "unlearnt", "CONNECT tunnel failed, response 403",
			"berth egress: npm.test port 443 is not in this sandbox's egress policy (files.test, pypi.test)")
		if end.Egress != "files.test, pypi.test" {
			t.Errorf("after its setup the sandbox's egress is %q, want the two hosts setup reached", end.Egress)
		}
		if end.Run == nil || !slices.Equal(end.Run.EgressRefused, []string{"npm.test"}) {
			t.Errorf("the run names %+v as refused, want [npm.test]", end.Run)
		}
		g.wantAudited(t, sb.ID, "npm.test:443", "not in this sandbox's egress policy")
		events, err := g.operator.Audit(ctx, client.AuditOptions{Sandbox: sb.ID})
		if err != nil {
			t.Fatal(err)
		}
		var learnt []string
		for _, e := range events {
			if e.Action == "egress.learn" {
				learnt = append(learnt, e.Target+" ("+e.Detail+")")
			}
		}
		// The setup's end banner or the model call, whichever the gateway
		// saw first.
		if len(learnt) != 1 || !strings.HasPrefix(learnt[0], "files.test, pypi.test (") {
			t.Errorf("egress.learn audit entries %q, want one naming the two hosts", learnt)
		}
		policy, err := g.berthErr("sandbox", "egress", sb.Name, "--as-policy")
		if err != nil || !strings.HasSuffix(string(policy), "egress:\n  - \"files.test\"\n  - \"pypi.test\"\n") {
			t.Errorf("berth sandbox egress --as-policy: %v\n%s", err, policy)
		}
	})

	if n := host.accepted(); n != 0 {
		t.Errorf("the host's service on port %s took %d connections from sandboxes", host.port, n)
	}
	t.Logf("took %s", time.Since(began).Round(time.Second))
}

// probe runs script as the task of an agent sandbox of the probe class
// and returns the ended sandbox and what the script printed; the run must
// end well.
func (g *gateway) probe(t *testing.T, name, script string) (api.Sandbox, string) {
	t.Helper()
	return g.probeOf(t, "probe", name, script)
}

// probeOf is probe in a sandbox of class.
func (g *gateway) probeOf(t *testing.T, class, name, script string) (api.Sandbox, string) {
	t.Helper()
	sb, err := g.operator.CreateSandbox(context.Background(), api.CreateSandbox{Name: name, Class: class, Purpose: "agent", Repo: "acme/app", Task: script})
	if err != nil {
		t.Fatal(err)
	}
	end := g.waitSandbox(g.operator, sb.ID, 2*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "terminated" || sb.State == "failed"
	})
	out, err := g.berthErr("sandbox", "logs", "--raw", name)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != "terminated" {
		t.Fatalf("%s: %s (%s); log:\n%s", name, end.State, end.Reason, out)
	}
	return end, string(out)
}

// said is what the run printed after key on a line of its own.
func said(log, key string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+" "); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// wantSaid checks that the run printed want after key.
func wantSaid(t *testing.T, log, key, want string) {
	t.Helper()
	if got, _ := said(log, key); got != want {
		t.Errorf("%s: %q, want %q; log:\n%s", key, got, want, log)
	}
}

// wantRefused checks what curl said of a refused label: a failure, its
// error, and the proxy's reason.
func wantRefused(t *testing.T, log, label, curlSays, why string) {
	t.Helper()
	rc, _ := said(log, label+".rc")
	curlErr, _ := said(log, label+".error")
	status, _ := said(log, label+".status")
	reason, _ := said(log, label+".why")
	if rc == "0" || rc == "" || !strings.Contains(curlErr, curlSays) {
		t.Errorf("%s: curl exit %s, %q; want a failure saying %q", label, rc, curlErr, curlSays)
	}
	if !strings.HasPrefix(status, "403 Forbidden ("+why) || !strings.HasPrefix(reason, why) {
		t.Errorf("%s: the proxy answered %q, X-Berth-Egress %q; want 403 with %q… in both", label, status, reason, why)
	}
}

// wantAudited checks that the audit log holds the proxy's refusal of
// target for sandbox id, with its reason.
func (g *gateway) wantAudited(t *testing.T, id, target, why string) {
	t.Helper()
	events, err := g.operator.Audit(context.Background(), client.AuditOptions{Sandbox: id})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		if e.Action == "egress.refuse" && e.Target == target && e.Outcome == "refused" && strings.Contains(e.Detail, why) {
			return
		}
		actions = append(actions, e.Action+" "+e.Target+" "+e.Outcome+": "+e.Detail)
	}
	t.Errorf("no egress.refuse of %s (%q) among the %d audit entries of %s:\n%s", target, why, len(actions), id, strings.Join(actions, "\n"))
}

// allowlistBridge is the allowlist network's address on the host: what a
// run knows as host.containers.internal.
func (g *gateway) allowlistBridge() string {
	g.t.Helper()
	for _, kv := range slices.Backward(g.env) {
		if name, ok := strings.CutPrefix(kv, "BERTH_SANDBOX_PODMAN_AGENT_NETWORK="); ok {
			return g.podman("network", "inspect", "--format", "{{range .Subnets}}{{.Gateway}}{{end}}", name)
		}
	}
	g.t.Fatal("the gateway has no allowlist network")
	return ""
}
