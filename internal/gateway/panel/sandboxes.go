package panel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/openssh"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/transcript"
)

// sandboxRow is a sandbox as the screens show it.
type sandboxRow struct {
	sandbox.Sandbox
	OwnerName   string
	ProjectName string
	Running     time.Duration
	Actions     []string // what its state allows: suspend, resume, extend, terminate
}

// actions lists what S3 and S6 let anybody who may manage sb do in its
// state: a hint for which buttons to show. The service decides.
func actions(sb sandbox.Sandbox) []string {
	var out []string
	agent := sb.Purpose == sandbox.PurposeAgent // S6: never suspended or resumed
	switch sb.State {
	case sandbox.StateRunning:
		if !agent {
			out = append(out, "suspend")
		}
		out = append(out, "extend")
	case sandbox.StateStarting:
		out = append(out, "extend")
	case sandbox.StateSuspended:
		out = append(out, "resume", "extend")
	case sandbox.StateExpired:
		if !agent {
			out = append(out, "resume")
		}
	}
	if sb.State != sandbox.StateTerminated {
		out = append(out, "terminate")
	}
	return out
}

// rows converts sandboxes, looking each owner's and project's name up
// once.
func (p *Panel) rows(ctx context.Context, sbs []sandbox.Sandbox) []sandboxRow {
	names, projects := map[string]string{}, map[string]string{}
	out := make([]sandboxRow, len(sbs))
	for i, sb := range sbs {
		name, ok := names[sb.Owner]
		if !ok {
			name = sb.Owner
			if u, err := p.sandboxes.Owner(ctx, sb); err == nil {
				name = u.Name
			}
			names[sb.Owner] = name
		}
		prj, ok := projects[sb.Project]
		if !ok {
			prj = sb.Project
			if pr, err := p.accounts.Project(ctx, sb.Org, sb.Project); err == nil {
				prj = pr.Name
			}
			projects[sb.Project] = prj
		}
		out[i] = sandboxRow{Sandbox: sb, OwnerName: name, ProjectName: prj, Running: p.sandboxes.RunningTime(sb), Actions: actions(sb)}
	}
	return out
}

// sandboxPage is the body of one sandbox's page.
type sandboxPage struct {
	Row sandboxRow
	// Run is an agent sandbox's run; nil for an engineer's or before its
	// run is recorded. CostKnown is false when neither the CLI nor a price
	// says its cost.
	Run       *agentrun.Run
	CostKnown bool
	// Transcript is the run's log for people (package transcript, as the
	// CLI shows it): its last shownEvents events, then its totals;
	// Earlier counts those left out. HasLog is false before the log starts.
	Transcript []transcript.Event
	Earlier    int
	HasLog     bool
	// Change is what the run pushed, against where it started.
	Change *agentrun.Change
	// SSH are the commands that open a shell in it, for those who may
	// (S6): Config writes the ssh host Host (berth-NAME) that ssh and
	// editors use, VSCode opens it in VS Code's Remote-SSH.
	SSH, Config, Host, VSCode string
	// NoShell says why the caller is shown no command.
	NoShell string
	// Terminal is where the page's terminal connects; "" offers none.
	Terminal string
	// Preview offers the form that opens a port in the browser.
	Preview bool
	// Engineer sandboxes' connections through the gateway's tunnel now,
	// and when one last opened (zero: never).
	Connections  int
	LastActivity time.Time
	// Fork offers the form that forks it: the caller may (its owner or an
	// operator), it runs, and its runtime can save its memory.
	Fork bool
	// The extend, preview and fork forms, as typed; Form names the one
	// refused.
	TTL, Port, ForkName, ForkCount, Form string
	// Shorten asks to confirm an extend that would make the sandbox
	// expire earlier than it does now, at NewExpiry.
	Shorten   bool
	NewExpiry time.Time
	problem
}

func (p *Panel) showSandbox(w http.ResponseWriter, r *http.Request, c caller) {
	sb, err := p.sandboxes.Get(r.Context(), c.Principal, r.PathValue("ref"))
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	p.renderSandbox(w, r, c, http.StatusOK, p.sandboxBody(r, c, sb))
}

