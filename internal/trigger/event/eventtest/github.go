package eventtest

import (
	"fmt"
	"strings"
)

// GitHub's payload objects, in the shapes and field order GitHub sends.
type (
	ghUser struct {
		Login             string `json:"login"`
		ID                int64  `json:"id"`
		NodeID            string `json:"node_id"`
		AvatarURL         string `json:"avatar_url"`
		GravatarID        string `json:"gravatar_id"`
		URL               string `json:"url"`
		HTMLURL           string `json:"html_url"`
		FollowersURL      string `json:"followers_url"`
		FollowingURL      string `json:"following_url"`
		GistsURL          string `json:"gists_url"`
		StarredURL        string `json:"starred_url"`
		SubscriptionsURL  string `json:"subscriptions_url"`
		OrganizationsURL  string `json:"organizations_url"`
		ReposURL          string `json:"repos_url"`
		EventsURL         string `json:"events_url"`
		ReceivedEventsURL string `json:"received_events_url"`
		Type              string `json:"type"`
		UserViewType      string `json:"user_view_type"`
		SiteAdmin         bool   `json:"site_admin"`
	}
	ghLabel struct {
		ID          int64   `json:"id"`
		NodeID      string  `json:"node_id"`
		URL         string  `json:"url"`
		Name        string  `json:"name"`
		Color       string  `json:"color"`
		Default     bool    `json:"default"`
		Description *string `json:"description"`
	}
	ghReactions struct {
		URL        string `json:"url"`
		TotalCount int    `json:"total_count"`
		PlusOne    int    `json:"+1"`
		MinusOne   int    `json:"-1"`
		Laugh      int    `json:"laugh"`
		Hooray     int    `json:"hooray"`
		Confused   int    `json:"confused"`
		Heart      int    `json:"heart"`
		Rocket     int    `json:"rocket"`
		Eyes       int    `json:"eyes"`
	}
	// ghIssuePull is what an issue that is a pull request says of it.
	ghIssuePull struct {
		URL      string  `json:"url"`
		HTMLURL  string  `json:"html_url"`
		DiffURL  string  `json:"diff_url"`
		PatchURL string  `json:"patch_url"`
		MergedAt *string `json:"merged_at"`
	}
	ghIssue struct {
		URL                   string       `json:"url"`
		RepositoryURL         string       `json:"repository_url"`
		LabelsURL             string       `json:"labels_url"`
		CommentsURL           string       `json:"comments_url"`
		EventsURL             string       `json:"events_url"`
		HTMLURL               string       `json:"html_url"`
		ID                    int64        `json:"id"`
		NodeID                string       `json:"node_id"`
		Number                int          `json:"number"`
		Title                 string       `json:"title"`
		User                  ghUser       `json:"user"`
		Labels                []ghLabel    `json:"labels"`
		State                 string       `json:"state"`
		Locked                bool         `json:"locked"`
		Assignee              *ghUser      `json:"assignee"`
		Assignees             []ghUser     `json:"assignees"`
		Milestone             any          `json:"milestone"`
		Comments              int          `json:"comments"`
		CreatedAt             string       `json:"created_at"`
		UpdatedAt             string       `json:"updated_at"`
		ClosedAt              *string      `json:"closed_at"`
		AuthorAssociation     string       `json:"author_association"`
		Type                  any          `json:"type"`
		ActiveLockReason      *string      `json:"active_lock_reason"`
		Draft                 *bool        `json:"draft,omitempty"`
		PullRequest           *ghIssuePull `json:"pull_request,omitempty"`
		Body                  *string      `json:"body"`
		Reactions             ghReactions  `json:"reactions"`
		TimelineURL           string       `json:"timeline_url"`
		PerformedViaGitHubApp any          `json:"performed_via_github_app"`
		StateReason           *string      `json:"state_reason"`
	}
	ghBranch struct {
		Label string  `json:"label"`
		Ref   string  `json:"ref"`
		SHA   string  `json:"sha"`
		User  ghUser  `json:"user"`
		Repo  *ghRepo `json:"repo"`
	}
	ghPull struct {
		URL                string    `json:"url"`
		ID                 int64     `json:"id"`
		NodeID             string    `json:"node_id"`
		HTMLURL            string    `json:"html_url"`
		DiffURL            string    `json:"diff_url"`
		PatchURL           string    `json:"patch_url"`
		IssueURL           string    `json:"issue_url"`
		Number             int       `json:"number"`
		State              string    `json:"state"`
		Locked             bool      `json:"locked"`
		Title              string    `json:"title"`
		User               ghUser    `json:"user"`
		Body               *string   `json:"body"`
		CreatedAt          string    `json:"created_at"`
		UpdatedAt          string    `json:"updated_at"`
		ClosedAt           *string   `json:"closed_at"`
		MergedAt           *string   `json:"merged_at"`
		MergeCommitSHA     *string   `json:"merge_commit_sha"`
		Assignee           *ghUser   `json:"assignee"`
		Assignees          []ghUser  `json:"assignees"`
		RequestedReviewers []ghUser  `json:"requested_reviewers"`
		RequestedTeams     []any     `json:"requested_teams"`
		Labels             []ghLabel `json:"labels"`
		Milestone          any       `json:"milestone"`
		Draft              bool      `json:"draft"`
		CommitsURL         string    `json:"commits_url"`
		ReviewCommentsURL  string    `json:"review_comments_url"`
		ReviewCommentURL   string    `json:"review_comment_url"`
		CommentsURL        string    `json:"comments_url"`
		StatusesURL        string    `json:"statuses_url"`
		Head               ghBranch  `json:"head"`
		Base               ghBranch  `json:"base"`
		AuthorAssociation  string    `json:"author_association"`
		AutoMerge          any       `json:"auto_merge"`
		ActiveLockReason   *string   `json:"active_lock_reason"`
		// The counts below come with pull_request events, not with
		// pull_request_review_comment's pull_request.
		Merged              *bool   `json:"merged,omitempty"`
		Mergeable           *bool   `json:"mergeable,omitempty"`
		MergeableState      *string `json:"mergeable_state,omitempty"`
		Comments            *int    `json:"comments,omitempty"`
		ReviewComments      *int    `json:"review_comments,omitempty"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify,omitempty"`
		Commits             *int    `json:"commits,omitempty"`
		Additions           *int    `json:"additions,omitempty"`
		Deletions           *int    `json:"deletions,omitempty"`
		ChangedFiles        *int    `json:"changed_files,omitempty"`
	}
	ghComment struct {
		URL                   string      `json:"url"`
		HTMLURL               string      `json:"html_url"`
		IssueURL              string      `json:"issue_url"`
		ID                    int64       `json:"id"`
		NodeID                string      `json:"node_id"`
		User                  ghUser      `json:"user"`
		CreatedAt             string      `json:"created_at"`
		UpdatedAt             string      `json:"updated_at"`
		AuthorAssociation     string      `json:"author_association"`
		Body                  string      `json:"body"`
		Reactions             ghReactions `json:"reactions"`
		PerformedViaGitHubApp any         `json:"performed_via_github_app"`
	}
	ghReviewComment struct {
		URL                 string      `json:"url"`
		PullRequestReviewID int64       `json:"pull_request_review_id"`
		ID                  int64       `json:"id"`
		NodeID              string      `json:"node_id"`
		DiffHunk            string      `json:"diff_hunk"`
		Path                string      `json:"path"`
		CommitID            string      `json:"commit_id"`
		OriginalCommitID    string      `json:"original_commit_id"`
		User                ghUser      `json:"user"`
		Body                string      `json:"body"`
		CreatedAt           string      `json:"created_at"`
		UpdatedAt           string      `json:"updated_at"`
		HTMLURL             string      `json:"html_url"`
		PullRequestURL      string      `json:"pull_request_url"`
		AuthorAssociation   string      `json:"author_association"`
		Reactions           ghReactions `json:"reactions"`
		StartLine           *int        `json:"start_line"`
		OriginalStartLine   *int        `json:"original_start_line"`
		StartSide           *string     `json:"start_side"`
		Line                int         `json:"line"`
		OriginalLine        int         `json:"original_line"`
		Side                string      `json:"side"`
		OriginalPosition    int         `json:"original_position"`
		Position            int         `json:"position"`
		SubjectType         string      `json:"subject_type"`
	}
	ghLink struct {
		Href string `json:"href"`
	}
	// ghReview is a pull_request_review's review.
	ghReview struct {
		ID                int64   `json:"id"`
		NodeID            string  `json:"node_id"`
		User              ghUser  `json:"user"`
		Body              *string `json:"body"`
		CommitID          string  `json:"commit_id"`
		SubmittedAt       string  `json:"submitted_at"`
		State             string  `json:"state"`
		HTMLURL           string  `json:"html_url"`
		PullRequestURL    string  `json:"pull_request_url"`
		AuthorAssociation string  `json:"author_association"`
		Links             struct {
			HTML        ghLink `json:"html"`
			PullRequest ghLink `json:"pull_request"`
		} `json:"_links"`
	}
	ghRepo struct {
		ID              int64   `json:"id"`
		NodeID          string  `json:"node_id"`
		Name            string  `json:"name"`
		FullName        string  `json:"full_name"`
		Private         bool    `json:"private"`
		Owner           ghUser  `json:"owner"`
		HTMLURL         string  `json:"html_url"`
		Description     *string `json:"description"`
		Fork            bool    `json:"fork"`
		URL             string  `json:"url"`
		IssuesURL       string  `json:"issues_url"`
		PullsURL        string  `json:"pulls_url"`
		CreatedAt       string  `json:"created_at"`
		UpdatedAt       string  `json:"updated_at"`
		PushedAt        string  `json:"pushed_at"`
		GitURL          string  `json:"git_url"`
		SSHURL          string  `json:"ssh_url"`
		CloneURL        string  `json:"clone_url"`
		Homepage        *string `json:"homepage"`
		Size            int     `json:"size"`
		StargazersCount int     `json:"stargazers_count"`
		WatchersCount   int     `json:"watchers_count"`
		Language        *string `json:"language"`
		HasIssues       bool    `json:"has_issues"`
		ForksCount      int     `json:"forks_count"`
		Archived        bool    `json:"archived"`
		Disabled        bool    `json:"disabled"`
		OpenIssuesCount int     `json:"open_issues_count"`
		AllowForking    bool    `json:"allow_forking"`
		IsTemplate      bool    `json:"is_template"`
		Topics          []any   `json:"topics"`
		Visibility      string  `json:"visibility"`
		Forks           int     `json:"forks"`
		OpenIssues      int     `json:"open_issues"`
		Watchers        int     `json:"watchers"`
		DefaultBranch   string  `json:"default_branch"`
	}
	ghInstallation struct {
		ID     int64  `json:"id"`
		NodeID string `json:"node_id"`
	}
	// ghPayload is the envelope every event shares; the fields of one
	// event are set, the others left out.
	ghPayload struct {
		Action       string          `json:"action"`
		Number       int             `json:"number,omitempty"`
		Review       *ghReview       `json:"review,omitempty"`
		Issue        *ghIssue        `json:"issue,omitempty"`
		PullRequest  *ghPull         `json:"pull_request,omitempty"`
		Comment      any             `json:"comment,omitempty"`
		Label        *ghLabel        `json:"label,omitempty"`
		Repository   ghRepo          `json:"repository"`
		Organization *ghOrganization `json:"organization,omitempty"`
		Sender       ghUser          `json:"sender"`
		Installation ghInstallation  `json:"installation"`
	}
	ghOrganization struct {
		Login       string  `json:"login"`
		ID          int64   `json:"id"`
		NodeID      string  `json:"node_id"`
		URL         string  `json:"url"`
		ReposURL    string  `json:"repos_url"`
		HooksURL    string  `json:"hooks_url"`
		IssuesURL   string  `json:"issues_url"`
		AvatarURL   string  `json:"avatar_url"`
		Description *string `json:"description"`
	}
)

