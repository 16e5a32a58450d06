package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/sandbox"
)

// TestCreateTakesATaskUpToItsLimit is the task's limit over HTTP: a task
// of sandbox.MaxTask bytes is created however much JSON escapes it (Go's
// client writes each < as six bytes), one byte more is refused naming the
// task and the limit, a body past the create route's own limit is refused
// naming the body and that limit, and every other route keeps 1 MiB.
func TestCreateTakesATaskUpToItsLimit(t *testing.T) {
	w := newWorld(t)
	w.allowRepos(t, "acme")
	ctx := t.Context()
	line := strings.Repeat("<", 63) + "\n"
	task := strings.Repeat(line, sandbox.MaxTask/len(line))
	task += strings.Repeat("&", sandbox.MaxTask-len(task))
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "big", Purpose: "agent", Repo: "acme/app", Task: task})
	if err != nil {
		t.Fatalf("a task of %d bytes: %v", len(task), err)
	}
	stored, err := w.st.GetSandbox(ctx, sandbox.ID(sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	if stored.Task != task {
		t.Errorf("the stored task is %d bytes, want the %d sent", len(stored.Task), len(task))
	}

	_, err = w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "bigger", Purpose: "agent", Repo: "acme/app", Task: task + "x"})
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != api.CodeInvalid || e.Field != "task" ||
		!strings.Contains(e.Message, "at most 1048576 bytes") {
		t.Errorf("a task of %d bytes: %v, want 400 naming the task and its limit", len(task)+1, err)
	}

	for _, c := range []struct {
		path  string
		size  int
		limit string
	}{
		{"/sandbox/v1/sandboxes", 7<<20 + 1, "7 MiB"},
		{"/api/v1/orgs", 1<<20 + 1, "1 MiB"},
	} {
		body, _ := json.Marshal(map[string]string{"name": strings.Repeat("a", c.size)})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+c.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.opKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got api.Error
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || got.Code != api.CodeTooLarge || got.Field != "body" ||
			!strings.Contains(got.Message, "larger than "+c.limit) {
			t.Errorf("POST %s of %d bytes: %d %+v, want 413 too_large naming the body and %s", c.path, len(body), resp.StatusCode, got, c.limit)
		}
	}
}
