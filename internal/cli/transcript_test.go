package cli_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// TestSandboxLogsTranscript (issue 19): `berth sandbox logs` shows the run
// as a transcript, the tool call with its command, its result, the
// assistant's text and the totals; -o json gives the parsed events, one
// object a line, the totals last; --raw and -o json together are a usage
// error.
func TestSandboxLogsTranscript(t *testing.T) {
	g := newAgentGateway(t)
	g.release()
	c := client.New(g.url, g.key, nil)
	sb := createFix(t, c)
	waitRun(t, c, string(sb.ID))

	code, out, errs := g.berth(t, "sandbox", "logs", "fix")
	if code != 0 || errs != "" {
		t.Fatalf("logs: exit %d, stderr %q", code, errs)
	}
	wantLines(t, "the transcript", out,
		`^I'll run the command\.$`,
		`^▸ Bash: echo hi > f\.txt && git add f\.txt && git commit -q -m 'add f\.txt' && git log --oneline \| head -1$`,
		`^  │ c521422 add f\.txt$`,
		`^Done: wrote f\.txt and committed it\.$`,
		`^─ 240 in, 34 out, 60 cache read, 10 cache write · 2 turns · \$0\.0013 · claude-sonnet-4-5$`)
	if strings.Contains(out, `"type":`) {
		t.Errorf("the transcript shows raw JSON:\n%s", out)
	}

	code, out, errs = g.berth(t, "sandbox", "logs", "fix", "-o", "json")
	if code != 0 {
		t.Fatalf("logs -o json: exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var kinds []string
	var last struct {
		Kind   string `json:"kind"`
		Totals struct {
			Usage struct {
				Input, Output int64
			} `json:"usage"`
			CostUSD *float64 `json:"cost_usd"`
		} `json:"totals"`
	}
	for _, l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("logs -o json: %q is not a JSON object: %v", l, err)
		}
		kinds = append(kinds, last.Kind)
	}
	if got := strings.Join(kinds, " "); got != "text tool_call tool_result text totals" {
		t.Errorf("logs -o json: kinds %q", got)
	}
	if last.Totals.Usage.Input != 240 || last.Totals.Usage.Output != 34 || last.Totals.CostUSD == nil {
		t.Errorf("logs -o json: totals %+v", last.Totals)
	}

	if code, _, errs := g.berth(t, "sandbox", "logs", "fix", "--raw", "-o", "json"); code != 2 || !strings.Contains(errs, "--raw or -o json") {
		t.Errorf("logs --raw -o json: exit %d, stderr %q; want 2", code, errs)
	}
}

// TestFollowExitsWithTheOutcome (issue 19): `berth sandbox create …
// --purpose agent --follow` and `berth sandbox logs -f` stream the
// transcript until the run ends and exit with its outcome: 0 for a run
// that succeeded; 1 for one that failed, the reason on stderr.
func TestFollowExitsWithTheOutcome(t *testing.T) {
	t.Run("succeeded", func(t *testing.T) {
		g := newAgentGateway(t)
		type result struct {
			code     int
			out, err string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errs := g.berth(t, "sandbox", "create", "fix", "--purpose", "agent", "--repo", "acme/app", "--task", "add a greeting", "--runner", "claude-code", "--follow")
			done <- result{code, out, errs}
		}()
		select {
		case <-g.started:
		case r := <-done:
			t.Fatalf("create --follow ended before the run started: exit %d, %s", r.code, r.err)
		}
		g.release()
		select {
		case r := <-done:
			if r.code != 0 || r.err != "" {
				t.Errorf("create --follow: exit %d, stderr %q; want 0", r.code, r.err)
			}
			wantLines(t, "create --follow", r.out, `^▸ Bash: echo hi > f\.txt`, `^─ 240 in, 34 out`)
		case <-time.After(20 * time.Second):
			t.Fatal("create --follow did not return after the run ended")
		}
		if code, _, errs := g.berth(t, "sandbox", "create", "dev", "--follow"); code != 2 || !strings.Contains(errs, "--purpose agent") {
			t.Errorf("create --follow of an engineer sandbox: exit %d, stderr %q; want 2", code, errs)
		}
	})
	t.Run("failed", func(t *testing.T) {
		g := newAgentGateway(t, func(s *agentSetup) { s.stream = "claude-error" })
		c := client.New(g.url, g.key, nil)
		createFix(t, c)
		<-g.started
		done := make(chan [3]string, 1)
		following := &answered{c: make(chan struct{})}
		go func() {
			code, out, errs := g.berthWith(t, &http.Client{Transport: following}, "sandbox", "logs", "-f", "fix")
			done <- [3]string{string(rune('0' + code)), out, errs}
		}()
		<-following.c
		g.release()
		select {
		case r := <-done:
			if r[0] != "1" || !strings.Contains(r[2], "the run of fix failed: the agent reported an error: API Error: 400 mock: scripted failure") {
				t.Errorf("logs -f of a failed run: exit %s, stderr %q; want 1 and the reason", r[0], r[2])
			}
			wantLines(t, "logs -f of a failed run", r[1], `^✗ error: API Error: 400 mock: scripted failure$`, `· failed$`)
		case <-time.After(20 * time.Second):
			t.Fatal("logs -f did not return after the run ended")
		}
	})
}

