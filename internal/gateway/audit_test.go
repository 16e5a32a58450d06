package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoSecretInLogsOrAuditLog captures every log line, at debug level,
// of a whole life: keys minted, used and revoked, an invitation issued,
// used and presented again, classes and guardrails set, a sandbox
// created, suspended, resumed, extended, expired, resumed with a new key
// and terminated, and refused requests. Neither the logs nor the audit log
// may hold any secret issued, whole or its random part.
func TestNoSecretInLogsOrAuditLog(t *testing.T) {
	logs := &lockedBuffer{}
	clk := fakeclock.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	w := newWorld(t, func(c *worldConfig) {
		c.now = clk.Now
		c.log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := t.Context()
	secrets := []string{w.opKey}
	carol, carolKey := w.userKey(t, "acme", "carol", "member")
	secrets = append(secrets, carolKey)

	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(usageClasses)); err != nil {
		t.Fatal(err)
	}
	five := 5
	if _, err := w.admin.SetGuardrail(ctx, "acme", "", api.Guardrail{MaxSandboxes: &five}); err != nil {
		t.Fatal(err)
	}
	laptop, err := carol.CreateKey(ctx, api.CreateKey{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, laptop.Secret)
	if _, err := client.New(w.url, laptop.Secret, nil).Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	if err := carol.RevokeKey(ctx, laptop.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(w.url, laptop.Secret, nil).Whoami(ctx); err == nil {
		t.Fatal("a revoked key still works")
	}

	// An invitation issued, used, and presented again.
	if _, err := w.admin.CreateUser(ctx, "acme", api.CreateUser{Name: "dan", Role: "member"}); err != nil {
		t.Fatal(err)
	}
	inv, err := w.admin.Invite(ctx, "acme", "dan", api.CreateInvitation{})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, inv.Secret)
	enrolled, err := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: inv.Secret})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, enrolled.Key.Secret)
	if _, err := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: inv.Secret}); err == nil {
		t.Fatal("an invitation was used twice")
	}

	sb := w.running(t, carol, "dev", "small", "")
	secrets = append(secrets, w.drv.Env(sandbox.ID(sb.ID))["BERTH_API_KEY"])
	if _, err := client.New(w.url, secrets[len(secrets)-1], nil).Sandboxes(ctx, client.ListOptions{}); err == nil {
		t.Fatal("a sandbox's key used the control API")
	}
	for _, step := range []func() (api.Sandbox, error){
		func() (api.Sandbox, error) { return carol.Suspend(ctx, "dev") },
		func() (api.Sandbox, error) { return carol.Resume(ctx, "dev") },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	w.waitState(t, carol, sb.ID, "running")
	if _, err := carol.Extend(ctx, "dev", "1h"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	if _, err := w.sandboxes.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Resume(ctx, "dev"); err != nil { // after expiry: a new key
		t.Fatal(err)
	}
	w.waitState(t, carol, sb.ID, "running")
	secrets = append(secrets, w.drv.Env(sandbox.ID(sb.ID))["BERTH_API_KEY"])
	if _, err := w.admin.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	auditJSON, err := json.Marshal(must(w.admin.Audit(ctx, client.AuditOptions{})))
	if err != nil {
		t.Fatal(err)
	}

	events, _, err := w.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("%+v", events)
	all := logs.String()
	if !strings.Contains(all, `"msg":"sandbox state changed"`) || !strings.Contains(all, `"msg":"request"`) || len(events) < 20 {
		t.Fatalf("the capture holds too little to mean anything: %d bytes of logs, %d audit events", len(all), len(events))
	}
	for i, s := range secrets {
		if len(s) < 30 || !strings.HasPrefix(s, "berth_") {
			t.Fatalf("secret %d is %q: not a key", i, s)
		}
		random := s[strings.LastIndex(s, "_")+1:]
		for where, text := range map[string]string{"the logs": all, "the audit table": table, "the audit API": string(auditJSON)} {
			if strings.Contains(text, s) || strings.Contains(text, random) {
				t.Errorf("secret %d (%s…) appears in %s", i, s[:12], where)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestAuditLogAccess: administrators read their organisation's audit log,
// operators every one's or one's; members are refused; --sandbox takes a
// name or an id, and another organisation's sandbox is not found.
func TestAuditLogAccess(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	w := newWorld(t, func(c *worldConfig) { c.now = clk.Now })
	ctx := t.Context()
	mine := w.running(t, w.owner, "dev", "standard", "")
	theirs := w.running(t, w.foreign, "dev", "standard", "")
	clk.Advance(time.Hour)
	if _, err := w.owner.Terminate(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	ids := w.names(t)

	actions := func(events []api.AuditEvent) string {
		var out []string
		for _, e := range events {
			who := e.ActorName
			if e.Actor == "" {
				who = "berth"
			}
			out = append(out, who+" "+e.Action+" "+e.Target)
		}
		return strings.Join(out, "\n")
	}
	got, err := w.admin.Audit(ctx, client.AuditOptions{Sandbox: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"alice sandbox.create dev",
		"alice key.create " + must(w.st.GetSandbox(ctx, sandbox.ID(mine.ID))).KeyID,
		"berth sandbox.state dev",
		"alice sandbox.state dev",
		"alice key.revoke " + must(w.st.GetSandbox(ctx, sandbox.ID(mine.ID))).KeyID,
	}, "\n")
	if actions(got) != want {
		t.Errorf("administrator's audit of dev:\n%s\nwant:\n%s", actions(got), want)
	}
	for _, e := range got {
		if e.Sandbox != mine.ID || e.Organisation != ids["org acme"] || e.Outcome != "ok" || e.At.IsZero() {
			t.Errorf("event %+v: want alice's dev in acme, ok, with a time", e)
		}
	}
	byID, err := w.admin.Audit(ctx, client.AuditOptions{Sandbox: mine.ID})
	if err != nil || actions(byID) != want {
		t.Errorf("by id: %v\n%s", err, actions(byID))
	}

	// The whole of acme's log holds acme's users and classes, nothing of other's.
	acme, err := w.admin.Audit(ctx, client.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range acme {
		if e.Organisation != ids["org acme"] || e.Sandbox == theirs.ID {
			t.Errorf("acme's administrator sees %+v", e)
		}
	}
	if !strings.Contains(actions(acme), "ops user.create bob") {
		t.Errorf("acme's log lacks bob's creation:\n%s", actions(acme))
	}
	var e *api.Error
	if _, err := w.admin.Audit(ctx, client.AuditOptions{Sandbox: theirs.ID}); err != nil {
		t.Errorf("another organisation's sandbox by id: %v, want an empty log", err)
	} else if got, _ := w.admin.Audit(ctx, client.AuditOptions{Sandbox: theirs.ID}); len(got) != 0 {
		t.Errorf("acme's administrator reads %d events of another organisation's sandbox", len(got))
	}
	if _, err := w.foreign.Audit(ctx, client.AuditOptions{}); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Errorf("a member reading the audit log: %v, want 403", err)
	}
	if _, err := w.admin.Audit(ctx, client.AuditOptions{Org: "other"}); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("an administrator reading another organisation's log: %v, want 404", err)
	}
	everything, err := w.operator.Audit(ctx, client.AuditOptions{})
	if err != nil || len(everything) <= len(acme) {
		t.Errorf("the operator reads %d events (%v), want more than acme's %d", len(everything), err, len(acme))
	}
	other, err := w.operator.Audit(ctx, client.AuditOptions{Org: "other", Sandbox: theirs.ID})
	if err != nil || len(other) != 3 {
		t.Errorf("the operator reading other's dev: %d events (%v), want 3 (create, its key, running)", len(other), err)
	}
	// A window shorter than the time since the sandbox ran leaves it out.
	recent, err := w.admin.Audit(ctx, client.AuditOptions{Sandbox: mine.ID, Since: "30m"})
	if err != nil || len(recent) != 2 {
		t.Errorf("the last 30 minutes of dev: %d events (%v), want 2 (terminated, key revoked)", len(recent), err)
	}
	if _, err := w.admin.Audit(ctx, client.AuditOptions{Since: "soon"}); !errors.As(err, &e) || e.Field != "since" {
		t.Errorf("--since soon: %v, want 400 on since", err)
	}
}
