package panel

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/usage"
)

// The screens for administrators: the audit log, the organisation's
// users, and a user's keys. A screen the caller's role may not see is not
// there for them (404), as the API answers for what a caller may not see.

// auditLimit is how many events a page of the audit screen shows.
const auditLimit = 50

// panelAudit names the audit screen's list in its cursors.
const panelAudit = "panel audit"

// auditPage is the body of the audit screen: one page, newest first.
type auditPage struct {
	Events  []usage.Entry
	Since   string
	Sinces  []string
	AllOrgs bool // an operator's: every organisation's events
	Later   bool
	More    string
	Sandbox string
	problem
}

// notThere is the panel's answer for a page the caller may not see.
func (p *Panel) notThere(w http.ResponseWriter, r *http.Request) {
	p.plainError(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
}

func (p *Panel) auditLog(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	body := auditPage{Since: q.Get("since"), Sandbox: q.Get("sandbox"), Sinces: []string{"1h", "24h", "7d", "30d", "90d"}, AllOrgs: c.IsOperator()}
	pg := paging.Request{Limit: auditLimit}
	if s := q.Get("cursor"); s != "" {
		cur, err := openCursor(c, s, panelAudit)
		if err != nil {
			p.fail(w, r, c, err)
			return
		}
		body.Since, body.Sandbox, pg.After = cur.Filters["since"], cur.Filters["sandbox"], &cur.After
	}
	if body.Since == "" {
		body.Since = "24h"
	}
	status := http.StatusOK
	var err error
	if len(body.Since) > 16 {
		err = fault.Field("since", "a window is at most 16 characters, such as 24h or 30d")
	} else if len(body.Sandbox) > maxFilterValue {
		err = fault.Field("sandbox", "a sandbox name or id is at most %d characters", maxFilterValue)
	}
	if err == nil {
		var next *paging.Key
		body.Events, next, err = p.usage.Audit(r.Context(), c.Principal, usage.AuditQuery{Since: body.Since, Sandbox: body.Sandbox, Page: pg, Newest: true})
		if err == nil && next != nil {
			body.More = "/audit?cursor=" + url.QueryEscape(paging.Seal(c.sess.key.Reveal(), paging.Cursor{List: panelAudit,
				Filters: map[string]string{"since": body.Since, "sandbox": body.Sandbox}, After: *next}))
		}
		body.Later = pg.After != nil
	}
	switch {
	case errors.Is(err, fault.Forbidden):
		p.notThere(w, r) // a member's: the audit log is its administrators'
		return
	case err != nil:
		var ok bool
		if status, ok = p.refused(w, r, c, err, &body.problem); !ok {
			return
		}
	}
	if !slices.Contains(body.Sinces, body.Since) && body.Field != "since" {
		body.Sinces = append(body.Sinces, body.Since)
	}
	p.render(w, r, status, "audit", p.view(c, r, "Audit log", "audit", body))
}

// usersPage is the body of the users screen.
type usersPage struct {
	Users []account.User
	More  bool // more than api.MaxLimit: the oldest are shown
}

func (p *Panel) listUsers(w http.ResponseWriter, r *http.Request, c caller) {
	if !c.IsAdminOf(c.User.Org) {
		p.notThere(w, r)
		return
	}
	users, next, err := p.accounts.Users(r.Context(), c.Principal, "", paging.Request{Limit: api.MaxLimit})
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	p.render(w, r, http.StatusOK, "users", p.view(c, r, "Users", "users", usersPage{Users: users, More: next != nil}))
}

// userPage is the body of a user's page: their keys, and for the user
// themselves a form for a new one (whose secret NewSecret shows once).
type userPage struct {
	User      account.User
	Keys      []account.Key
	Self      bool // the caller's own page: may mint a key
	Name      string
	NewSecret string
	NewKey    string
	problem
}

// userPageOf reads the user ref names and their keys, as the caller may
// see them: a user whose keys they may not handle is not found.
func (p *Panel) userPageOf(r *http.Request, c caller) (userPage, error) {
	ref := r.PathValue("user")
	keys, _, err := p.accounts.Keys(r.Context(), c.Principal, ref, paging.Request{Limit: api.MaxLimit})
	if err != nil {
		return userPage{}, err
	}
	u := c.User
	if ref != c.User.ID && ref != c.User.Name {
		users, _, err := p.accounts.Users(r.Context(), c.Principal, "", paging.Request{Limit: api.MaxLimit})
		if err != nil {
			return userPage{}, err
		}
		found := false
		for _, x := range users {
			if x.ID == ref || x.Name == ref {
				u, found = x, true
			}
		}
		if !found {
			return userPage{}, fault.Errorf(fault.NotFound, "user %s", ref)
		}
	}
	return userPage{User: u, Keys: keys, Self: u.ID == c.User.ID}, nil
}

func (p *Panel) showUser(w http.ResponseWriter, r *http.Request, c caller) {
	body, err := p.userPageOf(r, c)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	p.render(w, r, http.StatusOK, "user", p.view(c, r, "User "+body.User.Name, p.userNav(c), body))
}

func (p *Panel) userNav(c caller) string {
	if c.IsAdminOf(c.User.Org) {
		return "users"
	}
	return ""
}

// createKey mints a key for the caller and shows its secret once.
func (p *Panel) createKey(w http.ResponseWriter, r *http.Request, c caller) {
	body, err := p.userPageOf(r, c)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	body.Name = strings.TrimSpace(r.PostForm.Get("name"))
	res, err := p.accounts.CreateKey(r.Context(), c.Principal, body.User.ID, body.Name)
	status := http.StatusOK
	if err != nil {
		var ok bool
		if status, ok = p.refused(w, r, c, err, &body.problem); !ok {
			return
		}
	} else {
		body.NewSecret, body.NewKey, body.Name = res.Secret.Reveal(), res.Key.ID, ""
		if body.Keys, _, err = p.accounts.Keys(r.Context(), c.Principal, body.User.ID, paging.Request{Limit: api.MaxLimit}); err != nil {
			p.fail(w, r, c, err)
			return
		}
	}
	p.render(w, r, status, "user", p.view(c, r, "User "+body.User.Name, p.userNav(c), body))
}

// revokeKey ends one of the user's keys.
func (p *Panel) revokeKey(w http.ResponseWriter, r *http.Request, c caller) {
	body, err := p.userPageOf(r, c)
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	id := r.PathValue("id")
	mine := false
	for _, k := range body.Keys {
		mine = mine || k.ID == id
	}
	if !mine {
		p.fail(w, r, c, fault.Errorf(fault.NotFound, "key %s", id))
		return
	}
	if err := p.accounts.RevokeKey(r.Context(), c.Principal, id); err != nil {
		p.fail(w, r, c, err)
		return
	}
	msg := "Revoked key " + id + " of " + body.User.Name + ": it no longer works."
	if id == c.KeyID {
		msg += " It was the key this browser signed in with: sign in again with another."
	}
	redirect(w, r, "/users/"+body.User.Name, msg)
}
