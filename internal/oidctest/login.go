package oidctest

import (
	"net/http"
	"slices"
)

// personClaims are the ID token's claims of u for the scopes granted:
// email and email_verified with email, name and preferred_username with
// profile, groups with groups (an empty list when u has none, so a group
// taken away shows as none rather than as an absent claim).
func personClaims(u User, scopes []string) map[string]any {
	claims := map[string]any{}
	if slices.Contains(scopes, "email") && u.Email != "" {
		claims["email"] = u.Email
		claims["email_verified"] = true
	}
	if slices.Contains(scopes, "profile") {
		if u.Name != "" {
			claims["name"] = u.Name
		}
		if u.Username != "" {
			claims["preferred_username"] = u.Username
		}
	}
	if slices.Contains(scopes, "groups") {
		claims["groups"] = append([]string{}, u.Groups...)
	}
	return claims
}

// personClaimNames are the claims personClaims may set: a refresh replaces
// all of them.
var personClaimNames = []string{"email", "email_verified", "name", "preferred_username", "groups"}

// loginRequest is what hydra's admin API says of a login challenge.
type loginRequest struct {
	Subject     string `json:"subject"`
	Skip        bool   `json:"skip"`
	OIDCContext struct {
		LoginHint string `json:"login_hint"`
	} `json:"oidc_context"`
}

// consentRequest is what hydra's admin API says of a consent challenge.
type consentRequest struct {
	Subject        string   `json:"subject"`
	RequestedScope []string `json:"requested_scope"`
	Audience       []string `json:"requested_access_token_audience"`
}

// redirect is hydra's answer to an accept or reject.
type redirect struct {
	RedirectTo string `json:"redirect_to"`
}

// loginApp is the login and consent app hydra sends the browser to
// (URLS_LOGIN, URLS_CONSENT, URLS_ERROR). It asks nothing: a login signs
// in the user the login_hint names, else the current one (SignInAs); a
// consent grants what was asked and puts the user's claims in the ID
// token: email with the email scope, name with profile, groups with
// groups, as IdPs do. Neither is remembered, so every authorization signs
// in afresh and a test may change users between two.
func (p *Provider) loginApp() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		ch := r.URL.Query().Get("login_challenge")
		q := map[string][]string{"login_challenge": {ch}}
		var lr loginRequest
		if err := p.admin(r.Context(), http.MethodGet, "/admin/oauth2/auth/requests/login", q, nil, &lr); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		u, ok := p.user(hint(lr))
		if !ok {
			http.Error(w, errNoUser.Error(), http.StatusInternalServerError)
			return
		}
		var to redirect
		var err error
		if u.Refuse {
			err = p.admin(r.Context(), http.MethodPut, "/admin/oauth2/auth/requests/login/reject", q,
				map[string]any{"error": "access_denied", "error_description": "the account is disabled"}, &to)
		} else {
			err = p.admin(r.Context(), http.MethodPut, "/admin/oauth2/auth/requests/login/accept", q,
				map[string]any{"subject": u.Subject, "remember": false}, &to)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, to.RedirectTo, http.StatusFound)
	})
	mux.HandleFunc("GET /consent", func(w http.ResponseWriter, r *http.Request) {
		q := map[string][]string{"consent_challenge": {r.URL.Query().Get("consent_challenge")}}
		var cr consentRequest
		if err := p.admin(r.Context(), http.MethodGet, "/admin/oauth2/auth/requests/consent", q, nil, &cr); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		u, _ := p.lookup(cr.Subject)
		claims := personClaims(u, cr.RequestedScope)
		var to redirect
		err := p.admin(r.Context(), http.MethodPut, "/admin/oauth2/auth/requests/consent/accept", q, map[string]any{
			"grant_scope":                 cr.RequestedScope,
			"grant_access_token_audience": cr.Audience,
			"remember":                    false,
			"session":                     map[string]any{"id_token": claims},
		}, &to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, to.RedirectTo, http.StatusFound)
	})
	mux.HandleFunc("POST /token-hook", p.tokenHook)
	// hydra's own errors (a bad client, a bad redirect URI) land here.
	mux.HandleFunc("GET /error", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		http.Error(w, "oidc error: "+q.Get("error")+": "+q.Get("error_description"), http.StatusBadRequest)
	})
	return mux
}
