package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/trigger/event/eventtest"
)

const (
	token = "gitlab secret token"
	uuid  = "f5e5f430-f57b-4e6e-9fac-d9128cd7232f"
)

// gitlab returns the headers of a GitLab delivery of hook with the test
// token.
func gitlab(hook string) http.Header {
	req := httptest.NewRequest("POST", "/hooks/gitlab", nil)
	eventtest.SignGitLab(req, token, hook, uuid)
	return req.Header
}

// testdata reads a hand-written payload.
func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGitLab(t *testing.T) {
	const site = "https://gitlab.example.com:8443"
	tests := []struct {
		name string
		hook string
		body []byte
		want event.Event
	}{
		{"issue labeled", "Issue Hook", eventtest.GitLabIssueLabeled("acme/platform/app", site, 12, "Crash on start", "It crashes.\n\n\tBadly.", "berth", "ada"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindIssueLabeled, Repo: "acme/platform/app", Host: "gitlab.example.com:8443",
				Label: "berth", Labels: []string{"berth"}, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 12}, Title: "Crash on start", Body: "It crashes.\n\n\tBadly.",
				URL: "https://gitlab.example.com:8443/acme/platform/app/-/issues/12", Author: "ada"}},
		{"merge request labeled", "Merge Request Hook", eventtest.GitLabMergeRequestLabeled("acme/app", site, 5, "Faster start", "Caches.", "berth-review", "ada"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindIssueLabeled, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Label: "berth-review", Labels: []string{"berth-review"}, Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "Faster start", Body: "Caches.",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Author: "ada"}},
		{"note on an issue", "Note Hook", eventtest.GitLabNote("acme/app", site, 12, false, "Crash", "It crashes.", "/berth fix it", "grace"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 12}, Title: "Crash", Body: "It crashes.",
				URL: "https://gitlab.example.com:8443/acme/app/-/issues/12", Comment: "/berth fix it", Author: "grace"}},
		{"note on a merge request", "Note Hook", eventtest.GitLabNote("acme/app", site, 5, true, "Faster start", "", "/berth review", "grace"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "Faster start",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Comment: "/berth review", Author: "grace"}},
		{"note on a merge request's diff", "Note Hook", eventtest.GitLabDiffNote("acme/app", site, 5, "Faster start", "Caches.", "Name this constant.", "grace"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "Faster start", Body: "Caches.",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Comment: "Name this constant.", Review: true, Author: "grace"}},
		{"a DiffNote without a position", "Note Hook", edit(t, eventtest.GitLabDiffNote("acme/app", site, 5, "t", "", "Why?", "grace"), func(m map[string]any) {
			a := m["object_attributes"].(map[string]any)
			a["position"], a["original_position"] = nil, nil
		}),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "t",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Comment: "Why?", Review: true, Author: "grace"}},
		{"a position without a type", "Note Hook", edit(t, eventtest.GitLabDiffNote("acme/app", site, 5, "t", "", "Why?", "grace"), func(m map[string]any) {
			delete(m["object_attributes"].(map[string]any), "type")
		}),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "t",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Comment: "Why?", Review: true, Author: "grace"}},
		{"a LegacyDiffNote", "Note Hook", edit(t, eventtest.GitLabNote("acme/app", site, 5, true, "t", "", "Why?", "grace"), func(m map[string]any) {
			m["object_attributes"].(map[string]any)["type"] = "LegacyDiffNote"
		}),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "t",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Comment: "Why?", Review: true, Author: "grace"}},
		{"a thread on a merge request's conversation", "Note Hook", edit(t, eventtest.GitLabNote("acme/app", site, 5, true, "t", "", "/berth go", "grace"), func(m map[string]any) {
			m["object_attributes"].(map[string]any)["type"] = "DiscussionNote"
		}),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadChange, Number: 5}, Title: "t",
				URL: "https://gitlab.example.com:8443/acme/app/-/merge_requests/5", Comment: "/berth go", Author: "grace"}},
		{"a note on an issue is never a review", "Note Hook", edit(t, eventtest.GitLabNote("acme/app", site, 12, false, "t", "", "hi", "grace"), func(m map[string]any) {
			a := m["object_attributes"].(map[string]any)
			a["type"], a["position"] = "DiffNote", map[string]any{"new_path": "x"}
		}),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 12}, Title: "t",
				URL: "https://gitlab.example.com:8443/acme/app/-/issues/12", Comment: "hi", Author: "grace"}},
		{"a user named like a bot, but not one", "Note Hook", eventtest.GitLabNote("acme/app", site, 1, false, "t", "b", "hi", "project_manager"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindComment, Repo: "acme/app", Host: "gitlab.example.com:8443",
				Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 1}, Title: "t", Body: "b",
				URL: "https://gitlab.example.com:8443/acme/app/-/issues/1", Comment: "hi", Author: "project_manager"}},
		{"issue opened with labels", "Issue Hook", testdata(t, "gitlab-issue-open.json"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindIssueLabeled, Repo: "tools/berth-demo", Host: "gitlab.example.com",
				Label: "bug", Labels: []string{"bug", "berth"}, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 3}, Title: "Nightly build fails",
				Body: "Since Tuesday.", URL: "https://gitlab.example.com/tools/berth-demo/-/issues/3", Author: "ada"}},
		{"several labels added: all of them, the first as Label", "Issue Hook", testdata(t, "gitlab-issue-two-labels.json"),
			event.Event{Source: event.SourceGitLab, Delivery: uuid, Kind: event.KindIssueLabeled, Repo: "tools/berth-demo", Host: "gitlab.example.com",
				Label: "berth", Labels: []string{"berth", "docs"}, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 3}, Title: "Nightly build fails",
				Body: "Since Tuesday.", URL: "https://gitlab.example.com/tools/berth-demo/-/issues/3", Author: "ada"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := event.GitLab(gitlab(tt.hook), tt.body, token)
			if err != nil {
				t.Fatalf("GitLab(%s) = %v", tt.hook, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GitLab(%s) (-want +got):\n%s", tt.hook, diff)
			}
			checkEvent(t, got)
		})
	}
}

