package event_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/trigger/event/eventtest"
)

var secret = []byte("webhook secret, 32 bytes or so..")

const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

// github signs body as a GitHub delivery of kind with the test secret and
// returns its headers.
func github(kind string, body []byte) http.Header {
	req := httptest.NewRequest("POST", "/hooks/github", nil)
	eventtest.SignGitHub(req, secret, kind, delivery, body)
	return req.Header
}

func TestGitHub(t *testing.T) {
	const site = "https://github.com"
	tests := []struct {
		name string
		kind string
		body []byte
		want event.Event
	}{
		{"issue labeled", "issues", eventtest.GitHubIssueLabeled("acme/app", site, 42, "Crash on start", "It crashes.\n\nSteps:\n\t1. run", "berth", "ada"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindIssueLabeled, Repo: "acme/app", Host: "github.com",
				Label: "berth", Labels: []string{"berth"}, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 42}, Title: "Crash on start",
				Body: "It crashes.\n\nSteps:\n\t1. run", URL: "https://github.com/acme/app/issues/42", Author: "ada"}},
		{"a bot's label counts", "issues", eventtest.GitHubIssueLabeled("acme/app", site, 42, "Crash", "", "berth", "triage[bot]"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindIssueLabeled, Repo: "acme/app", Host: "github.com",
				Label: "berth", Labels: []string{"berth"}, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 42}, Title: "Crash",
				URL: "https://github.com/acme/app/issues/42", Author: "triage[bot]"}},
		{"pull request labeled", "pull_request", eventtest.GitHubPullRequestLabeled("acme/app", site, 7, "Faster start", "Caches the index.", "berth-review", "ada"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindIssueLabeled, Repo: "acme/app", Host: "github.com",
				Label: "berth-review", Labels: []string{"berth-review"}, Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "Faster start",
				Body: "Caches the index.", URL: "https://github.com/acme/app/pull/7", Author: "ada"}},
		{"issue comment", "issue_comment", eventtest.GitHubIssueComment("acme/app", site, 42, false, "Crash", "It crashes.", "/berth fix it", "grace"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindComment, Repo: "acme/app", Host: "github.com",
				Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 42}, Title: "Crash", Body: "It crashes.",
				URL: "https://github.com/acme/app/issues/42", Comment: "/berth fix it", Author: "grace"}},
		{"pull request comment", "issue_comment", eventtest.GitHubIssueComment("acme/app", site, 7, true, "Faster start", "", "/berth review", "grace"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindComment, Repo: "acme/app", Host: "github.com",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "Faster start",
				URL: "https://github.com/acme/app/pull/7", Comment: "/berth review", Author: "grace"}},
		{"review comment", "pull_request_review_comment", eventtest.GitHubReviewComment("acme/app", site, 7, "Faster start", "Caches.", "/berth explain", "grace"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindComment, Repo: "acme/app", Host: "github.com",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "Faster start", Body: "Caches.",
				URL: "https://github.com/acme/app/pull/7", Comment: "/berth explain", Review: true, Author: "grace"}},
		{"review submitted with a body", "pull_request_review", eventtest.GitHubReview("acme/app", site, 7, "Faster start", "Caches.", "commented", "Split the cache\r\nout, please.\u0007", "grace"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindComment, Repo: "acme/app", Host: "github.com",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "Faster start", Body: "Caches.",
				URL: "https://github.com/acme/app/pull/7", Comment: "Split the cache\nout, please.", Review: true, Author: "grace"}},
		{"changes requested", "pull_request_review", eventtest.GitHubReview("acme/app", site, 7, "Faster start", "", "changes_requested", "The test is missing.", "grace"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindComment, Repo: "acme/app", Host: "github.com",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "Faster start",
				URL: "https://github.com/acme/app/pull/7", Comment: "The test is missing.", Review: true, Author: "grace"}},
		{"an approval with a body", "pull_request_review", eventtest.GitHubReview("acme/app", site, 7, "Faster start", "", "approved", "Fine, but rename Cache to Index.", "grace"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindComment, Repo: "acme/app", Host: "github.com",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "Faster start",
				URL: "https://github.com/acme/app/pull/7", Comment: "Fine, but rename Cache to Index.", Review: true, Author: "grace"}},
		{"enterprise host and port", "issues", eventtest.GitHubIssueLabeled("Acme/App", "https://GHE.example.com:8443/", 1, "t", "b", "berth", "ada"),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindIssueLabeled, Repo: "Acme/App", Host: "ghe.example.com:8443",
				Label: "berth", Labels: []string{"berth"}, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 1}, Title: "t", Body: "b",
				URL: "https://GHE.example.com:8443/Acme/App/issues/1", Author: "ada"}},
		{"an issue that is a pull request", "issues", []byte(`{"action":"labeled","label":{"name":"berth"},
			"issue":{"number":7,"title":"t","body":null,"html_url":"https://github.com/acme/app/pull/7","pull_request":{"url":"x"}},
			"repository":{"full_name":"acme/app","html_url":"https://github.com/acme/app"},"sender":{"login":"ada","type":"User"}}`),
			event.Event{Source: event.SourceGitHub, Delivery: delivery, Kind: event.KindIssueLabeled, Repo: "acme/app", Host: "github.com",
				Label: "berth", Labels: []string{"berth"}, Thread: forge.Thread{Kind: forge.ThreadChange, Number: 7}, Title: "t",
				URL: "https://github.com/acme/app/pull/7", Author: "ada"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := event.GitHub(github(tt.kind, tt.body), tt.body, secret)
			if err != nil {
				t.Fatalf("GitHub(%s) = %v", tt.kind, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GitHub(%s) (-want +got):\n%s", tt.kind, diff)
			}
			checkEvent(t, got)
		})
	}
}

