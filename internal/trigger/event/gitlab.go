package event

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
)

// The parts of a GitLab payload an Event is made of.
type (
	gitlabPayload struct {
		ObjectKind string `json:"object_kind"`
		User       *struct {
			Username string `json:"username"`
		} `json:"user"`
		Project *struct {
			PathWithNamespace string `json:"path_with_namespace"`
			WebURL            string `json:"web_url"`
		} `json:"project"`
		ObjectAttributes *gitlabAttributes `json:"object_attributes"`
		Labels           []gitlabLabel     `json:"labels"`
		// Changes is an object, but GitLab's "may be empty" is read as
		// whatever it sends: it is decoded apart (changesLabels).
		Changes      json.RawMessage `json:"changes"`
		Issue        *gitlabThread   `json:"issue"`
		MergeRequest *gitlabThread   `json:"merge_request"`
	}
	// gitlabAttributes is object_attributes: an issue or a merge request
	// (Issue Hook, Merge Request Hook) or a note (Note Hook).
	gitlabAttributes struct {
		gitlabThread
		Action       string        `json:"action"`
		Labels       []gitlabLabel `json:"labels"`
		Note         string        `json:"note"`
		NoteableType string        `json:"noteable_type"`
		System       bool          `json:"system"`
		// Type is a note's class: DiffNote on a diff (LegacyDiffNote for
		// those made by old GitLab versions), DiscussionNote in a thread
		// started on the conversation, null for a plain comment. Position
		// is where on the diff a DiffNote sits, null for the others.
		Type     string          `json:"type"`
		Position json.RawMessage `json:"position"`
	}
	// gitlabThread is an issue or a merge request.
	gitlabThread struct {
		IID         int    `json:"iid"`
		Title       string `json:"title"`
		Description string `json:"description"`
		URL         string `json:"url"`
	}
	gitlabLabel struct {
		Title string `json:"title"`
	}
)

// GitLab reads a GitLab project (or group) webhook delivery: h its
// headers, body its body, token the webhook's secret token. It compares
// X-Gitlab-Token with token in constant time before it reads anything
// else; a missing or wrong token, or an empty one configured, is
// ErrSignature.
//
// Deliveries it reads (X-Gitlab-Event, then object_attributes):
//
//	Issue Hook          KindIssueLabeled: action open with labels, or update whose changes.labels adds one
//	Merge Request Hook  KindIssueLabeled on a ThreadChange, likewise
//	Note Hook           KindComment on an Issue or a MergeRequest (ThreadChange), action create;
//	                    Review if a note on the merge request's diff
//
// A note on a merge request's diff (object_attributes.type DiffNote, or a
// position given) is Review, replies in its thread included; a note on
// the merge request's conversation (no type, or DiscussionNote) is not.
//
// A delivery that adds several labels at once is one Event whose Labels
// are all of them, in GitLab's order (an issue opened with labels: all of
// them), and whose Label is the first.
//
// Everything else is ErrIgnored: other hooks (including Confidential Issue
// and Confidential Note Hooks, so a confidential thread never reaches a
// task), other actions (close, reopen, a label removed, an edited note),
// work items other than issues, comments on commits and snippets, system
// notes, and comments by GitLab's bot users (project_<id>_bot… and
// group_<id>_bot…, the users of the project and group access tokens berth
// comments with), so that berth's own comments never start it again.
//
// Delivery is the Idempotency-Key header (GitLab 17.4 and later: the same
// on every retry), else X-Gitlab-Event-UUID.
func GitLab(h http.Header, body []byte, token string) (Event, error) {
	if err := checkSize(body); err != nil {
		return Event{}, err
	}
	if token == "" {
		return Event{}, unauthenticated("no secret token is set, so no delivery is taken")
	}
	given := h.Get("X-Gitlab-Token")
	if given == "" {
		return Event{}, unauthenticated("no X-Gitlab-Token header")
	}
	// Compare digests, so that the time taken says nothing of the token's
	// length either.
	g, w := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(g[:], w[:]) != 1 {
		return Event{}, unauthenticated("X-Gitlab-Token is not the webhook's secret token")
	}
	header := "Idempotency-Key"
	if h.Get(header) == "" {
		header = "X-Gitlab-Event-UUID"
	}
	delivery, err := deliveryID(h, header)
	if err != nil {
		return Event{}, err
	}
	hook := h.Get("X-Gitlab-Event")
	var kind Kind
	var objectKind string
	switch hook {
	case "":
		return Event{}, fault.Field("X-Gitlab-Event", "missing")
	case "Issue Hook":
		kind, objectKind = KindIssueLabeled, "issue"
	case "Merge Request Hook":
		kind, objectKind = KindIssueLabeled, "merge_request"
	case "Note Hook":
		kind, objectKind = KindComment, "note"
	default:
		return Event{}, ignored("gitlab %.40q", hook)
	}
	if err := checkDepth(body); err != nil {
		return Event{}, err
	}
	var p gitlabPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, notJSON(err)
	}
	if p.ObjectKind != objectKind {
		if hook == "Issue Hook" && p.ObjectKind == "work_item" {
			return Event{}, ignored("gitlab work item (not an issue)")
		}
		return Event{}, fault.Field("object_kind", "%.40q in a %s", p.ObjectKind, hook)
	}
	a := p.ObjectAttributes
	if a == nil {
		return Event{}, fault.Field("object_attributes", "missing")
	}
	e := Event{Source: SourceGitLab, Delivery: delivery, Kind: kind}
	if kind == KindComment {
		if err := e.gitlabNote(&p); err != nil {
			return Event{}, err
		}
		return e, nil
	}
	// Labels added.
	var added []string
	switch a.Action {
	case "open":
		labels := a.Labels
		if labels == nil {
			labels = p.Labels
		}
		added = addedLabels(nil, labels)
	case "update":
		previous, current, err := changesLabels(p.Changes)
		if err != nil {
			return Event{}, err
		}
		added = addedLabels(previous, current)
	}
	if len(added) == 0 {
		return Event{}, ignored("gitlab %s %.40q adding no label", hook, a.Action)
	}
	if err := e.gitlabCommon(&p); err != nil {
		return Event{}, err
	}
	for _, l := range added {
		name, err := nameField("label", l)
		if err != nil {
			return Event{}, err
		}
		e.Labels = append(e.Labels, name)
	}
	e.Label = e.Labels[0]
	change := hook == "Merge Request Hook"
	if err := e.gitlabThread(&a.gitlabThread, "object_attributes", change, ""); err != nil {
		return Event{}, err
	}
	return e, nil
}

