package forgetest

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/forge"
)

// This file is the GitLab stand-in's side of a run's results: the
// project, its branches, merge requests and notes, as GitLab serves them
// to the deployment's token (PRIVATE-TOKEN: a wrong one is a 401; a project
// the instance does not have is a 404).
//
// As on GitLab: issues and merge requests have iid sequences of their own
// per project; a merge request's source branch must be one of the bare
// repository's (400 {"source_branch":["does not exist"]}), and only one
// merge request from a source into a target may be open (409 "Another open
// merge request already exists for this source branch: !N"); a title
// starting "Draft:" makes a draft; a note goes on an issue or merge
// request that exists (404). What berth should never send fails the test
// as well as being refused: a missing field, a merge request from a branch
// into itself (422) or into a target branch the repository lacks (GitLab
// would open one that can never merge), a title over 255 characters, an
// empty note or one over 1000000 characters, a merge request list not
// filtered by state=opened and source_branch. (A description over GitLab's
// 1048576 characters does not get that far: the stand-in reads no body
// over 1 MiB.)

// GitLab's limits on what berth sends.
const (
	gitlabMaxTitle = 255
	gitlabMaxNote  = 1000000
)

// GitLabMergeRequest is a merge request opened on the GitLab stand-in.
type GitLabMergeRequest struct {
	IID            int
	Source, Target string
	Title          string
	Description    string
	Draft          bool   // its title makes it one
	URL            string // its web_url
}

// gitlabMergeRequest is a merge request with its notes.
type gitlabMergeRequest struct {
	GitLabMergeRequest
	notes []string
}

// gitlabIssue is an issue on the GitLab stand-in.
type gitlabIssue struct {
	title string
	notes []string
}

// AddIssue opens an issue in project, as a person would, and returns its
// iid.
func (g *GitLab) AddIssue(project, title, body string) int {
	g.t.Helper()
	g.mustHave(project)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.issues[project] = append(g.issues[project], &gitlabIssue{title: title})
	return len(g.issues[project])
}

// MergeRequests returns the merge requests opened in project, oldest
// first.
func (g *GitLab) MergeRequests(project string) []GitLabMergeRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]GitLabMergeRequest, 0, len(g.mrs[project]))
	for _, mr := range g.mrs[project] {
		out = append(out, mr.GitLabMergeRequest)
	}
	return out
}

// Notes returns the bodies of the notes on issue or merge request iid of
// project, oldest first.
func (g *GitLab) Notes(project string, kind forge.ThreadKind, iid int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if notes := g.notes(project, kind, iid); notes != nil {
		return slices.Clone(*notes)
	}
	return nil
}

// notes is where the notes of issue or merge request iid of project go,
// nil if there is no such one. The caller holds g.mu.
func (g *GitLab) notes(project string, kind forge.ThreadKind, iid int) *[]string {
	switch kind {
	case forge.ThreadIssue:
		if is := g.issues[project]; iid >= 1 && iid <= len(is) {
			return &is[iid-1].notes
		}
	case forge.ThreadChange:
		if mrs := g.mrs[project]; iid >= 1 && iid <= len(mrs) {
			return &mrs[iid-1].notes
		}
	}
	return nil
}

// refuse answers status with GitLab's body and fails the test when berth
// should never have sent it.
func (g *GitLab) refuse(w http.ResponseWriter, r *http.Request, berthsFault bool, status int, body any) {
	if berthsFault {
		g.t.Errorf("forgetest: GitLab stand-in: %s %s: berth sent what GitLab refuses: %d %v", r.Method, r.URL.Path, status, body)
	}
	writeJSON(w, status, body)
}

// invalid is GitLab's 400 for a field that fails validation.
func invalid(field, why string) map[string]any {
	return map[string]any{"message": map[string][]string{field: {why}}}
}

// webURL is project's page.
func (g *GitLab) webURL(project string) string { return g.srv.URL + "/" + project }

