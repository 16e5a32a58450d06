// Package trigger is the agent work loop's start and end (issue 23; SPEC
// S9, S13): a project's triggers, each starting an agent sandbox when a
// forge says an issue was labelled or a command was commented (GitHub
// App and GitLab project webhooks), or when a signed generic webhook
// arrives; the deliveries each trigger was handed, once each, with what
// became of them; and the report that takes a run's results back to the
// forge: a draft pull (merge) request from berth/<name>, and a comment on
// the issue that started it, with the run's cost. A trigger's runs are
// ordinary agent sandboxes of its author: visible and governed as any.
package trigger

import (
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/name"
	"berth.dev/berth/internal/schedule"
	"berth.dev/berth/internal/trigger/event"
)

// Trigger is one project's rule that starts agent runs.
type Trigger struct {
	ID      string // trg_…
	Org     string
	Project string
	Name    string // a name (package name's rule), unique in its project
	On      On
	// Repo is the repository its runs work on, as resolved (host/path, or
	// the path alone on the local forge); allowed_repos applies.
	Repo string
	// Base is the branch runs check out and changes go to; "" is the
	// repository's default.
	Base   string
	Class  string // "" the organisation's default agent class
	Runner string // "" the deployment's default runner
	Model  string // "" chosen as for any run
	Role   string // author (default) or reviewer
	// Task is the template of a run's task (text/template over Data);
	// "" is DefaultTask.
	Task string
	// Concurrency is how many of its runs may be live at once; more are
	// skipped, saying why.
	Concurrency int
	// DailyTokens and DailyUSD bound what its runs started since midnight
	// UTC may cost (tokens; dollars, machine time included): a delivery
	// past either is skipped. Zero bounds nothing.
	DailyTokens int64
	DailyUSD    float64
	// OpenPR opens a draft pull (merge) request after a clean author run,
	// and comments on the thread that started it.
	OpenPR bool
	// Session makes its runs sessions: each stays after its task, and a
	// review comment on its pull request (or a comment there that starts
	// with /berth) is its next task.
	Session bool
	// NextAt is when a schedule's trigger fires next; zero for others.
	NextAt time.Time
	// Owner is who set it last: its runs are their sandboxes.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// On is what starts a trigger's runs.
type On struct {
	// Source is github, gitlab or webhook.
	Source event.Source
	// Kind is issue_labeled or comment for a forge; webhook for a
	// generic webhook.
	Kind event.Kind
	// Label is the label whose adding starts a run (issue_labeled);
	// matched without regard to case.
	Label string
	// Command is what a comment's first line starts with to start a run
	// (comment), such as "/berth run"; what follows it on the line is
	// the task's Args.
	Command string
	// Schedule is a cron schedule (package schedule) that starts a run
	// when it comes due (source and kind schedule).
	Schedule string
}

// Limits.
const (
	MaxTask        = 16 << 10 // a task template's bytes
	MaxConcurrency = 50
	maxLabel       = 100
	maxCommand     = 100
	maxBranch      = 200
	// MaxTriggers is how many triggers a project may have.
	MaxTriggers = 50
)

// DefaultTask is the task of a trigger that sets none: the thread's
// title, text and address, and a command's arguments.
const DefaultTask = `{{.Title}}
{{if .Body}}
{{.Body}}
{{end}}{{if .Args}}
{{.Args}}
{{end}}{{if .URL}}
{{.URL}}
{{end}}`

// Data is what a task template is filled from.
type Data struct {
	Title   string // the issue's or pull request's title
	Body    string // its text
	URL     string // its web page
	Number  int    // its number (GitHub), iid (GitLab)
	Comment string // the comment that started the run, whole
	Args    string // what followed the command on the comment's line
	Label   string // the label added
	Author  string // who acted
	Repo    string
	// Payload is a generic webhook's JSON object.
	Payload map[string]any
	// Time is when a schedule came due (RFC 3339, UTC).
	Time string
}

var labelRE = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,100}$`)

// ParseOn reads --on's forms: github:labeled:LABEL,
// github:comment:COMMAND, the same for gitlab, webhook, and
// schedule:CRON.
func ParseOn(s string) (On, error) {
	src, rest, _ := strings.Cut(s, ":")
	switch event.Source(src) {
	case event.SourceSchedule:
		if _, err := schedule.Parse(rest); err != nil {
			return On{}, fault.Field("on", "schedule: %v", err)
		}
		return On{Source: event.SourceSchedule, Kind: event.KindSchedule, Schedule: rest}, nil
	case event.SourceWebhook:
		if rest != "" {
			return On{}, fault.Field("on", "webhook takes nothing after it")
		}
		return On{Source: event.SourceWebhook, Kind: event.KindWebhook}, nil
	case event.SourceGitHub, event.SourceGitLab:
		kind, arg, _ := strings.Cut(rest, ":")
		switch kind {
		case "labeled", "labelled":
			return On{Source: event.Source(src), Kind: event.KindIssueLabeled, Label: arg}, nil
		case "comment":
			return On{Source: event.Source(src), Kind: event.KindComment, Command: arg}, nil
		}
		return On{}, fault.Field("on", "%q: after %s: comes labeled:LABEL or comment:COMMAND", s, src)
	}
	return On{}, fault.Field("on", "%q is not github:labeled:LABEL, github:comment:COMMAND, gitlab:…, webhook or schedule:CRON", s)
}

// String is On in ParseOn's form.
func (o On) String() string {
	switch o.Kind {
	case event.KindIssueLabeled:
		return string(o.Source) + ":labeled:" + o.Label
	case event.KindComment:
		return string(o.Source) + ":comment:" + o.Command
	case event.KindSchedule:
		return string(o.Source) + ":" + o.Schedule
	}
	return string(o.Source)
}

// Validate says which field is wrong and why; the repository, class and
// runner are checked where they are resolved.
func (t Trigger) Validate() error {
	if err := name.Check(t.Name); err != nil {
		return fault.Field("name", "%v", err)
	}
	switch o := t.On; {
	case o.Source == event.SourceWebhook && o.Kind == event.KindWebhook:
	case o.Source == event.SourceSchedule && o.Kind == event.KindSchedule:
		if _, err := schedule.Parse(o.Schedule); err != nil {
			return fault.Field("on", "schedule: %v", err)
		}
		if strings.TrimSpace(t.Task) == "" {
			return fault.Field("task", "a schedule's trigger has no event to take a task from: give it one (--task-file)")
		}
	case o.Source != event.SourceGitHub && o.Source != event.SourceGitLab:
		return fault.Field("on", "%q is not a source: github, gitlab or webhook", o.Source)
	case o.Kind == event.KindIssueLabeled:
		if !labelRE.MatchString(o.Label) {
			return fault.Field("on", "a label of 1 to %d characters, no control characters", maxLabel)
		}
	case o.Kind == event.KindComment:
		if c := strings.TrimSpace(o.Command); c == "" || len(c) > maxCommand || !labelRE.MatchString(c) || strings.Contains(c, "\n") {
			return fault.Field("on", "a command of 1 to %d characters on one line, such as /berth run", maxCommand)
		}
	default:
		return fault.Field("on", "%q is not an event a forge trigger acts on: labeled or comment", o.Kind)
	}
	if t.Repo == "" {
		return fault.Field("repo", "a trigger's runs need a repository")
	}
	if t.Base != "" {
		if err := forge.CheckBranch(t.Base); err != nil || len(t.Base) > maxBranch {
			return fault.Field("base", "%q is not a branch name", t.Base)
		}
	}
	if t.Role != "" && t.Role != "author" && t.Role != "reviewer" {
		return fault.Field("role", "%q is not author or reviewer", t.Role)
	}
	if len(t.Task) > MaxTask || !utf8.ValidString(t.Task) {
		return fault.Field("task", "a template of UTF-8 text, at most %d bytes", MaxTask)
	}
	if _, err := parseTask(t.Task); err != nil {
		return fault.Field("task", "%v", err)
	}
	if t.Concurrency < 1 || t.Concurrency > MaxConcurrency {
		return fault.Field("concurrency", "%d: from 1 to %d runs at once", t.Concurrency, MaxConcurrency)
	}
	if t.DailyTokens < 0 || t.DailyUSD < 0 || t.DailyUSD != t.DailyUSD {
		return fault.Field("daily", "budgets are 0 (none) or more")
	}
	return nil
}

// parseTask parses a task template; "" is DefaultTask.
func parseTask(s string) (*template.Template, error) {
	if s == "" {
		s = DefaultTask
	}
	return template.New("task").Option("missingkey=zero").Parse(s)
}

// Render fills t's task from d, bounded by max bytes.
func (t Trigger) Render(d Data, max int) (string, error) {
	tmpl, err := parseTask(t.Task)
	if err != nil {
		return "", fmt.Errorf("task template: %w", err)
	}
	var b boundedBuilder
	b.max = max
	if err := tmpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("task template: %w", err)
	}
	out := strings.TrimSpace(b.String())
	if out == "" {
		return "", fmt.Errorf("the task template gave an empty task")
	}
	return out, nil
}

// boundedBuilder refuses writes past max bytes.
type boundedBuilder struct {
	strings.Builder
	max int
}

func (b *boundedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("the task is over %d bytes", b.max)
	}
	return b.Builder.Write(p)
}

// Matches reports whether e is one t acts on, and the task's data.
func (t Trigger) Matches(e event.Event) (Data, bool) {
	d := Data{Title: e.Title, Body: e.Body, URL: e.URL, Number: e.Thread.Number, Comment: e.Comment, Label: e.Label, Author: e.Author, Repo: e.Repo, Payload: e.Payload}
	if e.Source != t.On.Source || e.Kind != t.On.Kind {
		return Data{}, false
	}
	switch e.Kind {
	case event.KindIssueLabeled:
		labels := e.Labels
		if len(labels) == 0 {
			labels = []string{e.Label}
		}
		for _, l := range labels {
			if strings.EqualFold(strings.TrimSpace(l), strings.TrimSpace(t.On.Label)) {
				d.Label = l
				return d, true
			}
		}
		return Data{}, false
	case event.KindComment:
		first, _, _ := strings.Cut(strings.TrimSpace(e.Comment), "\n")
		cmd := strings.TrimSpace(t.On.Command)
		rest, ok := strings.CutPrefix(strings.TrimSpace(first), cmd)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			return Data{}, false
		}
		d.Args = strings.TrimSpace(rest)
		return d, true
	case event.KindWebhook:
		return d, true
	case event.KindSchedule:
		return d, true
	}
	return Data{}, false
}
