package eventtest_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"berth.dev/berth/internal/trigger/event/eventtest"
)

// TestPayloads: every builder makes one JSON object, the same bytes for
// the same arguments.
func TestPayloads(t *testing.T) {
	builders := map[string]func() []byte{
		"GitHubIssueLabeled": func() []byte {
			return eventtest.GitHubIssueLabeled("acme/app", "https://github.com", 1, "t", "b", "berth", "ada")
		},
		"GitHubPullRequestLabeled": func() []byte {
			return eventtest.GitHubPullRequestLabeled("acme/app", "https://github.com", 1, "t", "b", "berth", "ada")
		},
		"GitHubIssueComment": func() []byte {
			return eventtest.GitHubIssueComment("acme/app", "https://github.com", 1, true, "t", "b", "c", "ada")
		},
		"GitHubReviewComment": func() []byte {
			return eventtest.GitHubReviewComment("acme/app", "https://github.com", 1, "t", "b", "c", "ada")
		},
		"GitHubReview": func() []byte {
			return eventtest.GitHubReview("acme/app", "https://github.com", 1, "t", "b", "approved", "r", "ada")
		},
		"GitHubPing": eventtest.GitHubPing,
		"GitLabIssueLabeled": func() []byte {
			return eventtest.GitLabIssueLabeled("acme/app", "https://gitlab.com", 1, "t", "b", "berth", "ada")
		},
		"GitLabMergeRequestLabeled": func() []byte {
			return eventtest.GitLabMergeRequestLabeled("acme/app", "https://gitlab.com", 1, "t", "b", "berth", "ada")
		},
		"GitLabNote": func() []byte {
			return eventtest.GitLabNote("acme/app", "https://gitlab.com/acme/app", 1, true, "t", "b", "n", "ada")
		},
		"GitLabDiffNote": func() []byte {
			return eventtest.GitLabDiffNote("acme/app", "https://gitlab.com/acme/app", 1, "t", "b", "n", "ada")
		},
	}
	for name, build := range builders {
		t.Run(name, func(t *testing.T) {
			body := build()
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if again := build(); string(again) != string(body) {
				t.Errorf("%s made different bytes twice", name)
			}
		})
	}
}

func TestSignGitHub(t *testing.T) {
	body := []byte(`{"zen":"x"}`)
	req := httptest.NewRequest("POST", "/hooks/github", nil)
	eventtest.SignGitHub(req, []byte("s"), "ping", "d-1", body)
	if got, _ := io.ReadAll(req.Body); string(got) != string(body) || req.ContentLength != int64(len(body)) {
		t.Errorf("body %q (length %d), want %q", got, req.ContentLength, body)
	}
	mac := hmac.New(sha1.New, []byte("s"))
	mac.Write(body)
	want := map[string]string{
		"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d-1", "Content-Type": "application/json",
		"X-GitHub-Hook-Installation-Target-Type": "integration", "X-Hub-Signature": "sha1=" + hex.EncodeToString(mac.Sum(nil)),
	}
	for k, v := range want {
		if got := req.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"X-Hub-Signature-256", "User-Agent", "X-GitHub-Hook-ID", "X-GitHub-Hook-Installation-Target-ID"} {
		if req.Header.Get(k) == "" {
			t.Errorf("%s not set", k)
		}
	}
}

func TestSignGitLabAndWebhook(t *testing.T) {
	req := httptest.NewRequest("POST", "/hooks/gitlab", nil)
	eventtest.SignGitLabBody(req, "tok", "Note Hook", "u-1", []byte(`{}`))
	for k, v := range map[string]string{"X-Gitlab-Token": "tok", "X-Gitlab-Event": "Note Hook", "X-Gitlab-Event-UUID": "u-1", "Idempotency-Key": "u-1"} {
		if got := req.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	req = httptest.NewRequest("POST", "/hooks/webhook/t1", nil)
	eventtest.SignWebhook(req, []byte("s"), "d-1", time.Unix(1700000000, 0), []byte(`{}`))
	if got := req.Header.Get("X-Berth-Timestamp"); got != "1700000000" {
		t.Errorf("X-Berth-Timestamp %q, want 1700000000", got)
	}
}
