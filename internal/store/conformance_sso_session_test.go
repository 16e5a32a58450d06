package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
)

// openSession writes a session of u made at created, its key expiring at
// expires, with refresh as its token, and returns it.
func openSession(t *testing.T, st *store.Store, u account.User, id string, created, expires time.Time, refresh []byte) sso.Session {
	t.Helper()
	k, _ := account.NewKey(u.ID, "sso panel", created)
	k.ExpiresAt = expires
	ss := sso.Session{ID: id, User: u.ID, Key: k.ID, Client: sso.ClientPanel, ClientID: "berth", Issuer: issuer, Subject: "sub-" + u.Name,
		Refresh: refresh, CreatedAt: created, ExpiresAt: expires}
	if err := st.CreateSSOSession(t.Context(), ss, k); err != nil {
		t.Fatalf("CreateSSOSession(%s): %v", id, err)
	}
	return ss
}

// sessionOf reads the session that gave key (and fails when none did).
func sessionOf(t *testing.T, st *store.Store, key string) sso.Session {
	t.Helper()
	ss, err := st.SSOSessionOfKey(t.Context(), key)
	if err != nil {
		t.Fatalf("SSOSessionOfKey(%s): %v", key, err)
	}
	return ss
}

func sessionIDs(sessions []sso.Session) []string {
	var out []string
	for _, s := range sessions {
		out = append(out, s.ID)
	}
	return out
}

// testSSOSessionRoundTrip: a session and its key are written together,
// with their events, or not at all; the session is found by its key; a
// refresh is recorded.
func testSSOSessionRoundTrip(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	k, _ := account.NewKey(fx.ann.ID, "sso cli", t0)
	k.ExpiresAt = t0.Add(sso.DefaultKeyTTL)
	ss := sso.Session{ID: "sso_1", User: fx.ann.ID, Key: k.ID, Client: sso.ClientCLI, ClientID: "berth", Issuer: issuer, Subject: "sub-ann",
		Refresh: []byte("sealed"), CreatedAt: t0, ExpiresAt: k.ExpiresAt}
	ev := audit.Event{At: t0, Org: fx.org.ID, Action: audit.SSOSignIn, Target: fx.ann.Name, Detail: "cli"}
	if err := st.CreateSSOSession(ctx, ss, k, ev); err != nil {
		t.Fatalf("CreateSSOSession: %v", err)
	}
	if diff := cmp.Diff(ss, sessionOf(t, st, k.ID)); diff != "" {
		t.Errorf("SSOSessionOfKey (-want +got):\n%s", diff)
	}
	if got, err := st.GetKey(ctx, k.ID); err != nil || !cmp.Equal(got, k) {
		t.Errorf("GetKey of the session's key = %+v, %v; want %+v", got, err, k)
	}
	if got := auditOf(t, st, fx.org.ID, audit.SSOSignIn); len(got) != 1 {
		t.Errorf("sign-in events = %q, want the one", got)
	}
	_, err := st.SSOSessionOfKey(ctx, "key_nope")
	wantErr(t, "SSOSessionOfKey(a key no sign-in gave)", err, fault.NotFound)

	// Refused whole: neither the key nor the events are written.
	k2, _ := account.NewKey(fx.ann.ID, "sso cli", t0)
	dup := ss
	dup.Key = k2.ID
	wantErr(t, "CreateSSOSession(taken id)", st.CreateSSOSession(ctx, dup, k2, ev), fault.Conflict)
	k3, _ := account.NewKey("usr_nope", "sso cli", t0)
	orphan := ss
	orphan.ID, orphan.User, orphan.Key = "sso_2", "usr_nope", k3.ID
	wantErr(t, "CreateSSOSession(unknown user)", st.CreateSSOSession(ctx, orphan, k3, ev), fault.NotFound)
	for _, id := range []string{k2.ID, k3.ID} {
		_, err := st.GetKey(ctx, id)
		wantErr(t, "GetKey of a refused session's key", err, fault.NotFound)
	}
	if got := auditOf(t, st, fx.org.ID, audit.SSOSignIn); len(got) != 1 {
		t.Errorf("sign-in events after refused sessions = %q, want the first's alone", got)
	}

	at := t0.Add(5 * time.Minute)
	if err := st.RefreshedSSOSession(ctx, ss.ID, []byte("resealed"), at); err != nil {
		t.Fatalf("RefreshedSSOSession: %v", err)
	}
	ss.Refresh, ss.RefreshedAt = []byte("resealed"), at
	if diff := cmp.Diff(ss, sessionOf(t, st, k.ID)); diff != "" {
		t.Errorf("after RefreshedSSOSession (-want +got):\n%s", diff)
	}
	if err := st.RefreshedSSOSession(ctx, ss.ID, nil, at.Add(time.Minute)); err != nil {
		t.Fatalf("RefreshedSSOSession(no token): %v", err)
	}
	if got := sessionOf(t, st, k.ID); got.Refresh != nil || !got.RefreshedAt.Equal(at.Add(time.Minute)) {
		t.Errorf("after RefreshedSSOSession(nil): token %q refreshed at %v; want none, %v", got.Refresh, got.RefreshedAt, at.Add(time.Minute))
	}
	wantErr(t, "RefreshedSSOSession(unknown)", st.RefreshedSSOSession(ctx, "sso_nope", nil, at), fault.NotFound)
}

