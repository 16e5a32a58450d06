package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
)

// testSSODevices: a device grant is found by its user code while nobody
// has signed in for it and it is live; decided once (approved or
// denied), never after it expired; each poll returns it as it was and
// records the poll; taken once, and only once approved; forgotten when
// long expired.
func testSSODevices(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	expires := t0.Add(sso.DeviceTTL)
	d := sso.Device{ID: "dev-1", UserCode: "user-code-1", KeyName: "build box", Org: "acme", Interval: sso.DeviceInterval, CreatedAt: t0, ExpiresAt: expires}
	if err := st.CreateSSODevice(ctx, d); err != nil {
		t.Fatalf("CreateSSODevice: %v", err)
	}
	dup := d
	dup.ID = "dev-2"
	wantErr(t, "CreateSSODevice(a user code in use)", st.CreateSSODevice(ctx, dup), fault.Conflict)
	got, err := st.SSODeviceByUserCode(ctx, d.UserCode, t0)
	if err != nil {
		t.Fatalf("SSODeviceByUserCode: %v", err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("SSODeviceByUserCode (-want +got):\n%s", diff)
	}
	_, err = st.SSODeviceByUserCode(ctx, d.UserCode, expires)
	wantErr(t, "SSODeviceByUserCode(expired)", err, fault.NotFound)
	_, err = st.TakeSSODevice(ctx, d.ID)
	wantErr(t, "TakeSSODevice(nobody signed in)", err, fault.NotFound)

	polled := t0.Add(time.Second)
	got, err = st.PollSSODevice(ctx, d.ID, polled)
	if err != nil || !got.PolledAt.IsZero() {
		t.Fatalf("the first poll: %+v, %v; want the device as it was, never polled", got, err)
	}
	if got, err = st.PollSSODevice(ctx, d.ID, polled.Add(time.Second)); err != nil || !got.PolledAt.Equal(polled) {
		t.Fatalf("the second poll: polled at %s, %v; want %s", got.PolledAt, err, polled)
	}
	_, err = st.PollSSODevice(ctx, "dev-nope", t0)
	wantErr(t, "PollSSODevice(unknown)", err, fault.NotFound)

	sess := sso.Session{Issuer: issuer, Subject: "sub-ann", Refresh: []byte("sealed")}
	wantErr(t, "DecideSSODevice(expired)", st.DecideSSODevice(ctx, d.ID, fx.ann.ID, "", sess, expires), fault.NotFound)
	wantErr(t, "DecideSSODevice(unknown user)", st.DecideSSODevice(ctx, d.ID, "usr_nope", "", sess, t0), fault.NotFound)
	if err := st.DecideSSODevice(ctx, d.ID, fx.ann.ID, "", sess, t0); err != nil {
		t.Fatalf("DecideSSODevice: %v", err)
	}
	wantErr(t, "DecideSSODevice(decided)", st.DecideSSODevice(ctx, d.ID, fx.bob.ID, "", sess, t0), fault.NotFound)
	_, err = st.SSODeviceByUserCode(ctx, d.UserCode, t0)
	wantErr(t, "SSODeviceByUserCode(decided)", err, fault.NotFound)
	if wins := takeOnce(t, 8, func() error { _, err := st.TakeSSODevice(ctx, d.ID); return err }); wins != 1 {
		t.Errorf("%d of 8 concurrent takes of a device got it, want 1", wins)
	}

	// Denied: the poll says why, and it is never taken.
	denied := sso.Device{ID: "dev-3", UserCode: "user-code-3", Interval: sso.DeviceInterval, CreatedAt: t0, ExpiresAt: expires}
	if err := st.CreateSSODevice(ctx, denied); err != nil {
		t.Fatal(err)
	}
	if err := st.DecideSSODevice(ctx, denied.ID, "", "not given access", sso.Session{}, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := st.PollSSODevice(ctx, denied.ID, t0); err != nil || got.Denied != "not given access" || got.User != "" {
		t.Errorf("a denied device polled: %+v, %v", got, err)
	}
	_, err = st.TakeSSODevice(ctx, denied.ID)
	wantErr(t, "TakeSSODevice(denied)", err, fault.NotFound)
	if err := st.ForgetSSO(ctx, expires.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = st.PollSSODevice(ctx, denied.ID, t0)
	wantErr(t, "PollSSODevice(forgotten)", err, fault.NotFound)
}