// sandboxBody is what sb's page shows the caller.
func (p *Panel) sandboxBody(r *http.Request, c caller, sb sandbox.Sandbox) sandboxPage {
	ctx := r.Context()
	body := sandboxPage{Row: p.rows(ctx, []sandbox.Sandbox{sb})[0]}
	if sb.Purpose == sandbox.PurposeEngineer {
		body.Connections, body.LastActivity = p.sandboxes.Activity(sb)
	}
	switch {
	case sb.Purpose == sandbox.PurposeAgent:
		if run, err := p.runs.Of(ctx, sb); err == nil {
			body.Run, body.CostKnown = &run, run.Telemetry.Cost != runner.CostUnknown
		} else if !errors.Is(err, fault.NotFound) {
			p.log.WarnContext(ctx, "panel: could not read a sandbox's run", "sandbox", sb.ID, "err", err)
		}
		body.Transcript, body.Earlier, body.HasLog = p.transcript(ctx, c, sb, body.Run)
		if body.Run != nil && body.Run.Commit != "" {
			if ch, _, err := p.runs.Diff(ctx, c.Principal, string(sb.ID)); err == nil {
				ch.Diff, ch.Cut = clipDiff(ch.Diff, ch.Cut)
				body.Change = &ch
			} else {
				p.log.WarnContext(ctx, "panel: could not read a run's diff", "sandbox", sb.ID, "err", err)
			}
		}
	case c.CanShell(sb.Owner):
		body.Preview = p.previews != nil && sb.State == sandbox.StateRunning
		body.Fork = sb.State == sandbox.StateRunning && p.sandboxes.ForkKind(sb) == ""
		ref := sb.Name
		if sb.Owner != c.User.ID {
			ref = string(sb.ID) // another's name may be ambiguous for the caller
		}
		// As berth sandbox config writes it: the host is berth-NAME, the
		// image's user is berth, whose home is /home/berth.
		body.SSH, body.Config, body.Host = "berth sandbox ssh "+ref, "berth sandbox config "+ref, openssh.HostAlias(sb.Name)
		body.VSCode = "vscode://vscode-remote/ssh-remote+" + body.Host + "/home/" + openssh.User
		if p.canTerminal(c, sb) {
			body.Terminal = "/sandboxes/" + string(sb.ID) + "/terminal"
		}
	default:
		body.NoShell = "Only its owner (or an operator) may open a shell in it: administrators manage sandboxes but do not get inside them."
	}
	return body
}

func (p *Panel) renderSandbox(w http.ResponseWriter, r *http.Request, c caller, status int, body sandboxPage) {
	if body.Terminal != "" {
		w.Header().Set("Content-Security-Policy", terminalPolicy)
	}
	p.render(w, r, status, "sandbox", p.view(c, r, body.Row.Name, "sandboxes", body))
}

// refuseOnPage answers a refused form of sb's page (extend, preview,
// fork) with the page again, the message beside the field (or above the
// form when it names none), what was typed kept. An error that is not the
// input's, nor of a kind in also, is the error page.
func (p *Panel) refuseOnPage(w http.ResponseWriter, r *http.Request, c caller, ref, form string, err error, body func(*sandboxPage), also ...fault.Kind) {
	if k := fault.Of(err); k != fault.Invalid && !slices.Contains(also, k) {
		p.fail(w, r, c, err)
		return
	}
	sb, gerr := p.sandboxes.Get(r.Context(), c.Principal, ref)
	if gerr != nil {
		p.fail(w, r, c, gerr)
		return
	}
	page := p.sandboxBody(r, c, sb)
	page.Form = form
	status, answer := p.status(w, r, err)
	page.refuse(answer)
	body(&page)
	p.renderSandbox(w, r, c, status, page)
}

// shownEvents is how much of a run's transcript its page shows; the
// whole log is a link away. diffShown bounds the diff shown.
const (
	shownEvents = 300
	diffShown   = 64 << 10
)

