package panel

import (
	"net/http"
	"net/url"
	"slices"
	"unicode/utf8"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

// The sandboxes screen's filters are query parameters, so a filtered list
// is a link and works without script. Each is bounded: longer is refused
// (400, naming the field and the limit), not cut.
const (
	maxSearch      = 100 // runes of q
	maxFilterValue = 64  // bytes of class or owner
)

// listFilters are the sandboxes screen's filters as typed.
type listFilters struct {
	Q, State, Purpose, Class, Owner string
	All                             bool // ended sandboxes too
}

// states and purposes the filters offer.
var (
	filterStates   = []string{"starting", "running", "suspended", "expired", "failed", "terminated"}
	filterPurposes = []string{string(sandbox.PurposeEngineer), string(sandbox.PurposeAgent)}
)

func filtersOf(q url.Values) listFilters {
	return listFilters{Q: q.Get("q"), State: q.Get("state"), Purpose: q.Get("purpose"), Class: q.Get("class"),
		Owner: q.Get("owner"), All: q.Get("all") == "1"}
}

// values are the filters as a cursor or a link carries them: only those set.
func (f listFilters) values() map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{"q": f.Q, "state": f.State, "purpose": f.Purpose, "class": f.Class, "owner": f.Owner} {
		if v != "" {
			m[k] = v
		}
	}
	if f.All {
		m["all"] = "1"
	}
	return m
}

// Any reports whether a filter other than "ended ones too" is set.
func (f listFilters) Any() bool {
	return f.Q != "" || f.State != "" || f.Purpose != "" || f.Class != "" || f.Owner != ""
}

// check refuses a filter out of bounds, naming it.
func (f listFilters) check() error {
	switch {
	case utf8.RuneCountInString(f.Q) > maxSearch:
		return fault.Field("q", "a search is at most %d characters", maxSearch)
	case f.State != "" && !slices.Contains(filterStates, f.State):
		return fault.Field("state", "%q is not a state (starting, running, suspended, expired, failed or terminated)", cutFilter(f.State))
	case f.Purpose != "" && !slices.Contains(filterPurposes, f.Purpose):
		return fault.Field("purpose", "%q is not a purpose (engineer or agent)", cutFilter(f.Purpose))
	case len(f.Class) > maxFilterValue:
		return fault.Field("class", "a class name is at most %d characters", maxFilterValue)
	case len(f.Owner) > maxFilterValue:
		return fault.Field("owner", "a user name is at most %d characters", maxFilterValue)
	}
	return nil
}

func cutFilter(s string) string { return cut(maxFilterValue, s) }

// sandboxList is the body of the sandboxes screen: one page of the list.
type sandboxList struct {
	Rows      []sandboxRow
	Filters   listFilters
	ShowOwner bool // the caller sees others' sandboxes
	// What the filters offer: the states, purposes, the classes of the
	// caller's organisation and, for an administrator, its users.
	States, Purposes, Classes []string
	Owners                    []account.User
	// Later is true past the first page; More is the next page's path,
	// "" on the last.
	Later bool
	More  string
	problem
}

// panelSandboxes names the sandboxes screen's list in its cursors.
const panelSandboxes = "panel sandboxes"

// listSandboxes shows a page of api.DefaultLimit sandboxes, newest first,
// with a link to the next: the cursor (package paging) carries the
// filters, sealed under the session's key as the API's are.
func (p *Panel) listSandboxes(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	f := filtersOf(q)
	pg := paging.Request{Limit: api.DefaultLimit}
	body := sandboxList{ShowOwner: c.IsAdminOf(c.User.Org), States: filterStates, Purposes: filterPurposes}
	if s := q.Get("cursor"); s != "" {
		cur, err := openCursor(c, s, panelSandboxes)
		if err != nil {
			p.fail(w, r, c, err)
			return
		}
		v := url.Values{}
		for k, x := range cur.Filters {
			v.Set(k, x)
		}
		f, pg.After = filtersOf(v), &cur.After
	}
	body.Filters = f
	p.choices(r, c, &body)
	opt := sandbox.ListOptions{All: f.All, State: sandbox.State(f.State), Purpose: f.Purpose, Class: f.Class, Search: f.Q, Page: pg}
	err := f.check()
	if err == nil && f.Owner != "" {
		opt.Owner, err = p.ownerID(r, c, f.Owner)
	}
	status := http.StatusOK
	if err == nil {
		var (
			sbs  []sandbox.Sandbox
			next *paging.Key
		)
		sbs, next, err = p.sandboxes.List(r.Context(), c.Principal, opt)
		if err == nil {
			body.Rows, body.Later = p.rows(r.Context(), sbs), pg.After != nil
			if next != nil {
				body.More = "/sandboxes?cursor=" + url.QueryEscape(paging.Seal(c.sess.key.Reveal(),
					paging.Cursor{List: panelSandboxes, Filters: f.values(), After: *next}))
			}
		}
	}
	if err != nil {
		var ok bool
		if status, ok = p.refused(w, r, c, err, &body.problem); !ok {
			return
		}
	}
	p.render(w, r, status, "sandboxes", p.view(c, r, "Sandboxes", "sandboxes", body))
}

// openCursor opens a cursor of one of the panel's lists, sealed under
// the session's key; one altered, of another sign-in or of another list
// is refused on field cursor.
func openCursor(c caller, s, list string) (paging.Cursor, error) {
	cur, err := paging.Open(c.sess.key.Reveal(), s)
	if err == nil && cur.List != list {
		err = paging.ErrBadCursor
	}
	if err != nil {
		return paging.Cursor{}, fault.Field("cursor", "%v; start again from the first page", err)
	}
	return cur, nil
}

// choices fills what the filters offer; what cannot be read is left out
// (the filters still take typed values).
func (p *Panel) choices(r *http.Request, c caller, body *sandboxList) {
	ctx := r.Context()
	if classes, _, err := p.classes.List(ctx, c.Principal, "", paging.Request{Limit: api.MaxLimit}); err == nil {
		for _, cl := range classes {
			body.Classes = append(body.Classes, cl.Name)
		}
	}
	if body.ShowOwner {
		if users, _, err := p.accounts.Users(ctx, c.Principal, "", paging.Request{Limit: api.MaxLimit}); err == nil {
			body.Owners = users
		}
	}
}

// ownerID finds the user the owner filter names in the caller's
// organisation; one they may not see is not found, naming the field.
func (p *Panel) ownerID(r *http.Request, c caller, name string) (string, error) {
	if name == c.User.Name {
		return c.User.ID, nil
	}
	if !c.IsAdminOf(c.User.Org) {
		return "", fault.Field("owner", "you see your own sandboxes only")
	}
	users, _, err := p.accounts.Users(r.Context(), c.Principal, "", paging.Request{Limit: api.MaxLimit})
	if err != nil {
		return "", err
	}
	for _, u := range users {
		if u.Name == name || u.ID == name {
			return u.ID, nil
		}
	}
	return "", fault.Field("owner", "%s is not a user of your organisation", cutFilter(name))
}
