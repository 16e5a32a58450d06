package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// busyServer answers 503 busy with retryAfter (none when "") to the first
// busy requests, then 200 with body; it keeps every request's method,
// path and body.
type busyServer struct {
	busy       int
	retryAfter string
	body       string

	mu   sync.Mutex
	seen []string // "METHOD path body"
}

func (b *busyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.seen = append(b.seen, r.Method+" "+r.URL.Path+" "+string(in))
	n := len(b.seen)
	b.mu.Unlock()
	if n <= b.busy {
		if b.retryAfter != "" {
			w.Header().Set("Retry-After", b.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"code":"busy","message":"no turn to write to the database within 5s"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, b.body)
}

func (b *busyServer) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

// newBusy serves b and returns a client of it whose waits are recorded,
// not slept.
func newBusy(t *testing.T, b *busyServer) (*client.Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	var waits []time.Duration
	c := client.WithSleep(client.New(srv.URL, "k", srv.Client()), func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	})
	return c, &waits
}

// TestBusyIsRetriedWhenSafe: a 503 to a call safe to repeat (GET, PUT,
// DELETE) is sent again, the same, after Retry-After (up to half of it
// again at random); a POST is sent once and its 503 comes back as busy.
func TestBusyIsRetriedWhenSafe(t *testing.T) {
	tests := []struct {
		name  string
		call  func(ctx context.Context, c *client.Client) error
		retry bool
	}{
		{"GET a sandbox", func(ctx context.Context, c *client.Client) error { _, err := c.Sandbox(ctx, "web"); return err }, true},
		{"GET the sandboxes", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandboxes(ctx, client.ListOptions{})
			return err
		}, true},
		{"PUT a guardrail", func(ctx context.Context, c *client.Client) error {
			n := 3
			_, err := c.SetGuardrail(ctx, "acme", "", api.Guardrail{MaxSandboxes: &n})
			return err
		}, true},
		{"DELETE a key", func(ctx context.Context, c *client.Client) error { return c.RevokeKey(ctx, "key_1") }, true},
		{"POST a sandbox", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateSandbox(ctx, api.CreateSandbox{Name: "web", Class: "standard"})
			return err
		}, false},
		{"POST terminate", func(ctx context.Context, c *client.Client) error { _, err := c.Terminate(ctx, "web"); return err }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &busyServer{busy: 2, retryAfter: "2", body: `{}`}
			c, waits := newBusy(t, b)
			err := tt.call(t.Context(), c)
			seen := b.requests()
			if !tt.retry {
				if len(seen) != 1 {
					t.Fatalf("sent %d times, want once: %q", len(seen), seen)
				}
				if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeBusy || e.Status != http.StatusServiceUnavailable {
					t.Fatalf("error = %v, want 503 %s", err, api.CodeBusy)
				}
				return
			}
			if err != nil {
				t.Fatalf("call = %v, want it answered after two retries", err)
			}
			if len(seen) != 3 || seen[1] != seen[0] || seen[2] != seen[0] {
				t.Fatalf("requests = %q, want the same one three times", seen)
			}
			if len(*waits) != 2 {
				t.Fatalf("waited %v, want twice", *waits)
			}
			for _, d := range *waits {
				if d < 2*time.Second || d > 3*time.Second {
					t.Errorf("waited %v after Retry-After: 2, want 2s to 3s", d)
				}
			}
		})
	}
}

// TestBusyRetriesAreBounded: the waits are Retry-After, seconds or a date,
// or a second when it says nothing, never over the cap (plus its jitter);
// after MaxRetries the 503 comes back; a wait past the context's deadline
// is not taken.
func TestBusyRetriesAreBounded(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		lo, hi     time.Duration
	}{
		{"no Retry-After", "", time.Second, 1500 * time.Millisecond},
		{"an hour", "3600", client.MaxWait, client.MaxWait * 3 / 2},
		{"a date", time.Now().Add(4 * time.Second).UTC().Format(http.TimeFormat), 2 * time.Second, 6 * time.Second},
		{"now", "0", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &busyServer{busy: 1000, retryAfter: tt.retryAfter}
			c, waits := newBusy(t, b)
			_, err := c.Sandbox(t.Context(), "web")
			if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeBusy {
				t.Fatalf("error = %v, want busy once the retries are spent", err)
			}
			if n := len(b.requests()); n != 1+client.MaxRetries {
				t.Errorf("sent %d times, want %d", n, 1+client.MaxRetries)
			}
			for _, d := range *waits {
				if d < tt.lo || d > tt.hi {
					t.Errorf("waited %v after Retry-After %q, want %v to %v", d, tt.retryAfter, tt.lo, tt.hi)
				}
			}
		})
	}
	t.Run("past the deadline", func(t *testing.T) {
		b := &busyServer{busy: 1, retryAfter: "5", body: `{}`}
		c, waits := newBusy(t, b)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := c.Sandbox(ctx, "web"); err == nil {
			t.Fatal("answered, want the 503: the wait does not fit the deadline")
		}
		if len(*waits) != 0 || len(b.requests()) != 1 {
			t.Errorf("waited %v over %d requests, want no retry", *waits, len(b.requests()))
		}
	})
}