func TestGitHubRedelivery(t *testing.T) {
	body := eventtest.GitHubIssueComment("acme/app", "https://github.com", 3, false, "t", "b", "/berth go", "ada")
	first, err := event.GitHub(github("issue_comment", body), body, secret)
	if err != nil {
		t.Fatal(err)
	}
	again, err := event.GitHub(github("issue_comment", body), body, secret)
	if err != nil {
		t.Fatal(err)
	}
	if first.Delivery != delivery || again.Delivery != first.Delivery {
		t.Errorf("Delivery %q then %q, want %q both times", first.Delivery, again.Delivery, delivery)
	}
}

func TestGitHubIgnored(t *testing.T) {
	site := "https://github.com"
	tests := []struct {
		name string
		kind string
		body []byte
	}{
		{"ping", "ping", eventtest.GitHubPing()},
		{"push", "push", []byte(`{"ref":"refs/heads/main"}`)},
		{"another event, not even JSON", "installation", []byte(`not JSON`)},
		{"issue opened", "issues", bytes.Replace(eventtest.GitHubIssueLabeled("acme/app", site, 1, "t", "b", "berth", "ada"), []byte(`"action":"labeled"`), []byte(`"action":"opened"`), 1)},
		{"issue unlabeled", "issues", bytes.Replace(eventtest.GitHubIssueLabeled("acme/app", site, 1, "t", "b", "berth", "ada"), []byte(`"action":"labeled"`), []byte(`"action":"unlabeled"`), 1)},
		{"comment edited", "issue_comment", bytes.Replace(eventtest.GitHubIssueComment("acme/app", site, 1, false, "t", "b", "/berth", "ada"), []byte(`"action":"created"`), []byte(`"action":"edited"`), 1)},
		{"bot comment", "issue_comment", eventtest.GitHubIssueComment("acme/app", site, 1, false, "t", "b", "/berth fix", "berth[bot]")},
		{"bot review comment", "pull_request_review_comment", eventtest.GitHubReviewComment("acme/app", site, 1, "t", "b", "/berth fix", "berth[bot]")},
		{"approval without a body", "pull_request_review", eventtest.GitHubReview("acme/app", site, 1, "t", "b", "approved", "", "ada")},
		{"review around diff comments, without a body", "pull_request_review", eventtest.GitHubReview("acme/app", site, 1, "t", "b", "commented", "", "ada")},
		{"review whose body is white space", "pull_request_review", eventtest.GitHubReview("acme/app", site, 1, "t", "b", "commented", " \r\n\t\u0000\u3000", "ada")},
		{"review with an empty body, otherwise malformed", "pull_request_review", []byte(`{"action":"submitted","review":{"body":"","state":"approved"}}`)},
		{"bot review", "pull_request_review", eventtest.GitHubReview("acme/app", site, 1, "t", "b", "changes_requested", "Fix the test.", "berth[bot]")},
		{"review edited", "pull_request_review", bytes.Replace(eventtest.GitHubReview("acme/app", site, 1, "t", "b", "commented", "Fix it.", "ada"), []byte(`"action":"submitted"`), []byte(`"action":"edited"`), 1)},
		{"review dismissed", "pull_request_review", bytes.Replace(eventtest.GitHubReview("acme/app", site, 1, "t", "b", "dismissed", "Fix it.", "ada"), []byte(`"action":"submitted"`), []byte(`"action":"dismissed"`), 1)},
		{"pull request synchronize", "pull_request", bytes.Replace(eventtest.GitHubPullRequestLabeled("acme/app", site, 1, "t", "b", "berth", "ada"), []byte(`"action":"labeled"`), []byte(`"action":"synchronize"`), 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := event.GitHub(github(tt.kind, tt.body), tt.body, secret)
			if !errors.Is(err, event.ErrIgnored) {
				t.Fatalf("GitHub(%s) = %+v, %v; want ErrIgnored", tt.kind, e, err)
			}
			if fault.Of(err) != "" {
				t.Errorf("ignored, but of kind %q: %v", fault.Of(err), err)
			}
		})
	}
}

