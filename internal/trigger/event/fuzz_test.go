package event_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/trigger/event/eventtest"
)

// The fuzz targets sign whatever body they are given with the known
// secret, so the parsers get past the signature and read it. None may
// panic; what they take must be bounded, valid UTF-8 and clean (checkEvent);
// what they refuse is ignored, invalid or too large, never anything else.

func FuzzGitHub(f *testing.F) {
	site := "https://github.com"
	for _, s := range []struct {
		kind string
		body []byte
	}{
		{"issues", eventtest.GitHubIssueLabeled("acme/app", site, 42, "Crash", "It crashes.", "berth", "ada")},
		{"pull_request", eventtest.GitHubPullRequestLabeled("acme/app", site, 7, "Faster", "Caches.", "berth", "ada")},
		{"issue_comment", eventtest.GitHubIssueComment("acme/app", site, 7, true, "Faster", "", "/berth fix", "ada")},
		{"issue_comment", eventtest.GitHubIssueComment("acme/app", site, 7, false, "t", "b", "/berth", "berth[bot]")},
		{"pull_request_review_comment", eventtest.GitHubReviewComment("acme/app", "https://ghe.example.com:8443", 7, "t", "b", "c", "ada")},
		{"pull_request_review", eventtest.GitHubReview("acme/app", site, 7, "Faster", "Caches.", "changes_requested", "Add a test.", "ada")},
		{"pull_request_review", eventtest.GitHubReview("acme/app", site, 7, "Faster", "", "approved", "", "ada")},
		{"pull_request_review", []byte(`{"action":"submitted","review":{"body":"\u0085 \u0000x","state":"commented"},` +
			`"pull_request":{"number":3,"html_url":"https://h/a/b/pull/3"},"repository":{"full_name":"a/b","html_url":"https://h/a/b"},"sender":{"login":"a"}}`)},
		{"ping", eventtest.GitHubPing()},
		{"issues", []byte(`{"action":"labeled","label":{"name":"\u0000"},"issue":{"number":1e3}}`)},
		{"issues", []byte(`{"action":"labeled","label":{"name":"b"},"issue":{"number":1,"title":"\ud800\u0085","html_url":"https://x/a/b/issues/1",` +
			`"pull_request":null},"repository":{"full_name":"a/b","html_url":"http://[::1]:80/a/b"},"sender":{"login":"a","type":"Bot"}}`)},
		{"issue_comment", []byte(`{"action":"created","comment":{"body":"` + "\xff" + `"},"issue":{"number":9223372036854775807,"html_url":"https://h/i"},` +
			`"repository":{"full_name":"a/b","html_url":"https://h:99999/a/b"},"sender":{"login":"a"}}`)},
		{"issues", deep(70)},
		{"issues", []byte(`[]`)},
	} {
		f.Add(s.kind, s.body)
	}
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		req := httptest.NewRequest("POST", "/hooks/github", nil)
		eventtest.SignGitHub(req, secret, kind, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)
		e, err := event.GitHub(req.Header, body, secret)
		checkOutcome(t, e, err, len(body))
	})
}

func FuzzGitLab(f *testing.F) {
	site := "https://gitlab.example.com:8443"
	for _, s := range []struct {
		hook string
		body []byte
	}{
		{"Issue Hook", eventtest.GitLabIssueLabeled("acme/platform/app", site, 12, "Crash", "It crashes.", "berth", "ada")},
		{"Merge Request Hook", eventtest.GitLabMergeRequestLabeled("acme/app", site, 5, "Faster", "Caches.", "berth", "ada")},
		{"Note Hook", eventtest.GitLabNote("acme/app", site, 12, false, "Crash", "It crashes.", "/berth fix", "ada")},
		{"Note Hook", eventtest.GitLabNote("acme/app", site, 5, true, "Faster", "", "/berth", "project_1_bot_ab12")},
		{"Note Hook", eventtest.GitLabDiffNote("acme/app", site, 5, "Faster", "Caches.", "Name this.", "ada")},
		{"Note Hook", []byte(`{"object_kind":"note","object_attributes":{"noteable_type":"MergeRequest","type":null,"position":[],"url":"https://h/a#note_1"},` +
			`"merge_request":{"iid":2},"project":{"path_with_namespace":"a/b","web_url":"https://h/a/b"},"user":{"username":"u"}}`)},
		{"Issue Hook", []byte(`{"object_kind":"issue","object_attributes":{"action":"update","iid":1,"url":"https://h/a/b/-/issues/1"},` +
			`"changes":{"labels":{"previous":[{"title":"a"}],"current":[{"title":"a"},{"title":"` + strings.Repeat("é", 200) + `"}]}},` +
			`"project":{"path_with_namespace":"a/b","web_url":"https://h/a/b"},"user":{"username":"u"}}`)},
		{"Issue Hook", []byte(`{"object_kind":"issue","object_attributes":{"action":"open","labels":[{"title":"x"}]},"changes":[]}`)},
		{"Note Hook", []byte(`{"object_kind":"note","object_attributes":{"noteable_type":"MergeRequest","url":"https://h/a#note_1"},` +
			`"merge_request":{"iid":2},"project":{"path_with_namespace":"a/b","web_url":"https://h/a/b"},"user":{"username":"u"}}`)},
		{"Push Hook", []byte(`{}`)},
		{"Note Hook", deep(70)},
	} {
		f.Add(s.hook, s.body)
	}
	f.Fuzz(func(t *testing.T, hook string, body []byte) {
		req := httptest.NewRequest("POST", "/hooks/gitlab", nil)
		eventtest.SignGitLab(req, "token", hook, "f5e5f430-f57b-4e6e-9fac-d9128cd7232f")
		e, err := event.GitLab(req.Header, body, "token")
		checkOutcome(t, e, err, len(body))
	})
}

