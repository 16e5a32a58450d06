package eventtest

import (
	"fmt"
	"strings"
)

// GitLab's payload objects, in the shapes and field order GitLab sends.
type (
	glUser struct {
		ID        int64  `json:"id"`
		Name      string `json:"name"`
		Username  string `json:"username"`
		AvatarURL string `json:"avatar_url"`
		Email     string `json:"email"`
	}
	glProject struct {
		ID                int64   `json:"id"`
		Name              string  `json:"name"`
		Description       string  `json:"description"`
		WebURL            string  `json:"web_url"`
		AvatarURL         *string `json:"avatar_url"`
		GitSSHURL         string  `json:"git_ssh_url"`
		GitHTTPURL        string  `json:"git_http_url"`
		Namespace         string  `json:"namespace"`
		VisibilityLevel   int     `json:"visibility_level"`
		PathWithNamespace string  `json:"path_with_namespace"`
		DefaultBranch     string  `json:"default_branch"`
		CIConfigPath      *string `json:"ci_config_path"`
		Homepage          string  `json:"homepage"`
		URL               string  `json:"url"`
		SSHURL            string  `json:"ssh_url"`
		HTTPURL           string  `json:"http_url"`
	}
	glRepository struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Description string `json:"description"`
		Homepage    string `json:"homepage"`
	}
	glLabel struct {
		ID          int64   `json:"id"`
		Title       string  `json:"title"`
		Color       string  `json:"color"`
		ProjectID   int64   `json:"project_id"`
		CreatedAt   string  `json:"created_at"`
		UpdatedAt   string  `json:"updated_at"`
		Template    bool    `json:"template"`
		Description *string `json:"description"`
		Type        string  `json:"type"`
		GroupID     *int64  `json:"group_id"`
	}
	glChange[T any] struct {
		Previous T `json:"previous"`
		Current  T `json:"current"`
	}
	glChanges struct {
		UpdatedByID glChange[*int64]    `json:"updated_by_id"`
		UpdatedAt   glChange[string]    `json:"updated_at"`
		Labels      glChange[[]glLabel] `json:"labels"`
	}
	// glIssue is an Issue Hook's object_attributes.
	glIssue struct {
		ID                  int64     `json:"id"`
		Title               string    `json:"title"`
		AssigneeIDs         []int64   `json:"assignee_ids"`
		AssigneeID          *int64    `json:"assignee_id"`
		AuthorID            int64     `json:"author_id"`
		ProjectID           int64     `json:"project_id"`
		CreatedAt           string    `json:"created_at"`
		UpdatedAt           string    `json:"updated_at"`
		UpdatedByID         int64     `json:"updated_by_id"`
		LastEditedAt        *string   `json:"last_edited_at"`
		LastEditedByID      *int64    `json:"last_edited_by_id"`
		RelativePosition    int       `json:"relative_position"`
		Description         string    `json:"description"`
		MilestoneID         *int64    `json:"milestone_id"`
		StateID             int       `json:"state_id"`
		Confidential        bool      `json:"confidential"`
		DiscussionLocked    *bool     `json:"discussion_locked"`
		DueDate             *string   `json:"due_date"`
		MovedToID           *int64    `json:"moved_to_id"`
		DuplicatedToID      *int64    `json:"duplicated_to_id"`
		TimeEstimate        int       `json:"time_estimate"`
		TotalTimeSpent      int       `json:"total_time_spent"`
		TimeChange          int       `json:"time_change"`
		HumanTotalTimeSpent *string   `json:"human_total_time_spent"`
		HumanTimeEstimate   *string   `json:"human_time_estimate"`
		HumanTimeChange     *string   `json:"human_time_change"`
		Weight              *int      `json:"weight"`
		HealthStatus        *string   `json:"health_status"`
		Type                string    `json:"type"`
		IID                 int       `json:"iid"`
		URL                 string    `json:"url"`
		State               string    `json:"state"`
		Action              string    `json:"action"`
		Severity            string    `json:"severity"`
		Labels              []glLabel `json:"labels"`
	}
	glCommit struct {
		ID        string `json:"id"`
		Message   string `json:"message"`
		Title     string `json:"title"`
		Timestamp string `json:"timestamp"`
		URL       string `json:"url"`
		Author    struct {
			Name  string `json:"name"`
			Email string `json:"email"`
		} `json:"author"`
	}
	// glMergeRequest is a Merge Request Hook's object_attributes.
	glMergeRequest struct {
		ID                          int64     `json:"id"`
		IID                         int       `json:"iid"`
		TargetBranch                string    `json:"target_branch"`
		SourceBranch                string    `json:"source_branch"`
		SourceProjectID             int64     `json:"source_project_id"`
		AuthorID                    int64     `json:"author_id"`
		AssigneeIDs                 []int64   `json:"assignee_ids"`
		AssigneeID                  *int64    `json:"assignee_id"`
		ReviewerIDs                 []int64   `json:"reviewer_ids"`
		Title                       string    `json:"title"`
		CreatedAt                   string    `json:"created_at"`
		UpdatedAt                   string    `json:"updated_at"`
		LastEditedAt                *string   `json:"last_edited_at"`
		LastEditedByID              *int64    `json:"last_edited_by_id"`
		MilestoneID                 *int64    `json:"milestone_id"`
		StateID                     int       `json:"state_id"`
		State                       string    `json:"state"`
		BlockingDiscussionsResolved bool      `json:"blocking_discussions_resolved"`
		WorkInProgress              bool      `json:"work_in_progress"`
		Draft                       bool      `json:"draft"`
		FirstContribution           bool      `json:"first_contribution"`
		MergeStatus                 string    `json:"merge_status"`
		TargetProjectID             int64     `json:"target_project_id"`
		Description                 string    `json:"description"`
		PreparedAt                  string    `json:"prepared_at"`
		TotalTimeSpent              int       `json:"total_time_spent"`
		TimeChange                  int       `json:"time_change"`
		HumanTotalTimeSpent         *string   `json:"human_total_time_spent"`
		HumanTimeChange             *string   `json:"human_time_change"`
		HumanTimeEstimate           *string   `json:"human_time_estimate"`
		URL                         string    `json:"url"`
		Source                      glProject `json:"source"`
		Target                      glProject `json:"target"`
		LastCommit                  glCommit  `json:"last_commit"`
		Labels                      []glLabel `json:"labels"`
		Action                      string    `json:"action"`
		DetailedMergeStatus         string    `json:"detailed_merge_status"`
	}
	// glNote is a Note Hook's object_attributes.
	glNote struct {
		ID           int64   `json:"id"`
		Note         string  `json:"note"`
		NoteableType string  `json:"noteable_type"`
		AuthorID     int64   `json:"author_id"`
		CreatedAt    string  `json:"created_at"`
		UpdatedAt    string  `json:"updated_at"`
		ProjectID    int64   `json:"project_id"`
		Attachment   *string `json:"attachment"`
		LineCode     *string `json:"line_code"`
		CommitID     string  `json:"commit_id"`
		NoteableID   int64   `json:"noteable_id"`
		System       bool    `json:"system"`
		StDiff       any     `json:"st_diff"`
		// Type is DiffNote for a note on a diff, null for a plain
		// comment; Position and OriginalPosition are a DiffNote's place
		// on the diff, null for the others.
		Type             *string     `json:"type"`
		Position         *glPosition `json:"position"`
		OriginalPosition *glPosition `json:"original_position"`
		DiscussionID     string      `json:"discussion_id"`
		Action           string      `json:"action"`
		URL              string      `json:"url"`
	}
	// glPosition is where a DiffNote sits on a merge request's diff.
	glPosition struct {
		BaseSHA      string `json:"base_sha"`
		StartSHA     string `json:"start_sha"`
		HeadSHA      string `json:"head_sha"`
		OldPath      string `json:"old_path"`
		NewPath      string `json:"new_path"`
		PositionType string `json:"position_type"`
		OldLine      *int   `json:"old_line"`
		NewLine      *int   `json:"new_line"`
		LineRange    any    `json:"line_range"`
	}
	// glNoteIssue is the issue a Note Hook's note is on.
	glNoteIssue struct {
		ID          int64     `json:"id"`
		Title       string    `json:"title"`
		AssigneeIDs []int64   `json:"assignee_ids"`
		AssigneeID  *int64    `json:"assignee_id"`
		AuthorID    int64     `json:"author_id"`
		ProjectID   int64     `json:"project_id"`
		CreatedAt   string    `json:"created_at"`
		UpdatedAt   string    `json:"updated_at"`
		Position    int       `json:"position"`
		BranchName  *string   `json:"branch_name"`
		Description string    `json:"description"`
		MilestoneID *int64    `json:"milestone_id"`
		State       string    `json:"state"`
		IID         int       `json:"iid"`
		Labels      []glLabel `json:"labels"`
	}
	// glNoteMergeRequest is the merge request a Note Hook's note is on.
	glNoteMergeRequest struct {
		ID                  int64     `json:"id"`
		TargetBranch        string    `json:"target_branch"`
		SourceBranch        string    `json:"source_branch"`
		SourceProjectID     int64     `json:"source_project_id"`
		AuthorID            int64     `json:"author_id"`
		AssigneeID          *int64    `json:"assignee_id"`
		Title               string    `json:"title"`
		CreatedAt           string    `json:"created_at"`
		UpdatedAt           string    `json:"updated_at"`
		MilestoneID         *int64    `json:"milestone_id"`
		State               string    `json:"state"`
		MergeStatus         string    `json:"merge_status"`
		TargetProjectID     int64     `json:"target_project_id"`
		IID                 int       `json:"iid"`
		Description         string    `json:"description"`
		Position            int       `json:"position"`
		Labels              []glLabel `json:"labels"`
		Source              glProject `json:"source"`
		Target              glProject `json:"target"`
		LastCommit          glCommit  `json:"last_commit"`
		WorkInProgress      bool      `json:"work_in_progress"`
		Draft               bool      `json:"draft"`
		Assignee            *glUser   `json:"assignee"`
		DetailedMergeStatus string    `json:"detailed_merge_status"`
	}
	glPayload struct {
		ObjectKind       string              `json:"object_kind"`
		EventType        string              `json:"event_type"`
		User             glUser              `json:"user"`
		ProjectID        int64               `json:"project_id,omitempty"`
		Project          glProject           `json:"project"`
		ObjectAttributes any                 `json:"object_attributes"`
		Repository       glRepository        `json:"repository"`
		Assignees        []glUser            `json:"assignees,omitempty"`
		Labels           []glLabel           `json:"labels,omitempty"`
		Changes          *glChanges          `json:"changes,omitempty"`
		Issue            *glNoteIssue        `json:"issue,omitempty"`
		MergeRequest     *glNoteMergeRequest `json:"merge_request,omitempty"`
	}
)

