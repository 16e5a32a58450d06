package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/store"
)

// testInvitations: an invitation round-trips; a newer one replaces the
// unused one before it; an administrator's (not recovery) is refused for
// a user who has had a key, at issue and at use; it is used once, and
// neither a replaced nor an expired one is used at all.
func testInvitations(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	expires := t0.Add(72 * time.Hour)

	first, _ := account.NewInvitation(fx.bob.ID, fx.ann.ID, false, t0, expires)
	if err := st.CreateInvitation(ctx, first); err != nil {
		t.Fatalf("CreateInvitation: %v", err)
	}
	got, err := st.GetInvitation(ctx, first.ID)
	if err != nil {
		t.Fatalf("GetInvitation: %v", err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("invitation round trip (-want +got):\n%s", diff)
	}
	wantErr(t, "GetInvitation(unknown)", func() error { _, err := st.GetInvitation(ctx, "inv_nope"); return err }(), fault.NotFound)
	orphan, _ := account.NewInvitation("usr_nope", fx.ann.ID, false, t0, expires)
	wantErr(t, "CreateInvitation(unknown user)", st.CreateInvitation(ctx, orphan), fault.NotFound)

	// A second one replaces the first, which can no longer be used.
	second, _ := account.NewInvitation(fx.bob.ID, fx.ann.ID, false, t0.Add(time.Minute), expires)
	if err := st.CreateInvitation(ctx, second); err != nil {
		t.Fatalf("CreateInvitation(second): %v", err)
	}
	if got, _ := st.GetInvitation(ctx, first.ID); !got.ReplacedAt.Equal(second.CreatedAt) {
		t.Errorf("first invitation replaced at %v, want %v (the second's creation)", got.ReplacedAt, second.CreatedAt)
	}
	k1, _ := account.NewKey(fx.bob.ID, "enrolled", t0.Add(2*time.Minute))
	wantErr(t, "RedeemInvitation(replaced)", st.RedeemInvitation(ctx, first.ID, t0.Add(2*time.Minute), "192.0.2.1", k1), fault.Conflict)
	wantErr(t, "RedeemInvitation(expired)", st.RedeemInvitation(ctx, second.ID, expires, "192.0.2.1", k1), fault.Conflict)
	wantErr(t, "RedeemInvitation(unknown)", st.RedeemInvitation(ctx, "inv_nope", t0, "192.0.2.1", k1), fault.NotFound)
	if keys, _, _ := st.ListKeys(ctx, fx.bob.ID, paging.Request{}); len(keys) != 0 {
		t.Fatalf("refused redemptions wrote keys: %v", keys)
	}

	// Used once, from several goroutines at once: exactly one wins.
	at := t0.Add(3 * time.Minute)
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for range n {
		wg.Go(func() {
			k, _ := account.NewKey(fx.bob.ID, "enrolled", at)
			err := st.RedeemInvitation(ctx, second.ID, at, "192.0.2.7", k)
			if err == nil {
				mu.Lock()
				wins = append(wins, k.ID)
				mu.Unlock()
			} else if !errors.Is(err, fault.Conflict) {
				t.Errorf("RedeemInvitation(concurrent) = %v, want nil or ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d of %d concurrent redemptions succeeded, want 1", len(wins), n)
	}
	got, _ = st.GetInvitation(ctx, second.ID)
	if !got.RedeemedAt.Equal(at) || got.RedeemedFrom != "192.0.2.7" || got.Key != wins[0] {
		t.Errorf("redeemed invitation = at %v from %q key %q; want %v, 192.0.2.7, %s", got.RedeemedAt, got.RedeemedFrom, got.Key, at, wins[0])
	}
	if keys, _, _ := st.ListKeys(ctx, fx.bob.ID, paging.Request{}); len(keys) != 1 || keys[0].ID != wins[0] {
		t.Errorf("bob's keys after redemption = %v, want the one key %s", keys, wins[0])
	}

	// bob has had a key: an administrator's invitation is refused, an
	// operator's (recovery) is not, and it is used despite bob's key.
	third, _ := account.NewInvitation(fx.bob.ID, fx.ann.ID, false, t0.Add(4*time.Minute), expires)
	wantErr(t, "CreateInvitation(enrolled user)", st.CreateInvitation(ctx, third), fault.Conflict)
	recovery, _ := account.NewInvitation(fx.bob.ID, "usr_ops", true, t0.Add(5*time.Minute), expires)
	if err := st.CreateInvitation(ctx, recovery); err != nil {
		t.Fatalf("CreateInvitation(recovery): %v", err)
	}
	k2, _ := account.NewKey(fx.bob.ID, "recovered", t0.Add(6*time.Minute))
	if err := st.RedeemInvitation(ctx, recovery.ID, t0.Add(6*time.Minute), "192.0.2.8", k2); err != nil {
		t.Fatalf("RedeemInvitation(recovery): %v", err)
	}

	// An administrator's invitation issued before a user got a key some
	// other way (an operator minted one) is refused at use.
	early, _ := account.NewInvitation(fx.ann.ID, fx.ann.ID, false, t0, expires)
	if err := st.CreateInvitation(ctx, early); err != nil {
		t.Fatal(err)
	}
	minted, _ := account.NewKey(fx.ann.ID, "by an operator", t0.Add(time.Minute))
	if err := st.CreateKey(ctx, minted); err != nil {
		t.Fatal(err)
	}
	k3, _ := account.NewKey(fx.ann.ID, "enrolled", t0.Add(2*time.Minute))
	wantErr(t, "RedeemInvitation(user with a key)", st.RedeemInvitation(ctx, early.ID, t0.Add(2*time.Minute), "192.0.2.9", k3), fault.Conflict)
	if got, _ := st.GetInvitation(ctx, early.ID); !got.RedeemedAt.IsZero() {
		t.Errorf("a refused redemption marked the invitation used at %v", got.RedeemedAt)
	}
}