// gh names the addresses of one repository on one GitHub.
type gh struct {
	web  string // https://github.com
	api  string // https://api.github.com, or https://host/api/v3 on GitHub Enterprise
	repo string // owner/name
}

func newGH(repo, webURL string) gh {
	web := site(webURL, repo)
	api := web + "/api/v3"
	if web == "https://github.com" {
		api = "https://api.github.com"
	}
	return gh{web: web, api: api, repo: repo}
}

// user is a GitHub account; a login ending in [bot] is an App's bot
// account (type Bot), as berth's own comments are.
func (g gh) user(login string) ghUser {
	kind := "User"
	if strings.HasSuffix(login, "[bot]") {
		kind = "Bot"
	}
	i := id("user", login)
	u := g.api + "/users/" + login
	return ghUser{
		Login: login, ID: i, NodeID: nodeID("U_kgDO", i),
		AvatarURL: fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", i), URL: u,
		HTMLURL: g.web + "/" + login, FollowersURL: u + "/followers", FollowingURL: u + "/following{/other_user}",
		GistsURL: u + "/gists{/gist_id}", StarredURL: u + "/starred{/owner}{/repo}",
		SubscriptionsURL: u + "/subscriptions", OrganizationsURL: u + "/orgs", ReposURL: u + "/repos",
		EventsURL: u + "/events{/privacy}", ReceivedEventsURL: u + "/received_events",
		Type: kind, UserViewType: "public",
	}
}