// gl names the addresses of one project on one GitLab.
type gl struct {
	web     string // https://gitlab.example.com
	project string // group/sub/name
}

func newGL(project, webURL string) gl { return gl{web: site(webURL, project), project: project} }

func (g gl) user(username string) glUser {
	return glUser{
		ID: id("user", username), Name: strings.ToUpper(username[:min(1, len(username))]) + username[min(1, len(username)):],
		Username:  username,
		AvatarURL: fmt.Sprintf("https://secure.gravatar.com/avatar/%032x?s=80&d=identicon", id("avatar", username)),
		Email:     "[REDACTED]",
	}
}

func (g gl) projectObject() glProject {
	namespace, name := "", g.project
	if i := strings.LastIndexByte(g.project, '/'); i >= 0 {
		namespace, name = g.project[:i], g.project[i+1:]
	}
	host := strings.TrimPrefix(strings.TrimPrefix(g.web, "https://"), "http://")
	host, _, _ = strings.Cut(host, ":")
	web := g.web + "/" + g.project
	ssh := "git@" + host + ":" + g.project + ".git"
	return glProject{
		ID: g.projectID(), Name: name, WebURL: web, GitSSHURL: ssh, GitHTTPURL: web + ".git",
		Namespace: namespace, PathWithNamespace: g.project, DefaultBranch: "main", Homepage: web,
		URL: ssh, SSHURL: ssh, HTTPURL: web + ".git",
	}
}