func FuzzWebhook(f *testing.F) {
	for _, s := range []string{
		`{"title":"Deploy failed","body":"step 3 of 5","n":1e400,"list":[1,"a",null,true,{"b":[]}]}`,
		`{"title":"` + strings.Repeat("ü", 600) + `"}`, `{"a\u0000":1}`, `{"a":"\u0000\ud800` + "\xff" + `"}`,
		`{}`, `[]`, `null`, `{}{}`, `{"a":1} `, `{"a":`, ``, "\xef\xbb\xbf{}", string(deep(64)), string(deep(65)),
		`{"a":"` + strings.Repeat(`{\"`, 80) + `"}`, `{"a":"\\"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/hooks/webhook/t1", nil)
		eventtest.SignWebhook(req, secret, "d-1", now, body)
		e, err := event.Webhook(req.Header, body, secret, now)
		checkOutcome(t, e, err, len(body))
		if err == nil && e.Payload == nil {
			t.Fatalf("Webhook took %q without a payload", body)
		}
	})
}

// checkOutcome checks what a parser made of a signed delivery.
func checkOutcome(t *testing.T, e event.Event, err error, size int) {
	t.Helper()
	if err != nil {
		switch k := fault.Of(err); {
		case errors.Is(err, event.ErrIgnored) && k == "":
		case k == fault.Invalid:
		case k == fault.TooLarge && size > event.MaxBody:
		default:
			t.Fatalf("a signed delivery refused with %v (kind %q)", err, k)
		}
		if e.Source != "" || e.Payload != nil {
			t.Fatalf("an event (%+v) with the error %v", e, err)
		}
		if msg := err.Error(); !utf8.ValidString(msg) || len(msg) > 1024 {
			t.Fatalf("error message of %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
		}
		return
	}
	checkEvent(t, e)
}

// checkEvent checks that e is bounded, valid UTF-8 and clean.
func checkEvent(t *testing.T, e event.Event) {
	t.Helper()
	if e.Delivery == "" || len(e.Delivery) > 128 || strings.ContainsFunc(e.Delivery, func(r rune) bool { return r <= ' ' || r > '~' }) {
		t.Errorf("Delivery %q: want 1 to 128 visible ASCII characters", e.Delivery)
	}
	textOK(t, "Title", e.Title, event.MaxTitle, false)
	textOK(t, "Body", e.Body, event.MaxText, true)
	textOK(t, "Comment", e.Comment, event.MaxText, true)
	switch e.Source {
	case event.SourceGitHub, event.SourceGitLab:
		if e.Kind != event.KindIssueLabeled && e.Kind != event.KindComment {
			t.Errorf("Kind %q from %s", e.Kind, e.Source)
		}
		if err := forge.CheckPath(e.Repo); err != nil || !strings.Contains(e.Repo, "/") {
			t.Errorf("Repo %q: not a repository path (%v)", e.Repo, err)
		}
		if e.Host == "" || len(e.Host) > 255 || e.Host != strings.ToLower(e.Host) || strings.ContainsAny(e.Host, "/@ ") {
			t.Errorf("Host %q", e.Host)
		}
		if e.Thread.Number <= 0 || (e.Thread.Kind != forge.ThreadIssue && e.Thread.Kind != forge.ThreadChange) {
			t.Errorf("Thread %+v", e.Thread)
		}
		if len(e.URL) > 2048 || !(strings.HasPrefix(e.URL, "https://") || strings.HasPrefix(e.URL, "http://")) {
			t.Errorf("URL %q", e.URL)
		}
		nameOK(t, "Author", e.Author, true)
		nameOK(t, "Label", e.Label, e.Kind == event.KindIssueLabeled)
		if e.Kind == event.KindComment && e.Label != "" || e.Kind == event.KindIssueLabeled && e.Comment != "" {
			t.Errorf("a %s with Label %q and Comment %q", e.Kind, e.Label, e.Comment)
		}
		if e.Review && (e.Kind != event.KindComment || e.Thread.Kind != forge.ThreadChange) {
			t.Errorf("a review's %s on %+v: only comments on pull (merge) requests are", e.Kind, e.Thread)
		}
		if e.Payload != nil {
			t.Errorf("a payload from %s", e.Source)
		}
	case event.SourceWebhook:
		if e.Kind != event.KindWebhook || e.Repo != "" || e.Host != "" || e.Payload == nil || e.Review {
			t.Errorf("webhook event %+v", e)
		}
		payloadOK(t, e.Payload)
	default:
		t.Errorf("Source %q", e.Source)
	}
}

func textOK(t *testing.T, field, s string, limit int, multiline bool) {
	t.Helper()
	if len(s) > limit {
		t.Errorf("%s: %d bytes, over %d", field, len(s), limit)
	}
	if !utf8.ValidString(s) {
		t.Errorf("%s: not valid UTF-8: %q", field, s)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) }); i >= 0 {
		t.Errorf("%s: a control character at %d: %q", field, i, s)
	}
}

func nameOK(t *testing.T, field, s string, required bool) {
	t.Helper()
	if required && s == "" {
		t.Errorf("%s: missing", field)
	}
	if len(s) > 255 || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		t.Errorf("%s %q: over 255 bytes, or not clean", field, s)
	}
}

func payloadOK(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case string:
		textOK(t, "Payload", v, event.MaxBody, true)
	case map[string]any:
		for k, x := range v {
			textOK(t, "Payload key", k, event.MaxBody, false)
			payloadOK(t, x)
		}
	case []any:
		for _, x := range v {
			payloadOK(t, x)
		}
	}
}
