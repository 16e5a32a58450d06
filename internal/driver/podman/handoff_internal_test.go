package podman

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"berth.dev/berth/internal/handoff"
)

// TestTidyRemovesTheHandoffOfMachinesGone: the handoff directory of a
// machine podman no longer knows goes once it has been idle a while; one
// whose container podman lists stays, and so does one opened a moment
// ago (a machine being made opens it before its container exists), and
// a gateway that restarts removes nothing at once.
func TestTidyRemovesTheHandoffOfMachinesGone(t *testing.T) {
	hubDir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	ps := 0
	d := NewWithRunner(Config{StateDir: t.TempDir(), OrphanAge: 100 * time.Millisecond}, log,
		func(_ context.Context, _ []string, args ...string) ([]byte, error) {
			if args[0] != "ps" {
				t.Fatalf("podman %v: only ps is expected", args)
			}
			ps++
			return []byte("berth-sbx_kept\nsomebody-else\n"), nil
		})
	d.hub = handoff.NewHub(hubDir, log)
	t.Cleanup(d.hub.Close)
	for _, n := range []string{"berth-sbx_kept", "berth-sbx_gone", "berth-sbx_young"} {
		if _, err := d.hub.Open(n); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	if removed, err := d.tidyHandoff(ctx); err != nil || len(removed) != 0 || ps != 0 {
		t.Fatalf("tidy of directories just opened: removed %v, %v, asked podman %d times; want nothing, no call", removed, err, ps)
	}
	time.Sleep(150 * time.Millisecond)
	if _, err := d.hub.Open("berth-sbx_young"); err != nil { // its machine is being made again
		t.Fatal(err)
	}
	removed, err := d.tidyHandoff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{d.hub.Dir("berth-sbx_gone")}; !slices.Equal(removed, want) {
		t.Errorf("tidy removed %v, want %v", removed, want)
	}
	for n, want := range map[string]bool{"berth-sbx_kept": true, "berth-sbx_gone": false, "berth-sbx_young": true} {
		if _, err := os.Stat(d.hub.Dir(n)); (err == nil) != want {
			t.Errorf("%s's directory there: %v, want %v", n, err == nil, want)
		}
	}

	// A gateway started again listens in every directory left: none is
	// idle yet.
	d.hub.Close()
	d.hub = handoff.NewHub(hubDir, log)
	if err := d.hub.Reopen(); err != nil {
		t.Fatal(err)
	}
	if removed, err := d.tidyHandoff(ctx); err != nil || len(removed) != 0 {
		t.Errorf("tidy right after a restart removed %v, %v", removed, err)
	}
}
