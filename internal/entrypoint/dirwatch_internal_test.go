package entrypoint

import (
	"context"
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
