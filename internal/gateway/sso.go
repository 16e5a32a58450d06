package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/sso"
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

// ssoDevice begins berth login --sso --device (public; limited per client
// address with the code exchange).
func (s *Server) ssoDevice(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	if s.rateLimited(w, r, s.ssoLimit, "sso") {
		return
	}
	replyTo(s, w, r, http.StatusCreated, func(req api.StartSSODevice) (api.SSODevice, error) {
		d, err := s.sso.StartDevice(r.Context(), req.KeyName, req.Org)
		if err != nil {
			return api.SSODevice{}, err
		}
		w.Header().Set("Cache-Control", "no-store") // the answer holds the device code
		page := strings.TrimSuffix(s.publicURL, "/") + sso.DevicePage
		return api.SSODevice{DeviceCode: d.DeviceCode.Reveal(), UserCode: d.UserCode, VerificationURI: page,
			VerificationURIComplete: page + "?code=" + url.QueryEscape(d.UserCode),
			ExpiresIn:               int(time.Until(d.ExpiresAt).Round(time.Second).Seconds()), Interval: int(d.Interval.Seconds())}, nil
	})
}

// ssoDeviceToken is a device grant's poll (public: the device code is the
// credential): pending (409 authorization_pending) until somebody signed
// in for it, 429 when polled too often, then the key, once.
func (s *Server) ssoDeviceToken(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	var req api.PollSSODevice
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	u, org, k, err := s.sso.PollDevice(r.Context(), req.DeviceCode)
	switch {
	case errors.Is(err, sso.ErrPending):
		writeJSON(w, http.StatusConflict, api.Error{Code: api.CodePending, Message: "nobody has signed in for this device code yet: poll again after the interval"})
		return
	case errors.Is(err, sso.ErrSlowDown):
		w.Header().Set("Retry-After", strconv.Itoa(int(sso.DeviceInterval.Seconds())))
		writeJSON(w, http.StatusTooManyRequests, api.Error{Code: api.CodeRateLimited,
			Message: fmt.Sprintf("slow_down: poll at most every %s", sso.DeviceInterval)})
		return
	}
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