// getProject is GET /api/v4/projects/{project}.
func (g *GitLab) getProject(w http.ResponseWriter, r *http.Request) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	var def any // null in an empty repository
	if b := g.repos.defaultBranch(r.Context(), project); b != "" {
		def = b
	}
	i := strings.LastIndexByte(project, '/')
	writeJSON(w, http.StatusOK, map[string]any{
		"id":                  g.projectID(project),
		"name":                project[i+1:],
		"path":                project[i+1:],
		"path_with_namespace": project,
		"default_branch":      def,
		"web_url":             g.webURL(project),
		"http_url_to_repo":    g.webURL(project) + ".git",
		"visibility":          "private",
		"archived":            false,
	})
}

// projectID is project's numeric id: its place among the stand-in's
// projects in order.
func (g *GitLab) projectID(project string) int {
	var paths []string
	for p := range g.repos.paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return 100 + slices.Index(paths, project)
}

// getBranch is GET /api/v4/projects/{project}/repository/branches/{branch}.
func (g *GitLab) getBranch(w http.ResponseWriter, r *http.Request) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	branch := r.PathValue("branch")
	if !g.repos.hasBranch(r.Context(), project, branch) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Branch Not Found"})
		return
	}
	sha, _ := g.repos.gitOK(r.Context(), project, "rev-parse", "refs/heads/"+branch)
	writeJSON(w, http.StatusOK, map[string]any{
		"name":      branch,
		"merged":    false,
		"protected": false,
		"default":   branch == g.repos.defaultBranch(r.Context(), project),
		"web_url":   g.webURL(project) + "/-/tree/" + url.PathEscape(branch),
		"commit":    map[string]any{"id": sha},
	})
}

// mergeRequestJSON is a merge request as GitLab answers it.
func (g *GitLab) mergeRequestJSON(project string, mr *gitlabMergeRequest) map[string]any {
	return map[string]any{
		"id":                mr.IID + 1000*g.projectID(project),
		"iid":               mr.IID,
		"project_id":        g.projectID(project),
		"title":             mr.Title,
		"description":       mr.Description,
		"state":             "opened",
		"source_branch":     mr.Source,
		"target_branch":     mr.Target,
		"source_project_id": g.projectID(project),
		"target_project_id": g.projectID(project),
		"draft":             mr.Draft,
		"work_in_progress":  mr.Draft,
		"web_url":           mr.URL,
	}
}

// gitlabDraft reports whether title makes a merge request a draft, as
// GitLab reads titles.
func gitlabDraft(title string) bool {
	t := strings.ToLower(title)
	for _, p := range []string{"draft:", "[draft]", "(draft)", "draft - "} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// createMergeRequest is POST /api/v4/projects/{project}/merge_requests.
func (g *GitLab) createMergeRequest(w http.ResponseWriter, r *http.Request) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	var req struct {
		SourceBranch string `json:"source_branch"`
		TargetBranch string `json:"target_branch"`
		Title        string `json:"title"`
		Description  string `json:"description"`
	}
	if !decode(g.t, "GitLab", r, &req) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "400 Bad request"})
		return
	}
	switch {
	case req.SourceBranch == "":
		g.refuse(w, r, true, http.StatusBadRequest, map[string]string{"error": "source_branch is missing"})
	case req.TargetBranch == "":
		g.refuse(w, r, true, http.StatusBadRequest, map[string]string{"error": "target_branch is missing"})
	case strings.TrimSpace(req.Title) == "":
		g.refuse(w, r, true, http.StatusBadRequest, map[string]string{"error": "title is missing"})
	case req.SourceBranch == req.TargetBranch:
		g.refuse(w, r, true, http.StatusUnprocessableEntity, map[string][]string{"message": {"You can't use same project/branch for source and target"}})
	case utf8.RuneCountInString(req.Title) > gitlabMaxTitle:
		g.refuse(w, r, true, http.StatusBadRequest, invalid("title", "is too long (maximum is 255 characters)"))
	case !g.repos.hasBranch(r.Context(), project, req.SourceBranch):
		g.refuse(w, r, false, http.StatusBadRequest, invalid("source_branch", "does not exist"))
	case !g.repos.hasBranch(r.Context(), project, req.TargetBranch):
		// GitLab takes it, and opens a merge request that can never
		// merge: berth checks the target first.
		g.refuse(w, r, true, http.StatusBadRequest, invalid("target_branch", "does not exist"))
	default:
		g.openMergeRequest(w, project, req.SourceBranch, req.TargetBranch, req.Title, req.Description)
	}
}