func TestGitHubSignature(t *testing.T) {
	body := eventtest.GitHubIssueLabeled("acme/app", "https://github.com", 1, "t", "b", "berth", "ada")
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	good := hex.EncodeToString(mac.Sum(nil))
	tests := []struct {
		name   string
		header string // X-Hub-Signature-256; "-" for none
		secret []byte
		body   []byte
	}{
		{"missing", "-", secret, body},
		{"empty", "", secret, body},
		{"no prefix", good, secret, body},
		{"sha1 prefix", "sha1=" + good, secret, body},
		{"short", "sha256=" + good[:40], secret, body},
		{"long", "sha256=" + good + "00", secret, body},
		{"not hex", "sha256=" + strings.Repeat("zz", 32), secret, body},
		{"wrong", "sha256=" + strings.Repeat("00", 32), secret, body},
		{"another secret", "sha256=" + good, []byte("other"), body},
		{"no secret set", "sha256=" + good, nil, body},
		{"body changed", "sha256=" + good, secret, append(bytes.Clone(body), ' ')},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := github("issues", body)
			h.Del("X-Hub-Signature-256")
			if tt.header != "-" {
				h.Set("X-Hub-Signature-256", tt.header)
			}
			_, err := event.GitHub(h, tt.body, tt.secret)
			if !errors.Is(err, event.ErrSignature) || !errors.Is(err, fault.Unauthenticated) {
				t.Fatalf("GitHub = %v, want ErrSignature of kind unauthenticated", err)
			}
		})
	}
	t.Run("upper-case hex", func(t *testing.T) {
		h := github("issues", body)
		h.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(good))
		if _, err := event.GitHub(h, body, secret); err != nil {
			t.Fatalf("GitHub = %v, want the event", err)
		}
	})
	t.Run("checked before anything is read", func(t *testing.T) {
		junk := []byte(`{{{`)
		h := github("issues", junk)
		h.Set("X-Hub-Signature-256", "sha256="+good)
		h.Del("X-GitHub-Delivery")
		if _, err := event.GitHub(h, junk, secret); !errors.Is(err, event.ErrSignature) {
			t.Fatalf("GitHub(unsigned junk without a delivery id) = %v, want ErrSignature", err)
		}
	})
}

func TestGitHubInvalid(t *testing.T) {
	labeled := func(repo, url string) []byte {
		return []byte(`{"action":"labeled","label":{"name":"berth"},"issue":{"number":1,"title":"t","html_url":"https://github.com/a/b/issues/1"},` +
			`"repository":{"full_name":"` + repo + `","html_url":"` + url + `"},"sender":{"login":"ada","type":"User"}}`)
	}
	tests := []struct {
		name   string
		kind   string
		body   []byte
		header func(http.Header)
		field  string
	}{
		{"no delivery id", "issues", labeled("a/b", "https://github.com/a/b"), func(h http.Header) { h.Del("X-GitHub-Delivery") }, "X-GitHub-Delivery"},
		{"long delivery id", "issues", labeled("a/b", "https://github.com/a/b"), func(h http.Header) { h.Set("X-GitHub-Delivery", strings.Repeat("a", 129)) }, "X-GitHub-Delivery"},
		{"delivery id with a space", "issues", labeled("a/b", "https://github.com/a/b"), func(h http.Header) { h.Set("X-GitHub-Delivery", "a b") }, "X-GitHub-Delivery"},
		{"delivery id not ASCII", "issues", labeled("a/b", "https://github.com/a/b"), func(h http.Header) { h.Set("X-GitHub-Delivery", "dé") }, "X-GitHub-Delivery"},
		{"no event", "", labeled("a/b", "https://github.com/a/b"), nil, "X-GitHub-Event"},
		{"not JSON", "issues", []byte(`{"action":`), nil, "body"},
		{"an array", "issues", []byte(`[1]`), nil, "body"},
		{"number a string", "issues", []byte(`{"action":"labeled","issue":{"number":"1"}}`), nil, "body"},
		{"no repository", "issues", []byte(`{"action":"labeled","label":{"name":"x"},"issue":{"number":1},"sender":{"login":"a"}}`), nil, "repository"},
		{"repository path escapes", "issues", labeled("../b", "https://github.com/a/b"), nil, "repository.full_name"},
		{"repository of one element", "issues", labeled("b", "https://github.com/a/b"), nil, "repository.full_name"},
		{"repository url not http", "issues", labeled("a/b", "javascript:alert(1)"), nil, "repository.html_url"},
		{"repository url with a user", "issues", labeled("a/b", "https://u:p@github.com/a/b"), nil, "repository.html_url"},
		{"no label", "issues", []byte(`{"action":"labeled","issue":{"number":1,"html_url":"https://github.com/a/b/issues/1"},` +
			`"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"},"sender":{"login":"ada"}}`), nil, "label"},
		{"label with a control character", "issues", bytes.Replace(labeled("a/b", "https://github.com/a/b"), []byte(`"berth"`), []byte(`"ber\u0000th"`), 1), nil, "label.name"},
		{"no number", "issues", bytes.Replace(labeled("a/b", "https://github.com/a/b"), []byte(`"number":1`), []byte(`"number":0`), 1), nil, "issue.number"},
		{"no sender", "issues", []byte(`{"action":"labeled","label":{"name":"x"},"issue":{"number":1},"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"}}`), nil, "sender"},
		{"no comment", "issue_comment", []byte(`{"action":"created","issue":{"number":1,"html_url":"https://github.com/a/b/issues/1"},` +
			`"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"},"sender":{"login":"ada"}}`), nil, "comment"},
		{"review comment without its pull request", "pull_request_review_comment", []byte(`{"action":"created","comment":{"body":"x"},` +
			`"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"},"sender":{"login":"ada"}}`), nil, "pull_request"},
		{"review missing", "pull_request_review", []byte(`{"action":"submitted","pull_request":{"number":1,"html_url":"https://github.com/a/b/pull/1"},` +
			`"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"},"sender":{"login":"ada"}}`), nil, "review"},
		{"review without its pull request", "pull_request_review", []byte(`{"action":"submitted","review":{"body":"x","state":"commented"},` +
			`"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"},"sender":{"login":"ada"}}`), nil, "pull_request"},
		{"review body not a string", "pull_request_review", []byte(`{"action":"submitted","review":{"body":1}}`), nil, "body"},
		{"deep JSON", "issues", deep(65), nil, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := github(tt.kind, tt.body)
			if tt.kind == "" {
				h.Del("X-GitHub-Event")
			}
			if tt.header != nil {
				tt.header(h)
			}
			_, err := event.GitHub(h, tt.body, secret)
			if f, ok := errors.AsType[*fault.Error](err); !ok || f.Kind != fault.Invalid || f.Field != tt.field {
				t.Fatalf("GitHub = %v, want invalid on %s", err, tt.field)
			}
		})
	}
}

