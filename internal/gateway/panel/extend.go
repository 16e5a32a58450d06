package panel

import (
	"cmp"
	"net/http"
	"strings"
)

// extend gives a sandbox a new lifetime from now, as the form asks. A
// lifetime that would make it expire earlier than it does now is not
// done at once: the page says when it would expire and asks again, and
// the second submit carries confirm.
func (p *Panel) extend(w http.ResponseWriter, r *http.Request, c caller, ref string) {
	ctx, ttl := r.Context(), strings.TrimSpace(r.PostForm.Get("ttl"))
	refuse := func(err error) {
		p.refuseOnPage(w, r, c, ref, "extend", err, func(pg *sandboxPage) { pg.TTL = ttl })
	}
	if r.PostForm.Get("confirm") != "1" {
		sb, at, _, err := p.sandboxes.PlanExtend(ctx, c.Principal, ref, ttl)
		if err != nil {
			refuse(err)
			return
		}
		if at.Before(sb.ExpiresAt) {
			body := p.sandboxBody(r, c, sb)
			body.Form, body.TTL, body.Shorten, body.NewExpiry = "extend", ttl, true, at
			p.renderSandbox(w, r, c, http.StatusOK, body)
			return
		}
	}
	sb, err := p.sandboxes.Extend(ctx, c.Principal, ref, ttl)
	if err != nil {
		refuse(err)
		return
	}
	msg := "Extended " + sb.Name + ": it now expires " + when(sb.ExpiresAt) + "."
	if sb.LifetimeCut != "" {
		msg += " That is less than asked: it was cut to the longest lifetime the class and the quotas allow (" + sb.LifetimeCut + ")."
	}
	redirect(w, r, cmp.Or(localPath(r.PostForm.Get("back")), "/sandboxes/"+string(sb.ID)), msg)
}