func (g gh) repository() ghRepo {
	owner, name, _ := strings.Cut(g.repo, "/")
	o := g.user(owner)
	o.Type = "Organization"
	i := id("repo", g.repo)
	u := g.api + "/repos/" + g.repo
	host := strings.TrimPrefix(strings.TrimPrefix(g.web, "https://"), "http://")
	return ghRepo{
		ID: i, NodeID: nodeID("R_kgDO", i), Name: name, FullName: g.repo, Private: true, Owner: o,
		HTMLURL: g.web + "/" + g.repo, URL: u, IssuesURL: u + "/issues{/number}", PullsURL: u + "/pulls{/number}",
		CreatedAt: "2025-11-20T08:00:00Z", UpdatedAt: created, PushedAt: created,
		GitURL: "git://" + host + "/" + g.repo + ".git", SSHURL: "git@" + host + ":" + g.repo + ".git",
		CloneURL: g.web + "/" + g.repo + ".git", Size: 812, HasIssues: true, OpenIssuesCount: 4, AllowForking: true,
		Topics: []any{}, Visibility: "private", OpenIssues: 4, DefaultBranch: "main",
	}
}

func (g gh) organization() *ghOrganization {
	owner, _, _ := strings.Cut(g.repo, "/")
	i := id("user", owner)
	u := g.api + "/orgs/" + owner
	return &ghOrganization{
		Login: owner, ID: i, NodeID: nodeID("O_kgDO", i), URL: u, ReposURL: u + "/repos", HooksURL: u + "/hooks",
		IssuesURL: u + "/issues", AvatarURL: fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", i),
	}
}

