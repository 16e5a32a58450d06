package event_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/trigger/event/eventtest"
)

var now = time.Date(2026, 3, 2, 10, 41, 5, 0, time.UTC)

// webhook returns the headers of a generic webhook delivery of body sent
// at at, signed with the test secret.
func webhook(t *testing.T, body []byte, at time.Time) http.Header {
	req := httptest.NewRequest("POST", "/hooks/webhook/t1", nil)
	eventtest.SignWebhook(req, secret, "deploy-4711", at, body)
	if got := requestBody(t, req); string(got) != string(body) {
		t.Fatalf("SignWebhook made the body %q, want %q", got, body)
	}
	return req.Header
}

func TestWebhook(t *testing.T) {
	body := []byte(`{"title":"Deploy\nfailed","body":"step 3\u0007 of 5","id":12345678901234567890,"tags":["a\u0000b",{"c":"d\u001be"}],"nested":{"x":null}}`)
	got, err := event.Webhook(webhook(t, body, now.Add(-4*time.Minute)), body, secret, now)
	if err != nil {
		t.Fatalf("Webhook = %v", err)
	}
	want := event.Event{
		Source: event.SourceWebhook, Delivery: "deploy-4711", Kind: event.KindWebhook, Title: "Deploy failed", Body: "step 3 of 5",
		Payload: map[string]any{
			"title": "Deploy\nfailed", "body": "step 3 of 5", "id": json.Number("12345678901234567890"),
			"tags": []any{"ab", map[string]any{"c": "de"}}, "nested": map[string]any{"x": nil},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Webhook (-want +got):\n%s", diff)
	}
	checkEvent(t, got)

	t.Run("title and body not strings", func(t *testing.T) {
		body := []byte(`{"title":7,"body":{"a":1}}`)
		e, err := event.Webhook(webhook(t, body, now), body, secret, now)
		if err != nil || e.Title != "" || e.Body != "" {
			t.Fatalf("Webhook = %q, %q, %v; want no title nor body", e.Title, e.Body, err)
		}
	})
	t.Run("a clock a little ahead", func(t *testing.T) {
		if _, err := event.Webhook(webhook(t, body, now.Add(4*time.Minute)), body, secret, now); err != nil {
			t.Fatalf("Webhook = %v", err)
		}
	})
	t.Run("redelivery", func(t *testing.T) {
		again, err := event.Webhook(webhook(t, body, now), body, secret, now)
		if err != nil || again.Delivery != got.Delivery {
			t.Fatalf("Webhook again = %q, %v; want delivery %q", again.Delivery, err, got.Delivery)
		}
	})
}

func TestWebhookSignature(t *testing.T) {
	body := []byte(`{"title":"x"}`)
	stamp := strconv.FormatInt(now.Unix(), 10)
	sign := func(msg string) string {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(msg))
		return "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	tests := []struct {
		name   string
		header func(http.Header)
		secret []byte
		want   string // in the message
	}{
		{"stale", func(h http.Header) {
			old := strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10)
			h.Set("X-Berth-Timestamp", old)
			h.Set("X-Berth-Signature-256", sign(old+".deploy-4711."+string(body)))
		}, secret, "replay"},
		{"from the future", func(h http.Header) {
			late := strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10)
			h.Set("X-Berth-Timestamp", late)
			h.Set("X-Berth-Signature-256", sign(late+".deploy-4711."+string(body)))
		}, secret, "clock"},
		{"timestamp changed", func(h http.Header) { h.Set("X-Berth-Timestamp", strconv.FormatInt(now.Unix()-1, 10)) }, secret, "does not match"},
		{"no timestamp", func(h http.Header) { h.Del("X-Berth-Timestamp") }, secret, "unix seconds"},
		{"timestamp in milliseconds", func(h http.Header) { h.Set("X-Berth-Timestamp", stamp+"000000") }, secret, "unix seconds"},
		{"signed timestamp", func(h http.Header) { h.Set("X-Berth-Timestamp", "+"+stamp) }, secret, "unix seconds"},
		{"timestamp a date", func(h http.Header) { h.Set("X-Berth-Timestamp", now.Format(time.RFC3339)) }, secret, "unix seconds"},
		{"body signed alone", func(h http.Header) { h.Set("X-Berth-Signature-256", sign(string(body))) }, secret, "does not match"},
		{"delivery id changed (a replay under a new id)", func(h http.Header) { h.Set("X-Berth-Delivery", "deploy-4712") }, secret, "does not match"},
		{"signed without the delivery id", func(h http.Header) {
			h.Set("X-Berth-Signature-256", sign(h.Get("X-Berth-Timestamp")+"."+string(body)))
		}, secret, "does not match"},
		{"no signature", func(h http.Header) { h.Del("X-Berth-Signature-256") }, secret, "no X-Berth-Signature-256"},
		{"another secret", nil, []byte("another"), "does not match"},
		{"no secret set", nil, nil, "no secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := webhook(t, body, now)
			if tt.header != nil {
				tt.header(h)
			}
			_, err := event.Webhook(h, body, tt.secret, now)
			if !errors.Is(err, event.ErrSignature) || !errors.Is(err, fault.Unauthenticated) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Webhook = %v, want ErrSignature of kind unauthenticated saying %q", err, tt.want)
			}
		})
	}
}

