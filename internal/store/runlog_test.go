package store_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// readFor reads r until it holds want or a couple of seconds pass, as a
// follower does: to io.EOF, then again.
func readFor(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got strings.Builder
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("read the log: %v", err)
		}
		got.Write(b)
		if got.String() == want || time.Now().After(deadline) {
			return got.String()
		}
	}
}

// testRunLogs: a run's log in the database reads back whole, in order,
// across chunks; a reader at its end reads on what is written later (a
// quiet run's last line within the flush delay, not at Close); writing
// again starts it anew; Remove and the retention delete it.
func testRunLogs(t *testing.T, st *store.Store) {
	ctx := t.Context()
	logs := st.RunLogs()
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "dev", t0)
	mustCreate(t, st, sb, key)
	if _, err := logs.Read(ctx, sb.ID); !errors.Is(err, fault.NotFound) {
		t.Fatalf("Read before any log: %v, want not found", err)
	}

	w, err := logs.Write(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := logs.Read(ctx, sb.ID)
	if err != nil {
		t.Fatalf("Read of a log just begun: %v", err)
	}
	long := strings.Repeat("x", 100<<10) + "\n" // more than a chunk
	want := "first line\n" + long
	for _, s := range []string{"first line\n", long} {
		if _, err := io.WriteString(w, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := readFor(t, r, want); got != want {
		t.Fatalf("while the writer is open the reader got %d bytes, want %d", len(got), len(want))
	}
	if _, err := io.WriteString(w, "a quiet last line\n"); err != nil {
		t.Fatal(err)
	}
	if got := readFor(t, r, "a quiet last line\n"); got != "a quiet last line\n" {
		t.Errorf("a line written after the reader reached the end: %q", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := logs.Read(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(whole)
	if string(b) != want+"a quiet last line\n" {
		t.Errorf("the whole log is %d bytes, want %d", len(b), len(want)+18)
	}

	w, err = logs.Write(ctx, sb.ID) // the output read again from its start
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, "again\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := logs.Read(ctx, sb.ID)
	if b, _ := io.ReadAll(again); string(b) != "again\n" {
		t.Errorf("after a second Write the log is %q, want only what it wrote", b)
	}

	if err := logs.Remove(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := logs.Read(ctx, sb.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("Read after Remove: %v, want not found", err)
	}

	// Retention takes a log with its sandbox.
	w, _ = logs.Write(ctx, sb.ID)
	_, _ = io.WriteString(w, "kept until the sandbox goes\n")
	_ = w.Close()
	move(t, st, sb, sandbox.StateTerminated, t0.Add(time.Hour))
	if _, err := st.DeleteEnded(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := logs.Read(ctx, sb.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("Read after the retention deleted the sandbox: %v, want not found", err)
	}
}
