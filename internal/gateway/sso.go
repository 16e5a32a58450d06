package gateway

import (
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/idp"
)

// maxSSOTokenBody bounds the body of the public code exchange: a code, a
// verifier and a key's name fit in far less.
const maxSSOTokenBody = 4 << 10

// ssoInfo says whether the gateway signs people in through an identity
// provider, for berth login --sso (public).
func (s *Server) ssoInfo(w http.ResponseWriter, _ *http.Request, _ account.Principal) {
	writeJSON(w, http.StatusOK, api.SSO{Enabled: s.sso.Enabled(), Issuer: s.sso.Issuer(), KeySignIn: s.keySignIn, CLIStart: s.sso.CLIStart()})
}

// ssoToken trades berth login --sso's one-time code and PKCE verifier for
// a key of the person's own. The route is public (the code and verifier
// are the credential), limited per client address as invitations are (a
// limit of its own).
func (s *Server) ssoToken(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	if s.rateLimited(w, r, s.ssoLimit, "sso") {
		return
	}
	var req api.SSOToken
	if err := decode(r, &req); err != nil {
		s.meter.CredentialRequested("sso", "refused")
		s.writeError(w, r, err)
		return
	}
	u, org, k, err := s.sso.Exchange(r.Context(), req.Code, req.Verifier, req.KeyName)
	replyCredential(s, w, r, "sso", http.StatusCreated, api.Enrollment{User: apiUser(u), Organisation: apiOrg(org), Key: apiNewKey(k)}, err)
}

func apiMapping(m idp.Mapping) api.SSOMapping {
	return api.SSOMapping{Members: nonNil(m.Members), Administrators: nonNil(m.Administrators)}
}

// getSSOMapping reads an organisation's sign-in mapping (its
// administrators, operators).
func (s *Server) getSSOMapping(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.SSOMapping, error) {
		m, err := s.sso.Mapping(r.Context(), p, r.PathValue("org"))
		return apiMapping(m), err
	})
}

// putSSOMapping replaces an organisation's sign-in mapping (operators).
func (s *Server) putSSOMapping(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusOK, func(req api.SSOMapping) (api.SSOMapping, error) {
		m, err := s.sso.SetMapping(r.Context(), p, r.PathValue("org"), req.Members, req.Administrators)
		return apiMapping(m), err
	})
}