// resign signs h again for delivery (none when ""), as a sender would.
func resign(h http.Header, delivery, body string) {
	req := httptest.NewRequest("POST", "/hooks/webhook/t1", nil)
	at, _ := strconv.ParseInt(h.Get("X-Berth-Timestamp"), 10, 64)
	eventtest.SignWebhook(req, secret, delivery, time.Unix(at, 0), []byte(body))
	for k, v := range req.Header {
		h[k] = v
	}
	if delivery == "" {
		h.Del("X-Berth-Delivery")
	}
}

func TestWebhookInvalid(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header func(http.Header)
		field  string
	}{
		{"no delivery id", `{}`, func(h http.Header) { resign(h, "", `{}`) }, "X-Berth-Delivery"},
		{"delivery id too long", `{}`, func(h http.Header) { resign(h, strings.Repeat("x", 129), `{}`) }, "X-Berth-Delivery"},
		{"empty", ``, nil, "body"},
		{"an array", `[{}]`, nil, "body"},
		{"null", `null`, nil, "body"},
		{"a string", `"x"`, nil, "body"},
		{"two objects", `{}{}`, nil, "body"},
		{"trailing garbage", `{"a":1} x`, nil, "body"},
		{"truncated", `{"a":`, nil, "body"},
		{"a key with a control character", `{"a\u0000":1}`, nil, "body"},
		{"a nested key with a newline", `{"a":[{"b\nc":1}]}`, nil, "body"},
		{"deep", string(deep(65)), nil, "body"},
		{"deep arrays", strings.Repeat("[", 65) + strings.Repeat("]", 65), nil, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := webhook(t, []byte(tt.body), now)
			if tt.header != nil {
				tt.header(h)
			}
			_, err := event.Webhook(h, []byte(tt.body), secret, now)
			if f, ok := errors.AsType[*fault.Error](err); !ok || f.Kind != fault.Invalid || f.Field != tt.field {
				t.Fatalf("Webhook(%q) = %v, want invalid on %s", tt.body, err, tt.field)
			}
		})
	}
	t.Run("deep, but not too deep", func(t *testing.T) {
		body := deep(64)
		if _, err := event.Webhook(webhook(t, body, now), body, secret, now); err != nil {
			t.Fatalf("Webhook(64 deep) = %v", err)
		}
	})
	t.Run("brackets in strings do not count", func(t *testing.T) {
		body := []byte(`{"a":"` + strings.Repeat(`{[\"`, 100) + `"}`)
		if _, err := event.Webhook(webhook(t, body, now), body, secret, now); err != nil {
			t.Fatalf("Webhook = %v", err)
		}
	})
}
