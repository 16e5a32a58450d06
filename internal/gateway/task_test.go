package gateway_test

import (
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

	// A body past the create route's own limit (7 MiB), and every other
	// route's, is TestBodyOverTheLimitIsOneAnswer's: the limits are read
	// from openapi.yaml, which a test holds to the route table.
	status, e2 := send(t, w, bodyRoute{method: "POST", path: "/sandbox/v1/sandboxes"},
		[]byte(`{"name":"`+strings.Repeat("a", 7<<20)+`"}`), false)
	if status != http.StatusRequestEntityTooLarge || e2.Field != "body" || !strings.Contains(e2.Message, "larger than 7 MiB") {
		t.Errorf("a create of 7 MiB and more: %d %+v, want 413 naming the body and 7 MiB", status, e2)
	}
}