// transcript reads a run's log into its transcript: the last shownEvents
// events and the totals, and how many came before them.
func (p *Panel) transcript(ctx context.Context, c caller, sb sandbox.Sandbox, run *agentrun.Run) (evs []transcript.Event, earlier int, ok bool) {
	f, _, err := p.runs.Log(ctx, c.Principal, string(sb.ID))
	if err != nil {
		if !errors.Is(err, fault.NotFound) {
			p.log.WarnContext(ctx, "panel: could not open a run log", "sandbox", sb.ID, "err", err)
		}
		return nil, 0, false
	}
	defer f.Close()
	name := ""
	if run != nil {
		name = run.Runner
	}
	err = transcript.Read(f, name, func(e transcript.Event) error {
		evs = append(evs, e)
		if len(evs) > shownEvents+1 {
			evs, earlier = append(evs[:0], evs[1:]...), earlier+1
		}
		return nil
	})
	if err != nil {
		p.log.WarnContext(ctx, "panel: could not read a run log", "sandbox", sb.ID, "err", err)
	}
	return evs, earlier, true
}

// clipDiff cuts a diff to what the page shows.
func clipDiff(d string, cut bool) (string, bool) {
	if len(d) <= diffShown {
		return d, cut
	}
	d = d[:diffShown]
	if i := strings.LastIndexByte(d, '\n'); i > 0 {
		d = d[:i+1]
	}
	return d, true
}

// runLog answers a run's whole log as text, as the API does: the agent's
// output is not ours, so a browser must not take it for anything else.
func (p *Panel) runLog(w http.ResponseWriter, r *http.Request, c caller) {
	f, _, err := p.runs.Log(r.Context(), c.Principal, r.PathValue("ref"))
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.Copy(w, f)
}