func (g gl) projectID() int64 { return id("project", g.project) }

func (g gl) repository() glRepository {
	p := g.projectObject()
	return glRepository{Name: p.Name, URL: p.GitSSHURL, Homepage: p.WebURL}
}

func (g gl) label(title string) glLabel {
	return glLabel{ID: id("label", g.project, title), Title: title, Color: "#6699cc", ProjectID: g.projectID(),
		CreatedAt: "2025-11-20 08:00:00 UTC", UpdatedAt: "2025-11-20 08:00:00 UTC", Type: "ProjectLabel"}
}

func (g gl) envelope(kind, user string, attributes any) glPayload {
	return glPayload{ObjectKind: kind, EventType: kind, User: g.user(user), Project: g.projectObject(),
		ObjectAttributes: attributes, Repository: g.repository()}
}

func (g gl) commit(ref string) glCommit {
	c := glCommit{ID: fmt.Sprintf("%040x", id("commit", g.project, ref)), Message: "Fix the parser\n", Title: "Fix the parser", Timestamp: "2026-03-01T17:02:11+00:00"}
	c.URL = g.web + "/" + g.project + "/-/commit/" + c.ID
	c.Author.Name, c.Author.Email = "Ada Lovelace", "ada@example.com"
	return c
}

// GitLabIssueLabeled is the body of an Issue Hook, action update: user
// added label to issue iid of project (group/…/name) on the GitLab at
// webURL (changes.labels shows it added).
func GitLabIssueLabeled(project, webURL string, iid int, title, body, label, user string) []byte {
	g := newGL(project, webURL)
	l := g.label(label)
	u := g.user(user)
	a := glIssue{
		ID: id("issue", project, iid), Title: title, AssigneeIDs: []int64{}, AuthorID: u.ID, ProjectID: g.projectID(),
		CreatedAt: "2026-03-02 09:14:27 UTC", UpdatedAt: "2026-03-02 10:41:05 UTC", UpdatedByID: u.ID,
		Description: body, StateID: 1, Type: "Issue", IID: iid, URL: fmt.Sprintf("%s/%s/-/issues/%d", g.web, project, iid),
		State: "opened", Action: "update", Labels: []glLabel{l},
	}
	p := g.envelope("issue", user, a)
	p.Labels = []glLabel{l}
	p.Changes = &glChanges{
		UpdatedByID: glChange[*int64]{Current: &u.ID},
		UpdatedAt:   glChange[string]{Previous: "2026-03-02 09:14:27 UTC", Current: "2026-03-02 10:41:05 UTC"},
		Labels:      glChange[[]glLabel]{Previous: []glLabel{}, Current: []glLabel{l}},
	}
	return encode(p)
}

