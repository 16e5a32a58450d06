package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

// TestCreateUnderAWriterStallIsBusy: while the database's writers stall
// (another process holds the SQLite file's write lock), creates sent at
// once are answered 503 busy with Retry-After, never 500, and leave
// nothing behind; once the stall ends a create succeeds. Before, each
// waited out SQLite's 10 s busy timeout and came back 500 internal.
func TestCreateUnderAWriterStallIsBusy(t *testing.T) {
	w := newWorld(t, func(c *worldConfig) { c.store = []store.Option{store.WithWriteWait(100 * time.Millisecond)} })
	ctx := t.Context()
	release := storetest.LockSQLite(t, w.dbPath)

	// One create waits for the file's lock, the others in line behind it.
	const creates = 4
	type answer struct {
		status     int
		retryAfter string
		body       api.Error
	}
	answers := make([]answer, creates)
	var wg sync.WaitGroup
	for i := range creates {
		wg.Go(func() {
			body, _ := json.Marshal(api.CreateSandbox{Name: "stalled-" + strconv.Itoa(i), Class: "standard", SSHKeys: []string{sshKey}})
			req, err := http.NewRequestWithContext(ctx, "POST", w.url+"/sandbox/v1/sandboxes", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+w.adminKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			answers[i] = answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
			_ = json.NewDecoder(resp.Body).Decode(&answers[i].body)
		})
	}
	wg.Wait()
	release()

	for i, a := range answers {
		if a.status != http.StatusServiceUnavailable || a.body.Code != api.CodeBusy {
			t.Errorf("create %d under the stall = %d %q (%s), want 503 %s", i, a.status, a.body.Code, a.body.Message, api.CodeBusy)
			continue
		}
		if s, err := strconv.Atoi(a.retryAfter); err != nil || s < 1 {
			t.Errorf("create %d: Retry-After %q, want a number of seconds", i, a.retryAfter)
		}
	}
	sbs, err := w.admin.Sandboxes(ctx, client.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 0 {
		t.Errorf("after the refused creates: %d sandboxes, want none", len(sbs))
	}
	if _, err := w.admin.CreateSandbox(ctx, api.CreateSandbox{Name: "after", Class: "standard", SSHKeys: []string{sshKey}}); err != nil {
		t.Fatalf("create after the stall: %v", err)
	}
}