func (g gh) label(name string) ghLabel {
	i := id("label", g.repo, name)
	return ghLabel{ID: i, NodeID: nodeID("LA_kwDO", i), URL: g.api + "/repos/" + g.repo + "/labels/" + name, Name: name, Color: "0e8a16"}
}

func (g gh) reactions(u string) ghReactions { return ghReactions{URL: u + "/reactions"} }

// issue is issue number n, a pull request's issue when pull.
func (g gh) issue(n int, pull bool, title, body, author string, labels []ghLabel) *ghIssue {
	i := id("issue", g.repo, n)
	u := fmt.Sprintf("%s/repos/%s/issues/%d", g.api, g.repo, n)
	is := &ghIssue{
		URL: u, RepositoryURL: g.api + "/repos/" + g.repo, LabelsURL: u + "/labels{/name}",
		CommentsURL: u + "/comments", EventsURL: u + "/events", HTMLURL: fmt.Sprintf("%s/%s/issues/%d", g.web, g.repo, n),
		ID: i, NodeID: nodeID("I_kwDO", i), Number: n, Title: title, User: g.user(author), Labels: labels,
		State: "open", Assignees: []ghUser{}, CreatedAt: created, UpdatedAt: updated,
		AuthorAssociation: "MEMBER", Body: nullable(body), Reactions: g.reactions(u), TimelineURL: u + "/timeline",
	}
	if labels == nil {
		is.Labels = []ghLabel{}
	}
	if pull {
		draft := false
		is.Draft = &draft
		is.HTMLURL = fmt.Sprintf("%s/%s/pull/%d", g.web, g.repo, n)
		is.PullRequest = &ghIssuePull{
			URL: fmt.Sprintf("%s/repos/%s/pulls/%d", g.api, g.repo, n), HTMLURL: is.HTMLURL,
			DiffURL: is.HTMLURL + ".diff", PatchURL: is.HTMLURL + ".patch",
		}
	}
	return is
}

