package gateway

import (
	"net/http"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// maxRedeemBody bounds the body of the public redemption route: an
// invitation and a key's name fit in far less.
const maxRedeemBody = 4 << 10

// inviteUser issues a one-time invitation for a user (SPEC S6): how an
// administrator lets a person in without ever holding their key.
func (s *Server) inviteUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.CreateInvitation) (api.Invitation, error) {
		var ttl time.Duration
		if req.TTL != "" {
			d, err := quantity.ParseDuration(req.TTL)
			if err != nil {
				return api.Invitation{}, fault.Field("ttl", "%v", err)
			}
			ttl = d
		}
		res, err := s.accounts.Invite(r.Context(), p, r.PathValue("org"), r.PathValue("user"), ttl)
		if err != nil {
			return api.Invitation{}, err
		}
		w.Header().Set("Cache-Control", "no-store") // the answer holds the secret
		return api.Invitation{ID: res.Invitation.ID, User: apiUser(res.User), Recovery: res.Invitation.Recovery,
			CreatedAt: res.Invitation.CreatedAt, ExpiresAt: res.Invitation.ExpiresAt, Secret: res.Secret.Reveal()}, nil
	})
}

// redeemInvitation exchanges an invitation for a key of its user, once.
// The route is public (the invitation is the credential), limited per
// client address like the other credential routes, and its body is small.
func (s *Server) redeemInvitation(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	if s.rateLimited(w, r, s.enrollLimit, "invitation") {
		return
	}
	var req api.RedeemInvitation
	if err := decode(r, &req); err != nil {
		s.meter.CredentialRequested("invitation", "refused")
		s.writeError(w, r, err)
		return
	}
	e, err := s.accounts.Redeem(r.Context(), req.Invitation, req.KeyName, clientAddr(r))
	replyCredential(s, w, r, "invitation", http.StatusCreated, api.Enrollment{User: apiUser(e.User), Organisation: apiOrg(e.Organisation), Key: apiNewKey(e.Key)}, err)
}