func TestGitLabDelivery(t *testing.T) {
	body := eventtest.GitLabNote("acme/app", "https://gitlab.com", 1, false, "t", "b", "/berth", "ada")
	tests := []struct {
		name   string
		header func(http.Header)
		want   string
	}{
		{"Idempotency-Key", func(h http.Header) { h.Set("X-Gitlab-Event-UUID", "13792a34-cac6-4fda-95a8-c58e00a3954e") }, uuid},
		{"before GitLab 17.4: X-Gitlab-Event-UUID", func(h http.Header) {
			h.Del("Idempotency-Key")
			h.Set("X-Gitlab-Event-UUID", "13792a34-cac6-4fda-95a8-c58e00a3954e")
		}, "13792a34-cac6-4fda-95a8-c58e00a3954e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := gitlab("Note Hook")
			tt.header(h)
			for range 2 { // a retry is the same delivery
				e, err := event.GitLab(h, body, token)
				if err != nil || e.Delivery != tt.want {
					t.Fatalf("GitLab = %q, %v; want delivery %q", e.Delivery, err, tt.want)
				}
			}
		})
	}
}

func TestGitLabIgnored(t *testing.T) {
	site := "https://gitlab.com"
	issue := eventtest.GitLabIssueLabeled("acme/app", site, 1, "t", "b", "berth", "ada")
	note := eventtest.GitLabNote("acme/app", site, 1, false, "t", "b", "/berth", "ada")
	tests := []struct {
		name string
		hook string
		body []byte
	}{
		{"push", "Push Hook", []byte(`{"object_kind":"push"}`)},
		{"confidential note", "Confidential Note Hook", note},
		{"confidential issue", "Confidential Issue Hook", issue},
		{"issue closed", "Issue Hook", bytes.Replace(issue, []byte(`"action":"update"`), []byte(`"action":"close"`), 1)},
		{"issue updated, no label change", "Issue Hook", edit(t, issue, func(m map[string]any) { delete(m["changes"].(map[string]any), "labels") })},
		{"issue updated, empty changes", "Issue Hook", edit(t, issue, func(m map[string]any) { m["changes"] = []any{} })},
		{"label removed", "Issue Hook", edit(t, issue, func(m map[string]any) {
			labels := m["changes"].(map[string]any)["labels"].(map[string]any)
			labels["previous"], labels["current"] = labels["current"], []any{}
		})},
		{"issue opened without labels", "Issue Hook", edit(t, testdata(t, "gitlab-issue-open.json"), func(m map[string]any) {
			m["labels"] = []any{}
			m["object_attributes"].(map[string]any)["labels"] = []any{}
		})},
		{"a task, not an issue", "Issue Hook", bytes.Replace(issue, []byte(`"object_kind":"issue"`), []byte(`"object_kind":"work_item"`), 1)},
		{"note by a project bot", "Note Hook", eventtest.GitLabNote("acme/app", site, 1, false, "t", "b", "/berth", "project_278964_bot_3cc1e1cbf3c5e5d1")},
		{"note by an old project bot", "Note Hook", eventtest.GitLabNote("acme/app", site, 1, false, "t", "b", "/berth", "project_12_bot")},
		{"note by a group bot", "Note Hook", eventtest.GitLabNote("acme/app", site, 1, false, "t", "b", "/berth", "group_9_bot_a1b2")},
		{"note edited", "Note Hook", bytes.Replace(note, []byte(`"action":"create"`), []byte(`"action":"update"`), 1)},
		{"system note", "Note Hook", bytes.Replace(note, []byte(`"system":false`), []byte(`"system":true`), 1)},
		{"note on a commit", "Note Hook", bytes.Replace(note, []byte(`"noteable_type":"Issue"`), []byte(`"noteable_type":"Commit"`), 1)},
		{"note on a snippet", "Note Hook", bytes.Replace(note, []byte(`"noteable_type":"Issue"`), []byte(`"noteable_type":"Snippet"`), 1)},
		{"diff note by a project bot", "Note Hook", eventtest.GitLabDiffNote("acme/app", site, 1, "t", "b", "/berth", "project_278964_bot_3cc1e1cbf3c5e5d1")},
		{"diff note edited", "Note Hook", bytes.Replace(eventtest.GitLabDiffNote("acme/app", site, 1, "t", "b", "x", "ada"), []byte(`"action":"create"`), []byte(`"action":"update"`), 1)},
		{"diff note on a commit", "Note Hook", edit(t, eventtest.GitLabDiffNote("acme/app", site, 1, "t", "b", "x", "ada"), func(m map[string]any) {
			m["object_attributes"].(map[string]any)["noteable_type"] = "Commit"
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := event.GitLab(gitlab(tt.hook), tt.body, token)
			if !errors.Is(err, event.ErrIgnored) {
				t.Fatalf("GitLab(%s) = %+v, %v; want ErrIgnored", tt.hook, e, err)
			}
		})
	}
}

func TestGitLabToken(t *testing.T) {
	body := eventtest.GitLabNote("acme/app", "https://gitlab.com", 1, false, "t", "b", "/berth", "ada")
	tests := []struct {
		name   string
		header string // X-Gitlab-Token; "-" for none
		token  string
	}{
		{"missing", "-", token},
		{"empty", "", token},
		{"wrong", "gitlab secret tokem", token},
		{"a prefix", "gitlab", token},
		{"longer", token + "x", token},
		{"no token set", "", ""},
		{"no token set, one sent", token, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := gitlab("Note Hook")
			h.Del("X-Gitlab-Token")
			if tt.header != "-" {
				h.Set("X-Gitlab-Token", tt.header)
			}
			_, err := event.GitLab(h, body, tt.token)
			if !errors.Is(err, event.ErrSignature) || !errors.Is(err, fault.Unauthenticated) {
				t.Fatalf("GitLab = %v, want ErrSignature of kind unauthenticated", err)
			}
		})
	}
}