// pull is pull request number n; counts adds what pull_request events
// carry.
func (g gh) pull(n int, title, body, author string, labels []ghLabel, counts bool) *ghPull {
	i := id("pull", g.repo, n)
	u := fmt.Sprintf("%s/repos/%s/pulls/%d", g.api, g.repo, n)
	issue := fmt.Sprintf("%s/repos/%s/issues/%d", g.api, g.repo, n)
	web := fmt.Sprintf("%s/%s/pull/%d", g.web, g.repo, n)
	repo := g.repository()
	owner, _, _ := strings.Cut(g.repo, "/")
	head := fmt.Sprintf("%040x", id("head", g.repo, n))
	base := fmt.Sprintf("%040x", id("base", g.repo, n))
	p := &ghPull{
		URL: u, ID: i, NodeID: nodeID("PR_kwDO", i), HTMLURL: web, DiffURL: web + ".diff", PatchURL: web + ".patch",
		IssueURL: issue, Number: n, State: "open", Title: title, User: g.user(author), Body: nullable(body),
		CreatedAt: created, UpdatedAt: updated, Assignees: []ghUser{}, RequestedReviewers: []ghUser{},
		RequestedTeams: []any{}, Labels: labels, CommitsURL: u + "/commits", ReviewCommentsURL: u + "/comments",
		ReviewCommentURL: g.api + "/repos/" + g.repo + "/pulls/comments{/number}", CommentsURL: issue + "/comments",
		StatusesURL:       g.api + "/repos/" + g.repo + "/statuses/" + head,
		Head:              ghBranch{Label: owner + ":fix-" + fmt.Sprint(n), Ref: "fix-" + fmt.Sprint(n), SHA: head, User: repo.Owner, Repo: &repo},
		Base:              ghBranch{Label: owner + ":main", Ref: "main", SHA: base, User: repo.Owner, Repo: &repo},
		AuthorAssociation: "MEMBER",
	}
	if labels == nil {
		p.Labels = []ghLabel{}
	}
	if counts {
		f, t, zero, state := false, true, 0, "clean"
		commits, additions, deletions, files := 2, 31, 4, 3
		p.Merged, p.Mergeable, p.MergeableState = &f, &t, &state
		p.Comments, p.ReviewComments, p.MaintainerCanModify = &zero, &zero, &f
		p.Commits, p.Additions, p.Deletions, p.ChangedFiles = &commits, &additions, &deletions, &files
	}
	return p
}

func (g gh) envelope(action, sender string) ghPayload {
	return ghPayload{
		Action: action, Repository: g.repository(), Organization: g.organization(), Sender: g.user(sender),
		Installation: ghInstallation{ID: id("installation", g.repo), NodeID: nodeID("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u", id("installation", g.repo))},
	}
}

// GitHubIssueLabeled is the body of an issues event, action labeled:
// sender added label to issue number of repo (owner/name) on the GitHub
// at webURL.
func GitHubIssueLabeled(repo string, webURL string, number int, title, body, label, sender string) []byte {
	g := newGH(repo, webURL)
	l := g.label(label)
	p := g.envelope("labeled", sender)
	p.Issue = g.issue(number, false, title, body, sender, []ghLabel{l})
	p.Label = &l
	return encode(p)
}

// GitHubPullRequestLabeled is the body of a pull_request event, action
// labeled: sender added label to pull request number.
func GitHubPullRequestLabeled(repo, webURL string, number int, title, body, label, sender string) []byte {
	g := newGH(repo, webURL)
	l := g.label(label)
	p := g.envelope("labeled", sender)
	p.Number = number
	p.PullRequest = g.pull(number, title, body, sender, []ghLabel{l}, true)
	p.Label = &l
	return encode(p)
}

