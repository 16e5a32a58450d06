package panel

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
)

// classList is the body of the classes screen.
type classList struct {
	Classes []class.Status
	File    string // a sandboxes file being applied, kept when refused
	Error   string
}

func (p *Panel) listClasses(w http.ResponseWriter, r *http.Request, c caller) {
	p.renderClasses(w, r, c, http.StatusOK, classList{})
}

func (p *Panel) renderClasses(w http.ResponseWriter, r *http.Request, c caller, status int, body classList) {
	classes, _, err := p.classes.List(r.Context(), c.Principal, "", paging.Request{Limit: class.MaxClasses})
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	body.Classes = classes
	p.render(w, r, status, "classes", p.view(c, r, "Classes", "classes", body))
}

// applyClasses applies a sandboxes file as `berth sandbox apply -f` does:
// all of it checked first, then every class it names written.
func (p *Panel) applyClasses(w http.ResponseWriter, r *http.Request, c caller) {
	file := r.PostForm.Get("file")
	res, err := p.classes.Apply(r.Context(), c.Principal, "", strings.NewReader(file))
	if err != nil {
		status, body := p.status(w, r, err)
		p.renderClasses(w, r, c, status, classList{File: file, Error: body.Message})
		return
	}
	redirect(w, r, "/classes", applied(res))
}

// applied says what an apply did.
func applied(res class.Applied) string {
	var parts []string
	if len(res.Created) > 0 {
		parts = append(parts, "created "+strings.Join(res.Created, ", "))
	}
	if len(res.Updated) > 0 {
		parts = append(parts, "saved "+strings.Join(res.Updated, ", "))
	}
	msg := "Nothing to apply."
	if len(parts) > 0 {
		msg = "Classes " + strings.Join(parts, "; ") + "."
	}
	for _, warn := range res.Warnings {
		msg += " Warning: " + warn + "."
	}
	return msg
}

// classForm is the body of the class editor: the fields it shows, as
// typed. The others (git, contract, setup_command, runner, ports, egress) are kept as they are,
// and shown in Kept.
type classForm struct {
	New                                                    bool
	Name, Description, Image, Isolation, CPU, Memory, Disk string
	DefaultTTL, MaxTTL, SessionIdle, Warm                  string
	Engineer, Agent                                        bool
	Kept                                                   []string
	Tiers                                                  []string
	problem
}

func formOf(s class.Spec) classForm {
	f := classForm{Name: s.Name, Description: s.Description, Image: s.Image, Isolation: s.Isolation, CPU: s.CPU,
		Memory: s.Memory, Disk: s.Disk, DefaultTTL: s.DefaultTTL, MaxTTL: s.MaxTTL, SessionIdle: s.SessionIdle, Warm: strconv.Itoa(s.Warm),
		Engineer: len(s.Purposes) == 0 || slices.Contains(s.Purposes, "engineer"),
		Agent:    len(s.Purposes) == 0 || slices.Contains(s.Purposes, "agent")}
	f.Kept = kept(s)
	return f
}

// kept words the fields the editor does not show.
func kept(s class.Spec) []string {
	out := []string{"git: " + s.Git, "contract: " + s.Contract}
	if len(s.SetupCommand) > 0 {
		out = append(out, "setup_command: "+strings.Join(s.SetupCommand, " "))
	}
	if s.Runner != "" {
		out = append(out, "runner: "+s.Runner)
	}
	if len(s.Ports) > 0 {
		ps := make([]string, len(s.Ports))
		for i, p := range s.Ports {
			ps[i] = strconv.Itoa(p)
		}
		out = append(out, "ports: "+strings.Join(ps, ", "))
	}
	if len(s.Egress) > 0 {
		out = append(out, "egress: "+strings.Join(s.Egress, ", "))
	}
	return out
}

// class finds one of the caller's organisation's classes.
func (p *Panel) class(r *http.Request, c caller, name string) (class.Spec, error) {
	classes, _, err := p.classes.List(r.Context(), c.Principal, "", paging.Request{Limit: class.MaxClasses})
	if err != nil {
		return class.Spec{}, err
	}
	for _, cl := range classes {
		if cl.Name == name {
			return cl.Spec(), nil
		}
	}
	return class.Spec{}, fault.Errorf(fault.NotFound, "class %s", name)
}