// GitLabMergeRequestLabeled is the body of a Merge Request Hook, action
// update: user added label to merge request iid.
func GitLabMergeRequestLabeled(project, webURL string, iid int, title, body, label, user string) []byte {
	g := newGL(project, webURL)
	l := g.label(label)
	u := g.user(user)
	proj := g.projectObject()
	a := glMergeRequest{
		ID: id("mr", project, iid), IID: iid, TargetBranch: "main", SourceBranch: fmt.Sprintf("fix-%d", iid),
		SourceProjectID: proj.ID, AuthorID: u.ID, AssigneeIDs: []int64{}, ReviewerIDs: []int64{}, Title: title,
		CreatedAt: "2026-03-02 09:14:27 UTC", UpdatedAt: "2026-03-02 10:41:05 UTC", StateID: 1, State: "opened",
		BlockingDiscussionsResolved: true, MergeStatus: "can_be_merged", TargetProjectID: proj.ID, Description: body,
		PreparedAt: "2026-03-02 09:14:31 UTC", URL: fmt.Sprintf("%s/%s/-/merge_requests/%d", g.web, project, iid),
		Source: proj, Target: proj, LastCommit: g.commit(fmt.Sprintf("fix-%d", iid)), Labels: []glLabel{l},
		Action: "update", DetailedMergeStatus: "mergeable",
	}
	p := g.envelope("merge_request", user, a)
	p.Labels = []glLabel{l}
	p.Changes = &glChanges{
		UpdatedByID: glChange[*int64]{Current: &u.ID},
		UpdatedAt:   glChange[string]{Previous: "2026-03-02 09:14:27 UTC", Current: "2026-03-02 10:41:05 UTC"},
		Labels:      glChange[[]glLabel]{Previous: []glLabel{}, Current: []glLabel{l}},
	}
	return encode(p)
}