// TestTooLarge: a body over MaxBody is refused as too large, before its
// signature is looked at.
func TestTooLarge(t *testing.T) {
	big := make([]byte, event.MaxBody+1)
	check := func(name string, err error) {
		t.Helper()
		if f, ok := errors.AsType[*fault.Error](err); !ok || f.Kind != fault.TooLarge || f.Field != "body" {
			t.Errorf("%s(%d bytes) = %v, want too large on body", name, len(big), err)
		}
	}
	_, err := event.GitHub(http.Header{}, big, secret)
	check("GitHub", err)
	_, err = event.GitLab(http.Header{}, big, "token")
	check("GitLab", err)
	_, err = event.Webhook(http.Header{}, big, secret, now)
	check("Webhook", err)
}

// TestTexts: what ends up in a task is bounded, valid UTF-8, and without
// control characters.
func TestTexts(t *testing.T) {
	long := strings.Repeat("é", event.MaxText) // two bytes each
	body := []byte(`{"action":"labeled","label":{"name":"berth"},"issue":{"number":1,` +
		`"title":"one\nline\u0007 ` + strings.Repeat("ü", event.MaxTitle) + `",` +
		`"body":"crlf\r\nline\u001b[31m red \u0085 \ud800 and ` + long + `",` +
		`"html_url":"https://github.com/a/b/issues/1"},` +
		`"repository":{"full_name":"a/b","html_url":"https://github.com/a/b"},"sender":{"login":"ada"}}`)
	body = append(body[:len(body)-1], []byte(`,"x":"`+"\xff\xfe"+`"}`)...)
	e, err := event.GitHub(github("issues", body), body, secret)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Title, "one line üü") || !strings.HasSuffix(e.Title, " […]") || len(e.Title) > event.MaxTitle {
		t.Errorf("Title = %.40q… (%d bytes), want one line, cut to %d bytes with a note", e.Title, len(e.Title), event.MaxTitle)
	}
	if !strings.HasPrefix(e.Body, "crlf\nline[31m red  \uFFFD and éé") || len(e.Body) > event.MaxText ||
		!strings.Contains(e.Body, "[… cut by berth: the text was ") {
		t.Errorf("Body = %.60q… %q (%d bytes), want cleaned and cut to %d bytes with a note", e.Body, e.Body[max(0, len(e.Body)-60):], len(e.Body), event.MaxText)
	}
	checkEvent(t, e)
}

// requestBody reads what a signer made the request's body.
func requestBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deep is a JSON object nested n deep.
func deep(n int) []byte {
	return []byte(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
}
