package panel

import (
	"net/http"
	"strconv"
	"strings"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
)

// quota is one scope's guardrail: as written there, as in force (for a
// project: combined with its organisation's, restrict-only), and how many
// more sandboxes it admits.
type quota struct {
	Project   string // "" for the organisation
	Default   bool   // the default project, where members' sandboxes go
	Written   guardrail.Guardrail
	InForce   guardrail.Guardrail
	Live      int
	Left      int  // sandboxes it still admits
	Unlimited bool // no max_sandboxes binds
}

// quotasPage is the body of the quotas screen.
type quotasPage struct {
	Org    string
	Scopes []quota
	More   bool // the organisation has more than api.MaxLimit projects: the oldest are shown
}

func (p *Panel) quotas(w http.ResponseWriter, r *http.Request, c caller) {
	ctx := r.Context()
	org, err := p.accounts.Organisation(ctx, c.Principal, "")
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	og, err := p.accounts.Guardrail(ctx, c.Principal, org.ID, "")
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	projects, more, err := p.accounts.Projects(ctx, c.Principal, org.ID, paging.Request{Limit: api.MaxLimit})
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	var counts struct {
		Org      int
		Projects map[string]int
	}
	if p.driver != "" {
		n, err := p.sandboxes.LiveCounts(ctx, c.Principal, org.ID)
		if err != nil {
			p.fail(w, r, c, err)
			return
		}
		counts.Org, counts.Projects = n.Org, n.Projects
	}
	top := quota{Written: og, InForce: og, Live: counts.Org}
	top.Left, top.Unlimited = left(og.MaxSandboxes, counts.Org)
	body := quotasPage{Org: org.Name, Scopes: []quota{top}, More: more != nil}
	for i, prj := range projects {
		pg, err := p.accounts.Guardrail(ctx, c.Principal, org.ID, prj.ID)
		if err != nil {
			p.fail(w, r, c, err)
			return
		}
		q := quota{Project: prj.Name, Default: i == 0, Written: pg, InForce: guardrail.Combine(og, pg), Live: counts.Projects[prj.ID]}
		// A create is checked against the organisation's count and the
		// project's: what is left is the smaller.
		q.Left, q.Unlimited = left(q.InForce.MaxSandboxes, q.Live)
		if !top.Unlimited && (q.Unlimited || top.Left < q.Left) {
			q.Left, q.Unlimited = top.Left, false
		}
		body.Scopes = append(body.Scopes, q)
	}
	p.render(w, r, http.StatusOK, "quotas", p.view(c, r, "Quotas", "quotas", body))
}

func left(limit *int, live int) (int, bool) {
	if limit == nil {
		return 0, true
	}
	return max(*limit-live, 0), false
}

// guardrailForm is the body of the guardrail editor: the ceilings as
// typed ("" is no limit); allowed_repos is not edited here and is kept.
type guardrailForm struct {
	Project                        string
	MaxSandboxes, Memory, CPU, TTL string
	Repos                          string // as kept, in words
	problem
}

func guardrailFormOf(project string, g guardrail.Guardrail) guardrailForm {
	f := guardrailForm{Project: project, Repos: repos(g.AllowedRepos)}
	if g.MaxSandboxes != nil {
		f.MaxSandboxes = strconv.Itoa(*g.MaxSandboxes)
	}
	if g.MaxSandboxMemory != nil {
		f.Memory = quantity.FormatMiB(*g.MaxSandboxMemory)
	}
	if g.MaxSandboxCPU != nil {
		f.CPU = g.MaxSandboxCPU.String()
	}
	if g.MaxSandboxTTL != nil {
		f.TTL = quantity.FormatDuration(*g.MaxSandboxTTL)
	}
	return f
}

// repos words an allowed_repos list.
func repos(list []string) string {
	switch {
	case list == nil:
		return "not set"
	case len(list) == 0:
		return "none"
	}
	return strings.Join(list, ", ")
}

func (p *Panel) editGuardrail(w http.ResponseWriter, r *http.Request, c caller) {
	project := r.URL.Query().Get("project")
	g, err := p.accounts.Guardrail(r.Context(), c.Principal, "", project)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	p.renderGuardrail(w, r, c, http.StatusOK, guardrailFormOf(project, g))
}

func (p *Panel) renderGuardrail(w http.ResponseWriter, r *http.Request, c caller, status int, f guardrailForm) {
	title := "Organisation quotas"
	if f.Project != "" {
		title = "Quotas of project " + f.Project
	}
	p.render(w, r, status, "guardrail", p.view(c, r, title, "quotas", f))
}

// saveGuardrail writes the guardrail whole (SPEC S7): it is read again
// now, the fields the form shows are replaced, and every other field
// (allowed_repos) is written back as it is.
func (p *Panel) saveGuardrail(w http.ResponseWriter, r *http.Request, c caller) {
	ctx, v := r.Context(), r.PostForm
	project := v.Get("project")
	g, err := p.accounts.Guardrail(ctx, c.Principal, "", project)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	f := guardrailForm{Project: project, MaxSandboxes: strings.TrimSpace(v.Get("max_sandboxes")),
		Memory: strings.TrimSpace(v.Get("max_sandbox_memory")), CPU: strings.TrimSpace(v.Get("max_sandbox_cpu")),
		TTL: strings.TrimSpace(v.Get("max_sandbox_ttl")), Repos: repos(g.AllowedRepos)}
	err = f.apply(&g)
	if err == nil {
		err = p.accounts.SetGuardrail(ctx, c.Principal, "", project, g)
	}
	if err != nil {
		status, body := p.status(w, r, err)
		f.refuse(body)
		p.renderGuardrail(w, r, c, status, f)
		return
	}
	redirect(w, r, "/quotas", "Saved the quotas: "+g.String()+".")
}

// apply parses the form's ceilings into g; empty clears a limit.
func (f guardrailForm) apply(g *guardrail.Guardrail) error {
	g.MaxSandboxes, g.MaxSandboxMemory, g.MaxSandboxCPU, g.MaxSandboxTTL = nil, nil, nil, nil
	if f.MaxSandboxes != "" {
		n, err := strconv.Atoi(f.MaxSandboxes)
		if err != nil {
			return fault.Field("max_sandboxes", "%q is not a whole number", f.MaxSandboxes)
		}
		g.MaxSandboxes = &n
	}
	if f.Memory != "" {
		n, err := quantity.ParseMiB(f.Memory)
		if err != nil {
			return fault.Field("max_sandbox_memory", "%v", err)
		}
		g.MaxSandboxMemory = &n
	}
	if f.CPU != "" {
		cpu, err := quantity.ParseCPU(f.CPU)
		if err != nil {
			return fault.Field("max_sandbox_cpu", "%v", err)
		}
		g.MaxSandboxCPU = &cpu
	}
	if f.TTL != "" {
		d, err := quantity.ParseDuration(f.TTL)
		if err != nil {
			return fault.Field("max_sandbox_ttl", "%v", err)
		}
		g.MaxSandboxTTL = &d
	}
	return nil
}