// GitLabNote is the body of a Note Hook, action create: user wrote note on
// issue iid, or on merge request iid when onMergeRequest. As GitLab
// sends it, the issue or merge request object names no url of its own:
// the note's url is the thread's page and #note_<id>.
func GitLabNote(project, webURL string, iid int, onMergeRequest bool, title, body, note, user string) []byte {
	return encode(newGL(project, webURL).note(iid, onMergeRequest, title, body, note, user))
}

// GitLabDiffNote is the body of a Note Hook, action create: user wrote
// note on a line of merge request iid's diff (a DiffNote, with its
// position and line_code).
func GitLabDiffNote(project, webURL string, iid int, title, body, note, user string) []byte {
	g := newGL(project, webURL)
	p := g.note(iid, true, title, body, note, user)
	n := p.ObjectAttributes.(glNote)
	head, base := p.MergeRequest.LastCommit.ID, fmt.Sprintf("%040x", id("base", project, iid))
	line := 12
	pos := &glPosition{BaseSHA: base, StartSHA: base, HeadSHA: head, OldPath: "main.go", NewPath: "main.go", PositionType: "text", NewLine: &line}
	kind := "DiffNote"
	n.Type, n.Position, n.OriginalPosition = &kind, pos, pos
	lineCode := fmt.Sprintf("%040x_%d_%d", id("path", "main.go"), line-2, line)
	n.LineCode, n.CommitID = &lineCode, head
	p.ObjectAttributes = n
	return encode(p)
}

// note is a Note Hook's payload: user wrote note on issue iid, or on merge
// request iid when onMergeRequest; a plain comment on its conversation.
func (g gl) note(iid int, onMergeRequest bool, title, body, note, user string) glPayload {
	project := g.project
	u := g.user(user)
	proj := g.projectObject()
	n := glNote{
		ID: id("note", project, iid, note), Note: note, NoteableType: "Issue", AuthorID: u.ID,
		CreatedAt: "2026-03-02 10:41:05 UTC", UpdatedAt: "2026-03-02 10:41:05 UTC", ProjectID: proj.ID, Action: "create",
	}
	page := fmt.Sprintf("%s/%s/-/issues/%d", g.web, project, iid)
	p := g.envelope("note", user, nil)
	p.ProjectID = proj.ID
	if onMergeRequest {
		page = fmt.Sprintf("%s/%s/-/merge_requests/%d", g.web, project, iid)
		n.NoteableType = "MergeRequest"
		n.NoteableID = id("mr", project, iid)
		p.MergeRequest = &glNoteMergeRequest{
			ID: n.NoteableID, TargetBranch: "main", SourceBranch: fmt.Sprintf("fix-%d", iid), SourceProjectID: proj.ID,
			AuthorID: id("user", "author"), Title: title, CreatedAt: "2026-03-02 09:14:27 UTC", UpdatedAt: "2026-03-02 10:41:05 UTC",
			State: "opened", MergeStatus: "can_be_merged", TargetProjectID: proj.ID, IID: iid, Description: body,
			Labels: []glLabel{}, Source: proj, Target: proj, LastCommit: g.commit(fmt.Sprintf("fix-%d", iid)),
			DetailedMergeStatus: "mergeable",
		}
	} else {
		n.NoteableID = id("issue", project, iid)
		p.Issue = &glNoteIssue{
			ID: n.NoteableID, Title: title, AssigneeIDs: []int64{}, AuthorID: id("user", "author"), ProjectID: proj.ID,
			CreatedAt: "2026-03-02 09:14:27 UTC", UpdatedAt: "2026-03-02 10:41:05 UTC", Description: body,
			State: "opened", IID: iid, Labels: []glLabel{},
		}
	}
	n.URL = fmt.Sprintf("%s#note_%d", page, n.ID)
	n.DiscussionID = fmt.Sprintf("%040x", id("discussion", project, iid, note))
	p.ObjectAttributes = n
	return p
}