// GitHubIssueComment is the body of an issue_comment event, action
// created: sender commented comment on issue number, or on pull request
// number when onPull (GitHub sends comments on a pull request's
// conversation as issue comments, the issue saying it is a pull request).
func GitHubIssueComment(repo, webURL string, number int, onPull bool, title, body, comment, sender string) []byte {
	g := newGH(repo, webURL)
	p := g.envelope("created", sender)
	p.Issue = g.issue(number, onPull, title, body, "octo-author", nil)
	p.Issue.Comments = 1
	i := id("comment", g.repo, number, comment)
	p.Comment = ghComment{
		URL: fmt.Sprintf("%s/repos/%s/issues/comments/%d", g.api, g.repo, i), HTMLURL: fmt.Sprintf("%s#issuecomment-%d", p.Issue.HTMLURL, i),
		IssueURL: p.Issue.URL, ID: i, NodeID: nodeID("IC_kwDO", i), User: g.user(sender), CreatedAt: updated, UpdatedAt: updated,
		AuthorAssociation: "MEMBER", Body: comment, Reactions: g.reactions(fmt.Sprintf("%s/repos/%s/issues/comments/%d", g.api, g.repo, i)),
	}
	return encode(p)
}

// GitHubReviewComment is the body of a pull_request_review_comment event,
// action created: sender commented comment on a line of pull request
// number's diff.
func GitHubReviewComment(repo, webURL string, number int, title, body, comment, sender string) []byte {
	g := newGH(repo, webURL)
	p := g.envelope("created", sender)
	p.PullRequest = g.pull(number, title, body, "octo-author", nil, false)
	i := id("review-comment", g.repo, number, comment)
	u := fmt.Sprintf("%s/repos/%s/pulls/comments/%d", g.api, g.repo, i)
	p.Comment = ghReviewComment{
		URL: u, PullRequestReviewID: id("review", g.repo, number, comment), ID: i, NodeID: nodeID("PRRC_kwDO", i),
		DiffHunk: "@@ -10,6 +10,8 @@ func main() {", Path: "main.go", CommitID: p.PullRequest.Head.SHA,
		OriginalCommitID: p.PullRequest.Head.SHA, User: g.user(sender), Body: comment, CreatedAt: updated, UpdatedAt: updated,
		HTMLURL: fmt.Sprintf("%s#discussion_r%d", p.PullRequest.HTMLURL, i), PullRequestURL: p.PullRequest.URL,
		AuthorAssociation: "MEMBER", Reactions: g.reactions(u), Line: 12, OriginalLine: 12, Side: "RIGHT",
		OriginalPosition: 3, Position: 3, SubjectType: "line",
	}
	return encode(p)
}

// GitHubReview is the body of a pull_request_review event, action
// submitted: sender reviewed pull request number with state (approved,
// changes_requested, commented) and the review's body review ("" is a
// review without one: GitHub sends null).
func GitHubReview(repo, webURL string, number int, title, body, state, review, sender string) []byte {
	g := newGH(repo, webURL)
	p := g.envelope("submitted", sender)
	p.PullRequest = g.pull(number, title, body, "octo-author", nil, false)
	i := id("review", g.repo, number, state, review)
	r := &ghReview{
		ID: i, NodeID: nodeID("PRR_kwDO", i), User: g.user(sender), Body: nullable(review),
		CommitID: p.PullRequest.Head.SHA, SubmittedAt: updated, State: state,
		HTMLURL: fmt.Sprintf("%s#pullrequestreview-%d", p.PullRequest.HTMLURL, i), PullRequestURL: p.PullRequest.URL,
		AuthorAssociation: "MEMBER",
	}
	r.Links.HTML.Href, r.Links.PullRequest.Href = r.HTMLURL, r.PullRequestURL
	p.Review = r
	return encode(p)
}

// GitHubPing is the body of the ping event GitHub sends a GitHub App's
// webhook when it is set up.
func GitHubPing() []byte {
	hook := id("hook")
	return encode(map[string]any{
		"zen":     "Keep it logically awesome.",
		"hook_id": hook,
		"hook": map[string]any{
			"type": "App", "id": hook, "name": "web", "active": true,
			"events":     []string{"issue_comment", "issues", "pull_request", "pull_request_review", "pull_request_review_comment"},
			"config":     map[string]any{"content_type": "json", "insecure_ssl": "0", "url": "https://berth.example.com/hooks/github"},
			"updated_at": created, "created_at": created, "app_id": appID,
			"deliveries_url": "https://api.github.com/app/hook/deliveries",
		},
	})
}

// nullable is s, or JSON null for "" (GitHub's empty bodies).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nodeID is a GitHub-like global node id.
func nodeID(prefix string, i int64) string {
	const digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte(prefix)
	for n := uint64(i); len(b) < len(prefix)+10; n /= 62 {
		b = append(b, digits[n%62])
	}
	return string(b)
}