func (p *Panel) newClass(w http.ResponseWriter, r *http.Request, c caller) {
	f := formOf(class.Class{Isolation: class.DefaultIsolation, CPU: class.DefaultCPU, Memory: class.DefaultMemory,
		DefaultTTL: class.DefaultTTL, MaxTTL: class.DefaultMaxTTL}.Spec())
	f.New, f.Kept = true, nil
	p.renderClass(w, r, c, http.StatusOK, f)
}

func (p *Panel) editClass(w http.ResponseWriter, r *http.Request, c caller) {
	s, err := p.class(r, c, r.PathValue("name"))
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	p.renderClass(w, r, c, http.StatusOK, formOf(s))
}

func (p *Panel) renderClass(w http.ResponseWriter, r *http.Request, c caller, status int, f classForm) {
	f.Tiers = []string{string(class.TierStandard), string(class.TierIsolated), string(class.TierVM)}
	title := "Class " + f.Name
	if f.New {
		title = "New class"
	}
	p.render(w, r, status, "class", p.view(c, r, title, "classes", f))
}

// saveClass writes one class through the class service's Apply, so it is
// checked as `berth sandbox apply` checks a file. An edit starts from the
// class as it is now, so the fields the form does not show keep their
// values.
func (p *Panel) saveClass(w http.ResponseWriter, r *http.Request, c caller) {
	v := r.PostForm
	name := r.PathValue("name")
	spec := class.Spec{Name: strings.TrimSpace(v.Get("name"))}
	if name != "" {
		current, err := p.class(r, c, name)
		if err != nil {
			p.fail(w, r, c, err)
			return
		}
		spec = current
	}
	spec.Description, spec.Image, spec.Isolation = strings.TrimSpace(v.Get("description")), strings.TrimSpace(v.Get("image")), v.Get("isolation")
	spec.CPU, spec.Memory, spec.Disk = strings.TrimSpace(v.Get("cpu")), strings.TrimSpace(v.Get("memory")), strings.TrimSpace(v.Get("disk"))
	spec.DefaultTTL, spec.MaxTTL = strings.TrimSpace(v.Get("default_ttl")), strings.TrimSpace(v.Get("max_ttl"))
	spec.SessionIdle = strings.TrimSpace(v.Get("session_idle"))
	f := formOf(spec)
	f.New, f.Warm = name == "", strings.TrimSpace(v.Get("warm"))
	f.Engineer, f.Agent = v.Get("engineer") != "", v.Get("agent") != ""
	if f.New {
		f.Kept = nil
	}
	refuse := func(field, msg string) {
		f.Error, f.Field = msg, field
		p.renderClass(w, r, c, http.StatusBadRequest, f)
	}
	warm, err := strconv.Atoi(cmp.Or(f.Warm, "0"))
	if err != nil {
		refuse("warm", fmt.Sprintf("warm: %q is not a whole number", f.Warm))
		return
	}
	spec.Warm = warm
	switch {
	case f.Engineer && f.Agent:
		spec.Purposes = nil
	case f.Engineer:
		spec.Purposes = []string{"engineer"}
	case f.Agent:
		spec.Purposes = []string{"agent"}
	default:
		refuse("purposes", "purposes: choose engineer, agent or both")
		return
	}
	doc, err := json.Marshal(map[string][]class.Spec{"sandboxes": {spec}})
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	res, err := p.classes.Apply(r.Context(), c.Principal, "", bytes.NewReader(doc))
	if err != nil {
		status, body := p.status(w, r, err)
		f.refuse(body)
		p.renderClass(w, r, c, status, f)
		return
	}
	redirect(w, r, "/classes", applied(res))
}

func (p *Panel) deleteClass(w http.ResponseWriter, r *http.Request, c caller) {
	name := r.PathValue("name")
	if err := p.classes.Delete(r.Context(), c.Principal, "", name); err != nil {
		p.fail(w, r, c, err)
		return
	}
	redirect(w, r, "/classes", "Deleted class "+name+". Sandboxes made from it keep their own copy of it.")
}
