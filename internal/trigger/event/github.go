package event

import (
	"encoding/json"
	"net/http"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
)

// The parts of a GitHub payload an Event is made of.
type (
	githubPayload struct {
		Action      string         `json:"action"`
		Issue       *githubThread  `json:"issue"`
		PullRequest *githubThread  `json:"pull_request"`
		Comment     *githubComment `json:"comment"`
		Review      *githubComment `json:"review"` // pull_request_review's, read as a comment
		Label       *struct {
			Name string `json:"name"`
		} `json:"label"`
		Repository *struct {
			FullName string `json:"full_name"`
			HTMLURL  string `json:"html_url"`
		} `json:"repository"`
		Sender *struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"sender"`
	}
	// githubThread is an issue or a pull request.
	githubThread struct {
		Number  int    `json:"number"`
		Title   string `json:"title"`
		Body    string `json:"body"`
		HTMLURL string `json:"html_url"`
		// PullRequest is set on an issue that is a pull request.
		PullRequest json.RawMessage `json:"pull_request"`
	}
	githubComment struct {
		Body string `json:"body"`
	}
)

// GitHub reads a GitHub webhook delivery: h its headers, body its body,
// secret the webhook's secret (the GitHub App's). It checks
// X-Hub-Signature-256 (sha256= and the hex HMAC-SHA256 of body under
// secret) before it reads anything else; a missing, malformed or wrong
// signature, or an empty secret, is ErrSignature.
//
// Signed deliveries it reads (X-GitHub-Event, then the payload's action):
//
//	issues labeled                       KindIssueLabeled (ThreadChange if the issue is a pull request)
//	pull_request labeled                 KindIssueLabeled on a ThreadChange
//	issue_comment created                KindComment (ThreadChange if on a pull request)
//	pull_request_review_comment created  KindComment on a ThreadChange, Review
//	pull_request_review submitted        KindComment on a ThreadChange, Review; Comment is review.body
//
// A comment on a pull request's diff (pull_request_review_comment) and a
// review submitted with a body are Review; a comment on a pull request's
// conversation (issue_comment) is not. A submitted review is read
// whatever its review.state (approved, changes_requested, commented), as
// long as its body has some text once cleaned: a review without one (an
// approval alone, or the review GitHub wraps diff comments in, which come
// as pull_request_review_comment deliveries of their own) says nothing to
// act on.
//
// Everything else is ErrIgnored: ping, other events, other actions
// (opened, edited, unlabeled, deleted, a review edited or dismissed…),
// reviews without a body, and comments and reviews whose sender is a
// Bot, so that berth's own comments (its App's installation token
// comments as a Bot) never start it again. Labels added by bots do count.
func GitHub(h http.Header, body []byte, secret []byte) (Event, error) {
	if err := checkSize(body); err != nil {
		return Event{}, err
	}
	if err := checkHMAC("X-Hub-Signature-256", h.Get("X-Hub-Signature-256"), secret, body); err != nil {
		return Event{}, err
	}
	delivery, err := deliveryID(h, "X-GitHub-Delivery")
	if err != nil {
		return Event{}, err
	}
	name := h.Get("X-GitHub-Event")
	var kind Kind
	switch name {
	case "":
		return Event{}, fault.Field("X-GitHub-Event", "missing")
	case "issues", "pull_request":
		kind = KindIssueLabeled
	case "issue_comment", "pull_request_review_comment", "pull_request_review":
		kind = KindComment
	default:
		return Event{}, ignored("github event %.40q", name)
	}
	if err := checkDepth(body); err != nil {
		return Event{}, err
	}
	var p githubPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, notJSON(err)
	}
	want := "labeled"
	switch {
	case name == "pull_request_review":
		want = "submitted"
	case kind == KindComment:
		want = "created"
	}
	if p.Action != want {
		return Event{}, ignored("github %s %.40q", name, p.Action)
	}
	if kind == KindComment && p.Sender != nil && p.Sender.Type == "Bot" {
		return Event{}, ignored("github %s by the bot %.40q", name, p.Sender.Login)
	}
	comment := p.Comment
	if name == "pull_request_review" {
		// A review without a body is an approval alone, or the review
		// GitHub wraps diff comments in (each comes as a
		// pull_request_review_comment of its own): ignored before the
		// rest is checked, as it would be however well formed.
		if p.Review == nil {
			return Event{}, fault.Field("review", "missing")
		}
		if blank(p.Review.Body) {
			return Event{}, ignored("github review without a body")
		}
		comment = p.Review
	}
	e := Event{Source: SourceGitHub, Delivery: delivery, Kind: kind}
	if err := e.githubCommon(&p); err != nil {
		return Event{}, err
	}
	// The thread: an issue (which may be a pull request) or a pull
	// request.
	var thread *githubThread
	field := "issue"
	change := false
	switch name {
	case "issues", "issue_comment":
		thread = p.Issue
		change = thread != nil && present(thread.PullRequest)
	default:
		thread, field, change = p.PullRequest, "pull_request", true
	}
	if err := e.githubThread(thread, field, change); err != nil {
		return Event{}, err
	}
	switch kind {
	case KindIssueLabeled:
		if p.Label == nil {
			return Event{}, fault.Field("label", "missing")
		}
		if e.Label, err = nameField("label.name", p.Label.Name); err == nil {
			e.Labels = []string{e.Label}
		}
		if err != nil {
			return Event{}, err
		}
	case KindComment:
		if comment == nil {
			return Event{}, fault.Field("comment", "missing")
		}
		e.Comment = text(comment.Body)
		e.Review = name != "issue_comment"
	}
	return e, nil
}

// githubCommon sets what every GitHub event has: the repository and who
// acted.
func (e *Event) githubCommon(p *githubPayload) error {
	var err error
	if p.Repository == nil {
		return fault.Field("repository", "missing")
	}
	if e.Repo, err = repoPath("repository.full_name", p.Repository.FullName); err != nil {
		return err
	}
	if e.Host, err = host("repository.html_url", p.Repository.HTMLURL); err != nil {
		return err
	}
	if p.Sender == nil {
		return fault.Field("sender", "missing")
	}
	e.Author, err = nameField("sender.login", p.Sender.Login)
	return err
}

// githubThread sets the thread an event is about from the payload's issue
// or pull_request (field).
func (e *Event) githubThread(t *githubThread, field string, change bool) error {
	if t == nil {
		return fault.Field(field, "missing")
	}
	if t.Number <= 0 {
		return fault.Field(field+".number", "missing")
	}
	if _, err := webURL(field+".html_url", t.HTMLURL); err != nil {
		return err
	}
	e.Thread = forge.Thread{Kind: forge.ThreadIssue, Number: t.Number}
	if change {
		e.Thread.Kind = forge.ThreadChange
	}
	e.Title, e.Body, e.URL = title(t.Title), text(t.Body), t.HTMLURL
	return nil
}