// TestSandboxDiff (issue 19): `berth sandbox diff` shows what the run
// pushed against where it started: the file the agent added, in git's
// stat and patch; a run that pushed nothing yet says so and shows none;
// another's sandbox is not found.
func TestSandboxDiff(t *testing.T) {
	g := newAgentGateway(t)
	c := client.New(g.url, g.key, nil)
	sb := createFix(t, c)
	<-g.started
	code, out, errs := g.berth(t, "sandbox", "diff", "fix")
	if code != 0 || out != "" || !strings.Contains(errs, "fix pushed nothing (its run running)") {
		t.Errorf("diff while the run goes: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	g.release()
	waitRun(t, c, string(sb.ID))
	code, out, errs = g.berth(t, "sandbox", "diff", "fix")
	if code != 0 {
		t.Fatalf("diff: exit %d, stderr %q", code, errs)
	}
	wantLines(t, "diff", out, `^ hello\.txt \| 1 \+$`, `^diff --git a/hello\.txt b/hello\.txt$`, `^\+hello$`)
	wantLines(t, "diff's stderr", errs, `^berth/fix at [0-9a-f]{12}, against where the run started:$`)
	if code, _, errs := g.berth(t, "sandbox", "diff", "nope"); code != 1 || !strings.Contains(errs, "not_found") {
		t.Errorf("diff of an unknown sandbox: exit %d, stderr %q", code, errs)
	}
}

// createFix creates alice's agent sandbox fix, whose run adds a greeting.
func createFix(t *testing.T, c *client.Client) api.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "add a greeting", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestSandboxEgress (issue 22): a host the egress proxy refused an agent
// run is in `berth sandbox egress` (with its reason), at the end of the
// run's transcript and in `show`; --as-policy prints what it reached by
// name as a class's egress: field (none here); another's sandbox is not
// found.
func TestSandboxEgress(t *testing.T) {
	var g *agentGateway
	g = newAgentGateway(t, func(s *agentSetup) {
		s.during = func(env map[string]string) {
			// The agent asks the gateway's proxy, with its own key, for a
			// host its class (egress none) does not name.
			req, _ := http.NewRequest(http.MethodConnect, g.url, nil)
			req.Host = "blocked.example:443"
			req.SetBasicAuth("x", env["BERTH_API_KEY"])
			req.Header.Set("Proxy-Authorization", req.Header.Get("Authorization"))
			req.Header.Del("Authorization")
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Errorf("CONNECT through the gateway: %v", err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("CONNECT blocked.example through the gateway: %s, want 403", resp.Status)
			}
		}
	})
	g.release()
	c := client.New(g.url, g.key, nil)
	sb := createFix(t, c)
	waitRun(t, c, string(sb.ID))

	code, out, errs := g.berth(t, "sandbox", "egress", "fix")
	if code != 0 {
		t.Fatalf("sandbox egress: exit %d, stderr %q", code, errs)
	}
	wantLines(t, "sandbox egress", out, `^policy: +none$`, `^HOST +PORT +DECISION +CONNECTIONS +SENT +RECEIVED +LAST +WHY$`,
		`^blocked\.example +443 +refused +1 +0 B +0 B +.* blocked\.example port 443 is not in this sandbox's egress policy \(none\)$`)
	code, out, _ = g.berth(t, "sandbox", "egress", "fix", "--as-policy")
	if code != 0 || !strings.HasSuffix(out, "reached by name\negress: none\n") {
		t.Errorf("sandbox egress --as-policy: exit %d\n%s", code, out)
	}
	code, out, _ = g.berth(t, "sandbox", "egress", "fix", "-o", "json")
	var e api.SandboxEgress
	if err := json.Unmarshal([]byte(out), &e); code != 0 || err != nil || len(e.Hosts) != 1 || e.Hosts[0].Decision != "refused" {
		t.Errorf("sandbox egress -o json: exit %d, %v: %s", code, err, out)
	}
	_, out, _ = g.berth(t, "sandbox", "logs", "fix")
	wantLines(t, "the transcript", out, `^✗ egress refused: blocked\.example \(berth sandbox egress fix\)$`)
	_, out, _ = g.berth(t, "sandbox", "show", "fix")
	wantLines(t, "show", out, `^egress refused: +blocked\.example \(berth sandbox egress fix\)$`)
	if code, _, errs := g.berth(t, "sandbox", "egress", "nope"); code != 1 || !strings.Contains(errs, "not_found") {
		t.Errorf("sandbox egress of no sandbox: exit %d, stderr %q", code, errs)
	}
}
