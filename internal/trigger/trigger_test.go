package trigger_test

import (
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
)

func TestParseOn(t *testing.T) {
	for in, want := range map[string]trigger.On{
		"github:labeled:berth":                  {Source: event.SourceGitHub, Kind: event.KindIssueLabeled, Label: "berth"},
		"gitlab:labelled:needs bot":             {Source: event.SourceGitLab, Kind: event.KindIssueLabeled, Label: "needs bot"},
		"github:comment:/berth run":             {Source: event.SourceGitHub, Kind: event.KindComment, Command: "/berth run"},
		"webhook":                               {Source: event.SourceWebhook, Kind: event.KindWebhook},
		"gitlab:comment:/berth: fix":            {Source: event.SourceGitLab, Kind: event.KindComment, Command: "/berth: fix"},
		"schedule:0 3 * * 1-5":                  {Source: event.SourceSchedule, Kind: event.KindSchedule, Schedule: "0 3 * * 1-5"},
		"schedule:CRON_TZ=Europe/Berlin @daily": {Source: event.SourceSchedule, Kind: event.KindSchedule, Schedule: "CRON_TZ=Europe/Berlin @daily"},
	} {
		got, err := trigger.ParseOn(in)
		if err != nil || got != want {
			t.Errorf("ParseOn(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, _ := trigger.ParseOn(got.String()); back != got {
			t.Errorf("%q does not round-trip: %q", in, got.String())
		}
	}
	for _, bad := range []string{"", "github", "github:opened:x", "bitbucket:labeled:x", "webhook:x", "schedule:* * *", "schedule:0 25 * * *"} {
		if _, err := trigger.ParseOn(bad); !errors.Is(err, fault.Invalid) {
			t.Errorf("ParseOn(%q) = %v, want a field error", bad, err)
		}
	}
}

func valid() trigger.Trigger {
	return trigger.Trigger{Name: "fix", On: trigger.On{Source: event.SourceGitHub, Kind: event.KindIssueLabeled, Label: "berth"}, Repo: "acme/app", Concurrency: 1}
}

func TestValidate(t *testing.T) {
	if err := valid().Validate(); err != nil {
		t.Fatalf("a valid trigger: %v", err)
	}
	for field, change := range map[string]func(*trigger.Trigger){
		"name":        func(t *trigger.Trigger) { t.Name = "Fix" },
		"on":          func(t *trigger.Trigger) { t.On.Label = "" },
		"repo":        func(t *trigger.Trigger) { t.Repo = "" },
		"base":        func(t *trigger.Trigger) { t.Base = "a..b" },
		"role":        func(t *trigger.Trigger) { t.Role = "boss" },
		"task":        func(t *trigger.Trigger) { t.Task = "{{.Title" },
		"concurrency": func(t *trigger.Trigger) { t.Concurrency = 0 },
		"daily":       func(t *trigger.Trigger) { t.DailyUSD = -1 },
	} {
		tr := valid()
		change(&tr)
		var fe *fault.Error
		if err := tr.Validate(); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: Validate = %v, want a field error on %s", field, err, field)
		}
	}
	long := valid()
	long.Task = strings.Repeat("x", trigger.MaxTask+1)
	if err := long.Validate(); err == nil {
		t.Error("a task template over the limit was accepted")
	}
	comment := valid()
	comment.On = trigger.On{Source: event.SourceGitHub, Kind: event.KindComment, Command: "/berth\nrun"}
	if err := comment.Validate(); err == nil {
		t.Error("a command over two lines was accepted")
	}
}

// TestMatches: a label matches without regard to case, a command only at
// the start of a comment's first line and as a word, and what follows
// it is the task's Args; another source or kind never matches.
func TestMatches(t *testing.T) {
	labeled := valid()
	cmd := valid()
	cmd.On = trigger.On{Source: event.SourceGitHub, Kind: event.KindComment, Command: "/berth run"}
	issue := event.Event{Source: event.SourceGitHub, Kind: event.KindIssueLabeled, Label: "Berth", Title: "T", Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 7}}
	if d, ok := labeled.Matches(issue); !ok || d.Number != 7 || d.Title != "T" {
		t.Errorf("labelled Berth: %+v %v", d, ok)
	}
	issue.Label = "other"
	if _, ok := labeled.Matches(issue); ok {
		t.Error("another label matched")
	}
	// GitLab adds several at once: the trigger's among them matches.
	issue.Label, issue.Labels = "bug", []string{"bug", "berth"}
	if d, ok := labeled.Matches(issue); !ok || d.Label != "berth" {
		t.Errorf("labels bug and berth added at once: %+v %v", d, ok)
	}
	for comment, args := range map[string]string{
		"/berth run":                      "",
		"  /berth run fix the flaky test": "fix the flaky test",
		"/berth run\nmore below":          "",
	} {
		d, ok := cmd.Matches(event.Event{Source: event.SourceGitHub, Kind: event.KindComment, Comment: comment})
		if !ok || d.Args != args {
			t.Errorf("comment %q: %+v %v, want args %q", comment, d, ok, args)
		}
	}
	for _, comment := range []string{"please /berth run", "/berth running", "/berth", "first line\n/berth run"} {
		if _, ok := cmd.Matches(event.Event{Source: event.SourceGitHub, Kind: event.KindComment, Comment: comment}); ok {
			t.Errorf("comment %q matched", comment)
		}
	}
	if _, ok := cmd.Matches(event.Event{Source: event.SourceGitLab, Kind: event.KindComment, Comment: "/berth run"}); ok {
		t.Error("a GitLab comment matched a GitHub trigger")
	}
}

func TestRender(t *testing.T) {
	tr := valid()
	got, err := tr.Render(trigger.Data{Title: "Fix it", Body: "It breaks.", URL: "https://x/1"}, 1<<10)
	if err != nil || got != "Fix it\n\nIt breaks.\n\nhttps://x/1" {
		t.Errorf("the default task = %q, %v", got, err)
	}
	tr.Task = "Do {{.Payload.job}} for {{.Author}}"
	if got, err := tr.Render(trigger.Data{Payload: map[string]any{"job": "nightly"}, Author: "ci"}, 1<<10); err != nil || got != "Do nightly for ci" {
		t.Errorf("a template over the payload = %q, %v", got, err)
	}
	tr.Task = "{{.Body}}"
	if _, err := tr.Render(trigger.Data{Body: strings.Repeat("x", 100)}, 50); err == nil {
		t.Error("a task over the bound was rendered")
	}
	if _, err := tr.Render(trigger.Data{}, 50); err == nil {
		t.Error("an empty task was rendered")
	}
}
