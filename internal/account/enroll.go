package account

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
)

// Invite issues a one-time invitation for a user of an organisation p
// administers, replacing any earlier unused one, with a life of ttl (0:
// DefaultInvitationTTL). The user exchanges it for their own key
// (Redeem), so whoever invited them never holds one.
//
// An administrator may invite only a user who has never had a key: once a
// user has one, their keys are theirs and an operator's. An operator may
// invite anyone (a recovery invitation, for a user who lost their keys).
// An operator is not found for anyone below operator.
func (s *Service) Invite(ctx context.Context, p Principal, orgRef, userRef string, ttl time.Duration) (NewInvitationResult, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return NewInvitationResult{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return NewInvitationResult{}, fault.Errorf(fault.Forbidden, "invite: only an administrator of %s may", org.Name)
	}
	u, err := s.store.FindUser(ctx, org.ID, userRef)
	if err != nil {
		return NewInvitationResult{}, err // the store names the user
	}
	if !p.CanHandleKeysOf(u) {
		return NewInvitationResult{}, fault.Errorf(fault.NotFound, "user %s", userRef)
	}
	if ttl == 0 {
		ttl = DefaultInvitationTTL
	}
	if ttl < MinInvitationTTL || ttl > MaxInvitationTTL {
		return NewInvitationResult{}, fault.Field("ttl", "%s is outside %s to %s", ttl, MinInvitationTTL, MaxInvitationTTL)
	}
	now := s.now()
	inv, secret := NewInvitation(u.ID, p.User.ID, p.IsOperator(), now, now.Add(ttl))
	detail := fmt.Sprintf("%s for %s, single use, expires %s", inv.ID, u.Name, inv.ExpiresAt.Format(time.RFC3339))
	if inv.Recovery {
		detail += ", recovery"
	}
	err = s.store.CreateInvitation(ctx, inv,
		audit.Event{At: now, Org: u.Org, Actor: p.User.ID, Action: audit.InvitationCreate, Target: u.Name, Detail: detail})
	if errors.Is(err, fault.Conflict) && !inv.Recovery {
		return NewInvitationResult{}, fault.Errorf(fault.Forbidden, "invite: %s has signed in before (a key of theirs exists), so only %s or an operator "+
			"mints their keys; an operator can send a recovery invitation", u.Name, u.Name)
	}
	if err != nil {
		return NewInvitationResult{}, fmt.Errorf("invite: %w", err)
	}
	return NewInvitationResult{Invitation: inv, User: u, Secret: secret}, nil
}

