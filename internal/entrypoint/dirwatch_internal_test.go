package entrypoint

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// TestClaimNoticedAsItComes: with a poll longer than the test may run,
// only the directory's watch can find the token, so a pass means the
// claim is seen as it is written (a podman pool's claim waits on it).
func TestClaimNoticedAsItComes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.BootstrapPath {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"env": {"BERTH_SANDBOX_ID": "sbx_1"}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "claim")
	vars := map[string]string{"BERTH_BOOTSTRAP_FILE": file, "BERTH_BASE_URL": srv.URL}
	env := Env{Getenv: func(k string) string { return vars[k] }, Environ: func() []string { return nil }, Stderr: io.Discard}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(dir, ".tmp"), []byte(`berth.dev/bootstrap-token="bst_X"`+"\n"), 0o644)
		_ = os.Rename(filepath.Join(dir, ".tmp"), file)
	}()
	got, err := bootstrap(ctx, env, time.Hour)
	if err != nil {
		t.Fatalf("bootstrap: %v (the token was not noticed as it came)", err)
	}
	if id := got.Getenv("BERTH_SANDBOX_ID"); id != "sbx_1" {
		t.Errorf("BERTH_SANDBOX_ID = %q", id)
	}
}

// TestClaimAgainAfterRefusal: a gateway killed after it marked the claim's
// token used, but before its answer arrived, is started again and hands
// the claim a new token; the machine, refused the first, takes the new
// one instead of ending its start (CI saw the machine exit 1 here).
func TestClaimAgainAfterRefusal(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "claim")
	write := func(token string) {
		_ = os.WriteFile(filepath.Join(dir, ".tmp"), []byte(`berth.dev/bootstrap-token="`+token+`"`+"\n"), 0o644)
		_ = os.Rename(filepath.Join(dir, ".tmp"), file)
	}
	var seen []string
	used := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer bst_NEW" || used {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"code": "unauthenticated", "message": "bootstrap: the token is unknown, used or expired"}`)
			if !used {
				go func() { time.Sleep(100 * time.Millisecond); write("bst_NEW") }()
			}
			return
		}
		used = true
		_, _ = io.WriteString(w, `{"env": {"BERTH_SANDBOX_ID": "sbx_1"}}`)
	}))
	defer srv.Close()
	vars := map[string]string{"BERTH_BOOTSTRAP_FILE": file, "BERTH_BASE_URL": srv.URL, "BERTH_READY_FILE": filepath.Join(dir, "ready")}
	env := Env{Getenv: func(k string) string { return vars[k] }, Environ: func() []string { return nil }, Stderr: io.Discard}
	write("bst_USED")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := bootstrap(ctx, env, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("bootstrap: %v (asked with %v)", err, seen)
	}
	if id := got.Getenv("BERTH_SANDBOX_ID"); id != "sbx_1" || len(seen) != 2 {
		t.Errorf("BERTH_SANDBOX_ID = %q after asking with %v, want sbx_1 after the used token and the new one", id, seen)
	}
	// Refused again with no newer claim, the start ends.
	write("bst_USED")
	if _, err := bootstrap(ctx, env, 10*time.Millisecond); err == nil || !errors.Is(err, errRefused) {
		t.Errorf("with no newer claim: %v, want the refusal", err)
	}
}
