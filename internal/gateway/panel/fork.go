package panel

import (
	"net/http"
	"strconv"
	"strings"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// fork copies a running sandbox into the forks the form asks for (SPEC
// S3, the isolated tier) and goes to the fork's page, or to the list when
// there are several. A refused name or count comes back beside its field;
// a name taken, a source no longer running or forks past the quota above
// the form, what was typed kept either way.
func (p *Panel) fork(w http.ResponseWriter, r *http.Request, c caller, ref string) {
	name, raw := strings.TrimSpace(r.PostForm.Get("name")), strings.TrimSpace(r.PostForm.Get("count"))
	refuse := func(err error) {
		p.refuseOnPage(w, r, c, ref, "fork", err, func(pg *sandboxPage) { pg.ForkName, pg.ForkCount = name, raw },
			fault.Conflict, fault.Exceeded)
	}
	count := 1
	if raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil {
			refuse(fault.Field("count", "%q is not a number: give one from 1 to %d", cut(16, raw), sandbox.MaxForks))
			return
		}
		// The API takes 0 for one fork; a form that says 0 asks for none.
		if n == 0 {
			refuse(fault.Field("count", "0 forks asked for; a fork makes 1 to %d", sandbox.MaxForks))
			return
		}
		count = n
	}
	forks, err := p.sandboxes.Fork(r.Context(), c.Principal, ref, sandbox.ForkRequest{Name: name, Count: count})
	if err != nil {
		refuse(err)
		return
	}
	if len(forks) == 1 {
		redirect(w, r, "/sandboxes/"+string(forks[0].ID), "Forked: "+forks[0].Name+" is starting from where its source was.")
		return
	}
	names := make([]string, len(forks))
	for i, sb := range forks {
		names[i] = sb.Name
	}
	redirect(w, r, "/sandboxes", "Forked: "+strings.Join(names, ", ")+" are starting from where their source was.")
}
