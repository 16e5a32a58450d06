package oidctest

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
)

// hookRequest is the part of hydra's token hook request (oauth2.token_hook;
// hydra's oauth2/token_hook.go) the login app reads: the session of the
// grant being used, and the token request.
type hookRequest struct {
	Session struct {
		IDToken struct {
			Subject string `json:"subject"`
			Claims  struct {
				Extra map[string]any `json:"ext"`
			} `json:"id_token_claims"`
		} `json:"id_token"`
		Extra map[string]any `json:"extra"`
	} `json:"session"`
	Request struct {
		GrantTypes    []string `json:"grant_types"`
		GrantedScopes []string `json:"granted_scopes"`
	} `json:"request"`
}

// tokenHook is the token hook hydra calls before it answers any token
// request. For a refresh_token grant it reads the user again, as a real
// IdP does: a user now refused (or no longer known) is answered 403, which
// hydra turns into the client's access_denied; otherwise 200 with the ID
// token's extra claims rebuilt from the user's current record for the
// scopes granted (other extra claims, e.g. sid, kept), and the access
// token's unchanged. Any other grant is answered 204: hydra changes
// nothing.
func (p *Provider) tokenHook(w http.ResponseWriter, r *http.Request) {
	var in hookRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !slices.Contains(in.Request.GrantTypes, "refresh_token") {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	u, ok := p.lookup(in.Session.IDToken.Subject)
	if !ok || u.Refuse {
		http.Error(w, "the account is disabled", http.StatusForbidden)
		return
	}
	claims := maps.Clone(in.Session.IDToken.Claims.Extra)
	if claims == nil {
		claims = map[string]any{}
	}
	for _, k := range personClaimNames {
		delete(claims, k)
	}
	maps.Copy(claims, personClaims(u, in.Request.GrantedScopes))
	access := in.Session.Extra
	if access == nil {
		access = map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"session": map[string]any{"access_token": access, "id_token": claims},
	})
}