// openMergeRequest records a merge request unless one from source into
// target is open already.
func (g *GitLab) openMergeRequest(w http.ResponseWriter, project, source, target, title, description string) {
	g.mu.Lock()
	for _, mr := range g.mrs[project] {
		if mr.Source == source && mr.Target == target {
			g.mu.Unlock()
			writeJSON(w, http.StatusConflict, map[string][]string{
				"message": {"Another open merge request already exists for this source branch: !" + strconv.Itoa(mr.IID)},
			})
			return
		}
	}
	iid := len(g.mrs[project]) + 1
	mr := &gitlabMergeRequest{GitLabMergeRequest: GitLabMergeRequest{
		IID: iid, Source: source, Target: target, Title: title, Description: description,
		Draft: gitlabDraft(title),
		URL:   g.webURL(project) + "/-/merge_requests/" + strconv.Itoa(iid),
	}}
	g.mrs[project] = append(g.mrs[project], mr)
	answer := g.mergeRequestJSON(project, mr)
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, answer)
}

// listMergeRequests is GET /api/v4/projects/{project}/merge_requests.
func (g *GitLab) listMergeRequests(w http.ResponseWriter, r *http.Request) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	source, target := q.Get("source_branch"), q.Get("target_branch")
	if q.Get("state") != "opened" || source == "" {
		// GitLab lists closed and merged ones too without state=opened,
		// and every branch's without source_branch.
		g.t.Errorf("forgetest: GitLab stand-in: GET %s: query %q, want state=opened and a source_branch", r.URL.Path, r.URL.RawQuery)
	}
	out := []map[string]any{}
	g.mu.Lock()
	for _, mr := range g.mrs[project] {
		if (source == "" || mr.Source == source) && (target == "" || mr.Target == target) {
			out = append(out, g.mergeRequestJSON(project, mr))
		}
	}
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// createIssueNote is POST /api/v4/projects/{project}/issues/{iid}/notes.
func (g *GitLab) createIssueNote(w http.ResponseWriter, r *http.Request) {
	g.createNote(w, r, forge.ThreadIssue)
}

// createMergeRequestNote is POST
// /api/v4/projects/{project}/merge_requests/{iid}/notes.
func (g *GitLab) createMergeRequestNote(w http.ResponseWriter, r *http.Request) {
	g.createNote(w, r, forge.ThreadChange)
}

func (g *GitLab) createNote(w http.ResponseWriter, r *http.Request, kind forge.ThreadKind) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	g.mu.Lock()
	found := g.notes(project, kind, iid) != nil
	g.mu.Unlock()
	if !found {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Not found"})
		return
	}
	var req struct {
		Body string `json:"body"`
	}
	if !decode(g.t, "GitLab", r, &req) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "400 Bad request"})
		return
	}
	switch {
	case strings.TrimSpace(req.Body) == "":
		g.refuse(w, r, true, http.StatusBadRequest, map[string]string{"error": "body is empty"})
		return
	case utf8.RuneCountInString(req.Body) > gitlabMaxNote:
		g.refuse(w, r, true, http.StatusBadRequest, invalid("note", "is too long (maximum is 1000000 characters)"))
		return
	}
	g.mu.Lock()
	notes := g.notes(project, kind, iid)
	*notes = append(*notes, req.Body)
	g.lastNoteID++
	id := g.lastNoteID
	g.mu.Unlock()
	noteable := "Issue"
	if kind == forge.ThreadChange {
		noteable = "MergeRequest"
	}
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	writeJSON(w, http.StatusCreated, map[string]any{
		"id":            id,
		"type":          nil,
		"body":          req.Body,
		"author":        map[string]any{"id": 1, "username": "berth", "name": "berth"},
		"created_at":    now,
		"updated_at":    now,
		"system":        false,
		"noteable_id":   iid + 1000*g.projectID(project),
		"noteable_type": noteable,
		"noteable_iid":  iid,
		"resolvable":    false,
		"confidential":  false,
		"internal":      false,
	})
}