func TestGitLabInvalid(t *testing.T) {
	site := "https://gitlab.com"
	note := eventtest.GitLabNote("acme/app", site, 1, false, "t", "b", "/berth", "ada")
	issue := eventtest.GitLabIssueLabeled("acme/app", site, 1, "t", "b", "berth", "ada")
	tests := []struct {
		name   string
		hook   string
		body   []byte
		header func(http.Header)
		field  string
	}{
		{"no delivery id", "Note Hook", note, func(h http.Header) { h.Del("Idempotency-Key"); h.Del("X-Gitlab-Event-UUID") }, "X-Gitlab-Event-UUID"},
		{"bad Idempotency-Key", "Note Hook", note, func(h http.Header) { h.Set("Idempotency-Key", "a\tb") }, "Idempotency-Key"},
		{"no event", "", note, func(h http.Header) { h.Del("X-Gitlab-Event") }, "X-Gitlab-Event"},
		{"not JSON", "Note Hook", note[:len(note)-1], nil, "body"},
		{"object_kind of another hook", "Note Hook", issue, nil, "object_kind"},
		{"no object_attributes", "Note Hook", []byte(`{"object_kind":"note"}`), nil, "object_attributes"},
		{"no project", "Note Hook", []byte(`{"object_kind":"note","object_attributes":{"noteable_type":"Issue","note":"x"},"user":{"username":"a"}}`), nil, "project"},
		{"no issue", "Note Hook", []byte(`{"object_kind":"note","object_attributes":{"noteable_type":"Issue","note":"x"},"user":{"username":"a"},` +
			`"project":{"path_with_namespace":"a/b","web_url":"https://gitlab.com/a/b"}}`), nil, "issue"},
		{"no page", "Note Hook", []byte(`{"object_kind":"note","object_attributes":{"noteable_type":"Issue","note":"x"},"user":{"username":"a"},` +
			`"project":{"path_with_namespace":"a/b","web_url":"https://gitlab.com/a/b"},"issue":{"iid":1}}`), nil, "issue.url"},
		{"no user", "Note Hook", bytes.Replace(note, []byte(`"user":{`), []byte(`"nobody":{`), 1), nil, "user"},
		{"project path too deep", "Note Hook", bytes.ReplaceAll(note, []byte(`"path_with_namespace":"acme/app"`), []byte(`"path_with_namespace":"a/b/c/d/e/f/g/h/i"`)), nil, "project.path_with_namespace"},
		{"changes.labels not labels", "Issue Hook", edit(t, issue, func(m map[string]any) { m["changes"].(map[string]any)["labels"] = map[string]any{"current": "x"} }), nil, "changes.labels"},
		{"no iid", "Issue Hook", bytes.Replace(issue, []byte(`"iid":1`), []byte(`"iid":-1`), 1), nil, "object_attributes.iid"},
		{"note type not a string", "Note Hook", edit(t, note, func(m map[string]any) { m["object_attributes"].(map[string]any)["type"] = 1 }), nil, "body"},
		{"deep JSON", "Note Hook", deep(100), nil, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := gitlab(tt.hook)
			if tt.header != nil {
				tt.header(h)
			}
			_, err := event.GitLab(h, tt.body, token)
			if f, ok := errors.AsType[*fault.Error](err); !ok || f.Kind != fault.Invalid || f.Field != tt.field {
				t.Fatalf("GitLab = %v, want invalid on %s", err, tt.field)
			}
		})
	}
}

// edit returns body, a JSON object, changed by f.
func edit(t *testing.T, body []byte, f func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
