package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/fault"
)

// TestEveryKindRoundTrips: the gateway's table answers every kind, and the
// client turns each answer back into its kind, with the field, the ids
// and when to try again; what has no kind is a 500 that says nothing.
func TestEveryKindRoundTrips(t *testing.T) {
	var refusal error
	s := &Server{log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, refusal) }))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "", nil)

	for _, k := range fault.Kinds {
		t.Run(string(k), func(t *testing.T) {
			a, ok := answers[k]
			if !ok {
				t.Fatalf("the gateway's table has no answer for %s", k)
			}
			refusal = &fault.Error{Kind: k, Message: "refused", Field: "f", IDs: []string{"sbx_1", "sbx_2"}, RetryAfter: 3 * time.Second}
			// A POST: the client sends nothing twice that may not be.
			_, err := c.Suspend(t.Context(), "x")
			if !errors.Is(err, k) {
				t.Fatalf("client: %v, want errors.Is %s", err, k)
			}
			e, ok := errors.AsType[*fault.Error](err)
			if !ok || e.Field != "f" || len(e.IDs) != 2 {
				t.Errorf("client: %#v, want field f and two ids", e)
			}
			ae, ok := errors.AsType[*api.Error](err)
			if !ok || ae.Status != a.status || ae.Code != a.code || ae.Message != "refused" {
				t.Errorf("client: %#v, want an *api.Error %d %s saying refused", ae, a.status, a.code)
			}
			if k == fault.RateLimited || k == fault.Busy {
				if e.RetryAfter != 3*time.Second {
					t.Errorf("Retry-After came back as %v, want 3s", e.RetryAfter)
				}
			}
		})
	}

	t.Run("headers", func(t *testing.T) {
		for _, tt := range []struct {
			err          error
			header, want string
		}{
			{fault.Unauthenticated, "WWW-Authenticate", `Bearer realm="berth"`},
			{fault.UpgradeRequired, "Upgrade", "berth-sandbox/1"},
			{fault.Busy, "Retry-After", "1"},
			{&fault.Error{Kind: fault.RateLimited, RetryAfter: 1500 * time.Millisecond}, "Retry-After", "2"},
		} {
			rec := httptest.NewRecorder()
			s.writeError(rec, httptest.NewRequest("GET", "/", nil), tt.err)
			if got := rec.Header().Get(tt.header); got != tt.want {
				t.Errorf("%v: %s %q, want %q", tt.err, tt.header, got, tt.want)
			}
		}
	})

	t.Run("no kind", func(t *testing.T) {
		refusal = errors.New("disk on fire at /var/lib/berth")
		_, err := c.Suspend(t.Context(), "x")
		ae, ok := errors.AsType[*api.Error](err)
		if !ok || ae.Status != http.StatusInternalServerError || ae.Code != api.CodeInternal || ae.Message != "internal error" {
			t.Errorf("client: %v, want 500 internal error", err)
		}
		if k := fault.Of(err); k != "" {
			t.Errorf("an internal error came back of kind %s", k)
		}
	})
}