// act does what a sandbox's button or form asks: suspend, resume, extend
// or terminate it, then back to the page the button was on; or preview a
// port of it, or fork it.
func (p *Panel) act(w http.ResponseWriter, r *http.Request, c caller) {
	ctx, ref := r.Context(), r.PathValue("ref")
	var (
		sb   sandbox.Sandbox
		err  error
		done string
	)
	switch r.PathValue("action") {
	case "suspend":
		sb, err = p.sandboxes.Suspend(ctx, c.Principal, ref)
		done = "Suspended %s."
	case "resume":
		sb, err = p.sandboxes.Resume(ctx, c.Principal, ref)
		done = "Resumed %s: it is starting."
	case "extend":
		p.extend(w, r, c, ref)
		return
	case "terminate":
		sb, err = p.sandboxes.Terminate(ctx, c.Principal, ref)
		done = "Terminated %s."
	case "preview":
		p.preview(w, r, c, ref)
		return
	case "fork":
		p.fork(w, r, c, ref)
		return
	default:
		p.plainError(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
		return
	}
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	msg := fmt.Sprintf(done, sb.Name)
	redirect(w, r, cmp.Or(localPath(r.PostForm.Get("back")), "/sandboxes/"+string(sb.ID)), msg)
}

// previewPage is the body of the page a preview form answers: a link to
// the preview's own origin. Not a redirect: the panel's forms may not
// lead to another origin (its form-action policy).
type previewPage struct {
	Sandbox string // its name
	Back    string // its page
	Port    int
	URL     string
}

// preview asks for an HTTP preview of the port the form names and
// answers its link.
func (p *Panel) preview(w http.ResponseWriter, r *http.Request, c caller, ref string) {
	if p.previews == nil {
		p.plainError(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
		return
	}
	raw := strings.TrimSpace(r.PostForm.Get("port"))
	refuse := func(err error) {
		p.refuseOnPage(w, r, c, ref, "preview", err, func(pg *sandboxPage) { pg.Port = raw })
	}
	port, err := strconv.Atoi(raw)
	if err != nil {
		refuse(fault.Field("port", "%q is not a port number: give one from 1024 to 65535", cut(16, raw)))
		return
	}
	pv, err := p.previews.Preview(r, c.Principal, ref, port)
	if err != nil {
		refuse(err)
		return
	}
	sb, err := p.sandboxes.Get(r.Context(), c.Principal, ref)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	p.render(w, r, http.StatusOK, "preview", p.view(c, r, "Preview of "+sb.Name, "sandboxes",
		previewPage{Sandbox: sb.Name, Back: "/sandboxes/" + string(sb.ID), Port: port, URL: pv.URL}))
}

// createForm is the body of the create form, with what was typed.
type createForm struct {
	Name, Purpose, Class, TTL, SSHKeys, Repo, Branch, Task, Runner, Role, Project string

	Classes  []class.Status
	Projects []account.Project // for administrators, who may choose one
	Runners  []string
	problem
}

func (p *Panel) newSandbox(w http.ResponseWriter, r *http.Request, c caller) {
	f := createForm{Purpose: string(sandbox.PurposeEngineer), SSHKeys: p.lastSSHKeys(r.Context(), c)}
	p.renderCreate(w, r, c, http.StatusOK, f)
}

// lastSSHKeys offers the keys of the caller's newest sandbox that has any,
// among the newest api.MaxLimit engineer sandboxes they see: a browser
// cannot read ~/.ssh as the CLI does.
func (p *Panel) lastSSHKeys(ctx context.Context, c caller) string {
	sbs, _, err := p.sandboxes.List(ctx, c.Principal, sandbox.ListOptions{All: true, Purpose: string(sandbox.PurposeEngineer),
		Page: paging.Request{Limit: api.MaxLimit}})
	if err != nil {
		return ""
	}
	var newest sandbox.Sandbox
	for _, sb := range sbs {
		if sb.Owner == c.User.ID && len(sb.SSHKeys) > 0 && sb.CreatedAt.After(newest.CreatedAt) {
			newest = sb
		}
	}
	return strings.Join(newest.SSHKeys, "\n")
}

func (p *Panel) renderCreate(w http.ResponseWriter, r *http.Request, c caller, status int, f createForm) {
	ctx := r.Context()
	classes, _, err := p.classes.List(ctx, c.Principal, "", paging.Request{Limit: class.MaxClasses})
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	f.Classes, f.Runners = classes, runner.Names()
	if f.Class == "" {
		for _, cl := range classes {
			if cl.Startable && cl.Allows(sandbox.Purpose(f.Purpose)) {
				f.Class = cl.Name
				break
			}
		}
	}
	if c.IsAdminOf(c.User.Org) {
		if f.Projects, _, err = p.accounts.Projects(ctx, c.Principal, "", paging.Request{Limit: api.MaxLimit}); err != nil {
			p.fail(w, r, c, err)
			return
		}
	}
	p.render(w, r, status, "create", p.view(c, r, "New sandbox", "sandboxes", f))
}

func (p *Panel) createSandbox(w http.ResponseWriter, r *http.Request, c caller) {
	v := r.PostForm
	f := createForm{Name: strings.TrimSpace(v.Get("name")), Purpose: v.Get("purpose"), Class: v.Get("class"),
		TTL: strings.TrimSpace(v.Get("ttl")), SSHKeys: v.Get("ssh_keys"), Repo: strings.TrimSpace(v.Get("repo")),
		Branch: strings.TrimSpace(v.Get("branch")), Task: v.Get("task"), Runner: v.Get("runner"), Role: v.Get("role"),
		Project: v.Get("project")}
	req := sandbox.CreateRequest{Name: f.Name, Class: f.Class, Purpose: f.Purpose, Project: f.Project, TTL: f.TTL,
		Repo: f.Repo, Branch: f.Branch, Task: f.Task, Runner: f.Runner, Role: f.Role}
	if f.Purpose != string(sandbox.PurposeAgent) {
		// The agent's fields are on the form for anybody without script to
		// hide them; an engineer sandbox takes none of them.
		req.Task, req.Runner, req.Role = "", "", ""
		for line := range strings.Lines(f.SSHKeys) {
			if k := strings.TrimSpace(line); k != "" {
				req.SSHKeys = append(req.SSHKeys, k)
			}
		}
	}
	sb, err := p.sandboxes.Create(r.Context(), c.Principal, req)
	if err != nil {
		status, body := p.status(w, r, err)
		f.refuse(body)
		p.renderCreate(w, r, c, status, f)
		return
	}
	redirect(w, r, "/sandboxes/"+string(sb.ID), "Created "+sb.Name+": it is starting.")
}