// testSSODue: DueSSOSessions leaves out sessions ended, expired, whose
// key is revoked or user disabled, without a token, or refreshed lately;
// the longest waiting first, at most limit.
func testSSODue(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	now := t0.Add(time.Hour)
	before := now.Add(-sso.DefaultRefreshEvery)
	expires := t0.Add(sso.DefaultKeyTTL)
	tok := []byte("sealed")
	if got, err := st.DueSSOSessions(ctx, now, before, 10); err != nil || len(got) != 0 {
		t.Errorf("DueSSOSessions of none = %v, %v", got, err)
	}

	// Due, by when each last heard from the provider: c, a, b.
	a := openSession(t, st, fx.ann, "sso_a", t0.Add(10*time.Minute), expires, tok)
	b := openSession(t, st, fx.ann, "sso_b", t0, expires, tok)
	if err := st.RefreshedSSOSession(ctx, b.ID, tok, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	c := openSession(t, st, fx.ann, "sso_c", t0.Add(5*time.Minute), expires, tok)

	recent := openSession(t, st, fx.ann, "sso_recent", t0, expires, tok)
	if err := st.RefreshedSSOSession(ctx, recent.ID, tok, before); err != nil {
		t.Fatal(err)
	}
	openSession(t, st, fx.ann, "sso_tokenless", t0, expires, nil)
	openSession(t, st, fx.ann, "sso_expired", t0, now, tok)
	ended := openSession(t, st, fx.ann, "sso_ended", t0, expires, tok)
	if err := st.EndSSOSession(ctx, ended.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	revoked := openSession(t, st, fx.ann, "sso_revoked", t0, expires, tok)
	if err := st.RevokeKey(ctx, revoked.Key, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	openSession(t, st, fx.bob, "sso_disabled", t0, expires, tok)
	if err := st.SetUserDisabled(ctx, fx.bob.ID, true, true); err != nil {
		t.Fatal(err)
	}

	got, err := st.DueSSOSessions(ctx, now, before, 10)
	if err != nil {
		t.Fatalf("DueSSOSessions: %v", err)
	}
	b.Refresh, b.RefreshedAt = tok, t0.Add(20*time.Minute)
	if diff := cmp.Diff([]sso.Session{c, a, b}, got); diff != "" {
		t.Errorf("DueSSOSessions (-want +got):\n%s", diff)
	}
	got, err = st.DueSSOSessions(ctx, now, before, 2)
	if err != nil {
		t.Fatalf("DueSSOSessions(limit 2): %v", err)
	}
	if diff := cmp.Diff([]string{c.ID, a.ID}, sessionIDs(got)); diff != "" {
		t.Errorf("DueSSOSessions(limit 2) (-want +got):\n%s", diff)
	}
	// Once recent is due too, it waited since before: after b.
	got, err = st.DueSSOSessions(ctx, now, before.Add(time.Nanosecond), 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{c.ID, a.ID, b.ID, recent.ID}, sessionIDs(got)); diff != "" {
		t.Errorf("DueSSOSessions(a nanosecond later) (-want +got):\n%s", diff)
	}
}

// testSSOEnd: ending a session revokes its key, once: a second end
// writes and records nothing.
func testSSOEnd(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	ss := openSession(t, st, fx.ann, "sso_1", t0, t0.Add(sso.DefaultKeyTTL), []byte("sealed"))
	at := t0.Add(time.Hour)
	ev := audit.Event{At: at, Org: fx.org.ID, Action: audit.SSOSignOut, Target: fx.ann.Name, Detail: "first"}
	if err := st.EndSSOSession(ctx, ss.ID, at, ev); err != nil {
		t.Fatalf("EndSSOSession: %v", err)
	}
	ev.Detail = "second"
	if err := st.EndSSOSession(ctx, ss.ID, at.Add(time.Hour), ev); err != nil {
		t.Fatalf("EndSSOSession(ended): %v", err)
	}
	if got := sessionOf(t, st, ss.Key); !got.EndedAt.Equal(at) {
		t.Errorf("session ended at %v, want %v (the first end stands)", got.EndedAt, at)
	}
	if k, err := st.GetKey(ctx, ss.Key); err != nil || !k.RevokedAt.Equal(at) {
		t.Errorf("the session's key: revoked at %v (%v), want %v", k.RevokedAt, err, at)
	}
	if got, want := auditOf(t, st, fx.org.ID, audit.SSOSignOut), []string{fx.ann.Name + ": first"}; !cmp.Equal(got, want) {
		t.Errorf("sign-out events = %q, want %q", got, want)
	}
	wantErr(t, "EndSSOSession(unknown)", st.EndSSOSession(ctx, "sso_nope", at, ev), fault.NotFound)

	// A key revoked before its session ends keeps its revocation time.
	ss2 := openSession(t, st, fx.ann, "sso_2", t0, t0.Add(sso.DefaultKeyTTL), nil)
	if err := st.RevokeKey(ctx, ss2.Key, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.EndSSOSession(ctx, ss2.ID, at); err != nil {
		t.Fatal(err)
	}
	if k, _ := st.GetKey(ctx, ss2.Key); !k.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("a revoked key's revocation moved to %v", k.RevokedAt)
	}

	// Ended from several goroutines at once: recorded once.
	ss3 := openSession(t, st, fx.ann, "sso_3", t0, t0.Add(sso.DefaultKeyTTL), nil)
	ev.Detail = "concurrent"
	done := make(chan error)
	for range 8 {
		go func() { done <- st.EndSSOSession(ctx, ss3.ID, at, ev) }()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Errorf("EndSSOSession(concurrent): %v", err)
		}
	}
	if got := auditOf(t, st, fx.org.ID, audit.SSOSignOut); len(got) != 2 {
		t.Errorf("sign-out events after 8 concurrent ends = %q, want one more", got)
	}
}

// testSSOEndUser: a user's live sessions end and their keys are revoked,
// with an event each, in one call; ended and expired ones, and other
// users', are left as they are.
func testSSOEndUser(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	expires := t0.Add(sso.DefaultKeyTTL)
	at := t0.Add(time.Hour)
	late := openSession(t, st, fx.ann, "sso_late", t0.Add(time.Minute), expires, nil)
	early := openSession(t, st, fx.ann, "sso_early", t0, expires, []byte("sealed"))
	ended := openSession(t, st, fx.ann, "sso_ended", t0, expires, nil)
	if err := st.EndSSOSession(ctx, ended.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	expired := openSession(t, st, fx.ann, "sso_expired", t0, at, nil)
	others := openSession(t, st, fx.bob, "sso_bob", t0, expires, nil)

	event := func(ss sso.Session) []audit.Event {
		return []audit.Event{{At: at, Org: fx.org.ID, Action: audit.SSOSignOut, Target: fx.ann.Name, Detail: ss.ID}}
	}
	n, err := st.EndUserSSOSessions(ctx, fx.ann.ID, at, event)
	if err != nil || n != 2 {
		t.Fatalf("EndUserSSOSessions = %d, %v; want 2", n, err)
	}
	want := []string{fx.ann.Name + ": " + early.ID, fx.ann.Name + ": " + late.ID}
	if got := auditOf(t, st, fx.org.ID, audit.SSOSignOut); !cmp.Equal(got, want) {
		t.Errorf("events = %q, want %q (oldest first)", got, want)
	}
	for _, tc := range []struct {
		ss           sso.Session
		ended, revok time.Time
	}{
		{early, at, at},
		{late, at, at},
		{ended, t0.Add(time.Minute), t0.Add(time.Minute)},
		{expired, time.Time{}, time.Time{}},
		{others, time.Time{}, time.Time{}},
	} {
		got := sessionOf(t, st, tc.ss.Key)
		k, err := st.GetKey(ctx, tc.ss.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !got.EndedAt.Equal(tc.ended) || !k.RevokedAt.Equal(tc.revok) {
			t.Errorf("%s: ended %v, key revoked %v; want %v, %v", tc.ss.ID, got.EndedAt, k.RevokedAt, tc.ended, tc.revok)
		}
	}
	if n, err := st.EndUserSSOSessions(ctx, fx.ann.ID, at.Add(time.Minute), event); err != nil || n != 0 {
		t.Errorf("EndUserSSOSessions again = %d, %v; want 0", n, err)
	}
	if got := auditOf(t, st, fx.org.ID, audit.SSOSignOut); len(got) != 2 {
		t.Errorf("events after a second call = %q, want no more", got)
	}
}

// testSSOForget: ForgetSSO deletes attempts and handoffs that expired,
// and sessions that ended or expired, before its time; nothing newer.
func testSSOForget(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	before := t0.Add(time.Hour)
	for _, a := range []sso.Attempt{
		{ID: "old", Browser: []byte{1}, CreatedAt: t0, ExpiresAt: before.Add(-1)},
		{ID: "new", Browser: []byte{1}, CreatedAt: t0, ExpiresAt: before},
	} {
		if err := st.CreateSSOAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []sso.Handoff{
		{ID: "old", User: fx.ann.ID, CreatedAt: t0, ExpiresAt: before.Add(-1)},
		{ID: "new", User: fx.ann.ID, CreatedAt: t0, ExpiresAt: before},
	} {
		if err := st.CreateSSOHandoff(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	expires := before.Add(time.Hour)
	endedOld := openSession(t, st, fx.ann, "sso_ended_old", t0, expires, nil)
	endedNew := openSession(t, st, fx.ann, "sso_ended_new", t0, expires, nil)
	expiredOld := openSession(t, st, fx.ann, "sso_expired_old", t0, before.Add(-1), nil)
	live := openSession(t, st, fx.ann, "sso_live", t0, expires, nil)
	for ss, at := range map[string]time.Time{endedOld.ID: before.Add(-1), endedNew.ID: before} {
		if err := st.EndSSOSession(ctx, ss, at); err != nil {
			t.Fatal(err)
		}
	}

	if err := st.ForgetSSO(ctx, before); err != nil {
		t.Fatalf("ForgetSSO: %v", err)
	}
	_, err := st.TakeSSOAttempt(ctx, "old", t0)
	wantErr(t, "TakeSSOAttempt(forgotten)", err, fault.NotFound)
	if _, err := st.TakeSSOAttempt(ctx, "new", t0); err != nil {
		t.Errorf("TakeSSOAttempt(kept): %v", err)
	}
	_, err = st.TakeSSOHandoff(ctx, "old", t0)
	wantErr(t, "TakeSSOHandoff(forgotten)", err, fault.NotFound)
	if _, err := st.TakeSSOHandoff(ctx, "new", t0); err != nil {
		t.Errorf("TakeSSOHandoff(kept): %v", err)
	}
	for _, ss := range []sso.Session{endedOld, expiredOld} {
		_, err := st.SSOSessionOfKey(ctx, ss.Key)
		wantErr(t, "SSOSessionOfKey("+ss.ID+", forgotten)", err, fault.NotFound)
	}
	for _, ss := range []sso.Session{endedNew, live} {
		if _, err := st.SSOSessionOfKey(ctx, ss.Key); err != nil {
			t.Errorf("SSOSessionOfKey(%s, kept): %v", ss.ID, err)
		}
	}
}
