package e2e_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// TestUsageAuditAndSecrets runs a member's whole day on the real binary
// and podman: keys minted and revoked, a sandbox created, entered over
// ssh, suspended, resumed, extended and terminated. Then the audit log
// holds one entry per action, the usage report charges what ran, /metrics
// parses as Prometheus text, and no secret issued (the keys, the
// sandbox's own key read inside it) appears in any line the gateway logged
// or in the audit log.
func TestUsageAuditAndSecrets(t *testing.T) {
	g := startGateway(t)
	ctx := context.Background()
	key, pub := sshKey(t)
	secrets := []string{g.key}
	u, err := g.operator.CreateUser(ctx, "main", api.CreateUser{Name: "alice", Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := g.operator.CreateKey(ctx, api.CreateKey{User: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, k.Secret)
	alice := client.New(g.url, k.Secret, nil)
	laptop, err := alice.CreateKey(ctx, api.CreateKey{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, laptop.Secret)
	if err := alice.RevokeKey(ctx, laptop.ID); err != nil {
		t.Fatal(err)
	}

	sb, err := alice.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "standard", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(alice, sb.ID, "running", 2*time.Minute)
	inside := ssh(t, key, g.ip(sb.ID), "echo $BERTH_API_KEY")
	if !strings.HasPrefix(inside, "berth_") {
		t.Fatalf("the sandbox's key inside it is %q", inside)
	}
	secrets = append(secrets, inside)
	if _, err := alice.Suspend(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Resume(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	g.waitState(alice, sb.ID, "running", 2*time.Minute)
	if _, err := alice.Extend(ctx, "dev", "2h"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // something to charge
	if _, err := alice.Terminate(ctx, "dev"); err != nil {
		t.Fatal(err)
	}

	// The audit log, as the CLI shows it to the operator.
	auditOut := g.berth("audit", "-o", "json")
	var events []api.AuditEvent
	if err := json.Unmarshal(auditOut, &events); err != nil {
		t.Fatalf("berth audit -o json: %v: %s", err, auditOut)
	}
	var got []string
	for _, e := range events {
		if e.Sandbox == sb.ID || e.Target == laptop.ID {
			who := e.ActorName
			if e.Actor == "" {
				who = "berth"
			}
			got = append(got, who+" "+e.Action+" "+e.Detail)
		}
	}
	want := []string{
		"alice key.create a key of alice named laptop",
		"alice key.revoke a key of alice named laptop",
		"alice sandbox.create engineer sandbox of class standard in project default, expires " + sb.ExpiresAt.UTC().Format(time.RFC3339),
		"alice key.create the key of sandbox dev",
		"berth sandbox.state starting → running",
		"alice sandbox.state running → suspended",
		"alice sandbox.state suspended → starting",
		"berth sandbox.state starting → running",
		"alice sandbox.extend ",
		"alice sandbox.state running → terminated: terminated by alice",
		"alice key.revoke the key of sandbox dev",
	}
	if len(got) != len(want) {
		t.Fatalf("audit log of the day:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("audit entry %d: %q, want %q…", i, got[i], want[i])
		}
	}

	// The usage report charges what ran, by its one core.
	var rep api.UsageReport
	if err := json.Unmarshal(g.berth("sandbox", "usage", "--by", "user", "-o", "json"), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Total.Sandboxes != 1 || rep.Total.Live != 0 || rep.Total.RunningSeconds < 1 ||
		math.Abs(rep.Total.CoreSeconds-float64(rep.Total.RunningSeconds)) >= 1 {
		t.Errorf("usage: %+v; want alice's one ended sandbox, charged a second or more, at one core", rep.Total)
	}

	// /metrics parses, and counts the create and its readiness.
	req, _ := http.NewRequest("GET", g.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	for _, name := range []string{"berth_sandbox_creates_total", "berth_sandbox_ready_seconds", "berth_sweep_duration_seconds", "go_goroutines"} {
		if _, ok := families[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if h := families["berth_sandbox_ready_seconds"]; h != nil {
		var n uint64
		for _, m := range h.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
		if n != 1 {
			t.Errorf("create→ready observed %d times, want 1 (a resume is no create)", n)
		}
	}

	// Every line the gateway logged (at debug), and the audit log: no
	// secret, whole or its random part.
	g.stop()
	logs := g.log.String()
	if !strings.Contains(logs, `"msg":"sandbox state changed"`) {
		t.Fatalf("the gateway's log holds no state change; is it the right log?\n%s", logs)
	}
	for i, s := range secrets {
		random := s[strings.LastIndex(s, "_")+1:]
		for where, text := range map[string]string{"the gateway's log": logs, "the audit log": string(auditOut)} {
			if strings.Contains(text, s) || strings.Contains(text, random) {
				t.Errorf("secret %d (%s…) appears in %s", i, s[:12], where)
			}
		}
	}
}