// Redeem exchanges an invitation for a new key of the user it names, once,
// and records who used it from which address. keyName names the key;
// from is the client's address, for the audit log.
//
// An invitation that is not berth's, unknown, or whose secret is wrong is
// fault.Unauthenticated, saying nothing more. One that was already used,
// replaced or has expired is fault.Conflict saying so and when: the person
// it was meant for learns at once that someone else may hold a key as
// them. Every refusal of a known invitation is in the audit log.
func (s *Service) Redeem(ctx context.Context, token, keyName, from string) (Enrollment, error) {
	if err := CheckText("key_name", keyName, MaxKeyName); err != nil {
		return Enrollment{}, err
	}
	id, secret, ok := ParseInvitation(token)
	if !ok {
		return Enrollment{}, fault.Errorf(fault.Unauthenticated, "not a berth invitation")
	}
	unknown := fault.Errorf(fault.Unauthenticated, "unknown invitation")
	inv, err := s.store.GetInvitation(ctx, id)
	if errors.Is(err, fault.NotFound) {
		return Enrollment{}, unknown
	}
	if err != nil {
		return Enrollment{}, fmt.Errorf("redeem invitation: %w", err)
	}
	u, err := s.store.GetUser(ctx, inv.User)
	if err != nil {
		return Enrollment{}, fmt.Errorf("redeem invitation: %w", err)
	}
	refuse := func(detail string, err error) (Enrollment, error) {
		s.record(ctx, audit.Event{Org: u.Org, Actor: u.ID, Action: audit.InvitationRedeem, Target: inv.ID, Outcome: audit.Refused,
			Detail: fmt.Sprintf("%s's invitation presented from %s: %s", u.Name, from, detail)})
		return Enrollment{}, err
	}
	if !inv.Matches(secret) {
		return refuse("a wrong secret", unknown)
	}
	now := s.now()
	if detail, err := unusable(inv, u, now); err != nil {
		return refuse(detail, err)
	}
	if keyName == "" {
		keyName = "enrolled"
	}
	k, keySecret := NewKey(u.ID, keyName, now)
	err = s.store.RedeemInvitation(ctx, inv.ID, now, from, k,
		audit.Event{At: now, Org: u.Org, Actor: u.ID, Action: audit.InvitationRedeem, Target: inv.ID,
			Detail: fmt.Sprintf("used from %s for %s's key %s", from, u.Name, k.ID)},
		audit.Event{At: now, Org: u.Org, Actor: u.ID, Action: audit.KeyCreate, Target: k.ID,
			Detail: keyDetail(u, k) + ", by invitation " + inv.ID})
	if errors.Is(err, fault.Conflict) {
		// Something came first: another use, a newer invitation, or a key.
		if again, gerr := s.store.GetInvitation(ctx, inv.ID); gerr == nil {
			inv = again
		}
		if detail, err := unusable(inv, u, now); err != nil {
			return refuse(detail, err)
		}
		return refuse("its user has a key already", fault.Errorf(fault.Conflict, "invitation %s: %s has a key already, and only %s or an operator "+
			"mints their keys now: ask your administrator", inv.ID, u.Name, u.Name))
	}
	if err != nil {
		return Enrollment{}, fmt.Errorf("redeem invitation: %w", err)
	}
	inv.RedeemedAt, inv.RedeemedFrom, inv.Key = now, from, k.ID
	org, err := s.store.GetOrganisation(ctx, u.Org)
	if err != nil {
		return Enrollment{}, fmt.Errorf("redeem invitation: %w", err)
	}
	return Enrollment{User: u, Organisation: org, Key: NewKeyResult{Key: k, Secret: keySecret}, Invitation: inv}, nil
}

// unusable says why inv cannot be redeemed for u at now: the words for the
// audit log, which alone says where a first use came from, and the error
// for whoever presented it. Both are empty when it can be, as far as inv
// tells: whether u has a key already only the store's transaction can.
func unusable(inv Invitation, u User, now time.Time) (detail string, err error) {
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") }
	switch {
	case !inv.RedeemedAt.IsZero():
		return fmt.Sprintf("already used at %s from %s", inv.RedeemedAt.UTC().Format(time.RFC3339), inv.RedeemedFrom),
			fault.Errorf(fault.Conflict, "invitation %s was already used, on %s. If that was not you, someone else may hold a key as %s: "+
				"tell your administrator now (they can revoke that key; an operator can send you a new invitation)",
				inv.ID, stamp(inv.RedeemedAt), u.Name)
	case !inv.ReplacedAt.IsZero():
		return "replaced by a newer invitation at " + inv.ReplacedAt.UTC().Format(time.RFC3339),
			fault.Errorf(fault.Conflict, "invitation %s was replaced by a newer one on %s: use the newest you were sent, or ask your administrator",
				inv.ID, stamp(inv.ReplacedAt))
	case !now.Before(inv.ExpiresAt):
		return "expired at " + inv.ExpiresAt.UTC().Format(time.RFC3339),
			fault.Errorf(fault.Conflict, "invitation %s expired on %s: ask your administrator for a new one", inv.ID, stamp(inv.ExpiresAt))
	case u.Disabled:
		return u.Name + " is disabled", fault.Errorf(fault.Conflict, "invitation %s: %s is disabled: ask your administrator", inv.ID, u.Name)
	}
	return "", nil
}