// gitlabNote reads a Note Hook's payload.
func (e *Event) gitlabNote(p *gitlabPayload) error {
	a := p.ObjectAttributes
	var thread *gitlabThread
	field, change := "issue", false
	switch a.NoteableType {
	case "Issue":
		thread = p.Issue
	case "MergeRequest":
		thread, field, change = p.MergeRequest, "merge_request", true
	default:
		return ignored("gitlab comment on a %.40q", a.NoteableType)
	}
	// action came with GitLab 16.11, with edits (update): an older GitLab
	// sends none, and only for new notes.
	if a.Action != "create" && a.Action != "" {
		return ignored("gitlab comment %.40q", a.Action)
	}
	if a.System {
		return ignored("gitlab system note")
	}
	if p.User != nil && gitlabBot(p.User.Username) {
		return ignored("gitlab comment by the bot %.40q", p.User.Username)
	}
	if err := e.gitlabCommon(p); err != nil {
		return err
	}
	// The note's own url is the thread's page and #note_<id>: the thread's
	// page where the thread object has no url of its own.
	page, _, _ := strings.Cut(a.URL, "#")
	if err := e.gitlabThread(thread, field, change, page); err != nil {
		return err
	}
	e.Comment = text(a.Note)
	e.Review = change && a.diffNote()
	return nil
}

// diffNote reports whether a note is on a diff: a DiffNote (or a
// LegacyDiffNote of old GitLabs), or a note with a position object.
func (a *gitlabAttributes) diffNote() bool {
	switch a.Type {
	case "DiffNote", "LegacyDiffNote":
		return true
	}
	return present(a.Position) && a.Position[0] == '{'
}

// gitlabCommon sets what every GitLab event has: the project and who
// acted.
func (e *Event) gitlabCommon(p *gitlabPayload) error {
	var err error
	if p.Project == nil {
		return fault.Field("project", "missing")
	}
	if e.Repo, err = repoPath("project.path_with_namespace", p.Project.PathWithNamespace); err != nil {
		return err
	}
	if e.Host, err = host("project.web_url", p.Project.WebURL); err != nil {
		return err
	}
	if p.User == nil {
		return fault.Field("user", "missing")
	}
	e.Author, err = nameField("user.username", p.User.Username)
	return err
}

// gitlabThread sets the thread an event is about from an issue or a merge
// request (field); page is its web page when it names none.
func (e *Event) gitlabThread(t *gitlabThread, field string, change bool, page string) error {
	if t == nil {
		return fault.Field(field, "missing")
	}
	if t.IID <= 0 {
		return fault.Field(field+".iid", "missing")
	}
	u, urlField := t.URL, field+".url"
	if u == "" && page != "" {
		u, urlField = page, "object_attributes.url"
	}
	if _, err := webURL(urlField, u); err != nil {
		return err
	}
	e.Thread = forge.Thread{Kind: forge.ThreadIssue, Number: t.IID}
	if change {
		e.Thread.Kind = forge.ThreadChange
	}
	e.Title, e.Body, e.URL = title(t.Title), text(t.Description), u
	return nil
}

// changesLabels reads changes.labels: the labels before and after an
// update. No such change is no labels either side.
func changesLabels(raw json.RawMessage) (previous, current []gitlabLabel, err error) {
	if !present(raw) || raw[0] != '{' {
		return nil, nil, nil
	}
	var c struct {
		Labels *struct {
			Previous []gitlabLabel `json:"previous"`
			Current  []gitlabLabel `json:"current"`
		} `json:"labels"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fault.Field("changes.labels", "not the JSON expected: %v", err)
	}
	if c.Labels == nil {
		return nil, nil, nil
	}
	return c.Labels.Previous, c.Labels.Current, nil
}

// maxLabels bounds the labels one delivery is taken to add.
const maxLabels = 32

// addedLabels returns the labels in current that are not in previous, in
// current's order, at most maxLabels.
func addedLabels(previous, current []gitlabLabel) []string {
	had := make(map[string]bool, len(previous))
	for _, l := range previous {
		had[l.Title] = true
	}
	var out []string
	for _, l := range current {
		if l.Title != "" && !had[l.Title] && len(out) < maxLabels {
			had[l.Title] = true
			out = append(out, l.Title)
		}
	}
	return out
}

// gitlabBot reports whether username is one of GitLab's bot users: the
// user of a project access token (project_<id>_bot, then _<hex> or a
// number on newer GitLab) or of a group access token (group_<id>_bot…).
func gitlabBot(username string) bool {
	for _, prefix := range []string{"project_", "group_"} {
		rest, ok := strings.CutPrefix(username, prefix)
		if !ok {
			continue
		}
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		if digits > 0 && strings.HasPrefix(rest[digits:], "_bot") {
			return true
		}
	}
	return false
}
