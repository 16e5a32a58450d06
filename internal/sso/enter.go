package sso

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/idp"
)

// place is an organisation a person's groups let them into, and as what.
type place struct {
	org  account.Organisation
	role account.Role
	why  string // the groups that gave it, for the audit
}

// places are the organisations id's groups give, oldest organisation
// first: each organisation whose mapping names a group of theirs, as its
// administrator or member; an operator (Config.Operators) is an operator
// wherever they are, and without any mapping in the oldest organisation.
func (s *Service) places(ctx context.Context, id idp.Identity) ([]place, error) {
	ms, err := s.store.SSOMappings(ctx)
	if err != nil {
		return nil, err
	}
	opGroups := matching(id.Groups, s.cfg.Operators)
	var out []place
	for _, m := range ms {
		var pl place
		switch m.Role(id) {
		case idp.RoleAdmin:
			pl.role, pl.why = account.RoleAdmin, "administrator by "+words(matching(id.Groups, m.Administrators))
		case idp.RoleMember:
			pl.role, pl.why = account.RoleMember, "member by "+words(matching(id.Groups, m.Members))
		default:
			continue
		}
		if len(opGroups) > 0 {
			pl.role, pl.why = account.RoleOperator, "operator by "+words(opGroups)
		}
		if pl.org, err = s.store.GetOrganisation(ctx, m.Org); err != nil {
			return nil, err
		}
		out = append(out, pl)
	}
	if len(out) == 0 && len(opGroups) > 0 {
		first, err := s.store.FirstOrganisation(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, place{org: first, role: account.RoleOperator, why: "operator by " + words(opGroups)})
	}
	return out, nil
}

// matching are the groups of have that want names, compared as the
// provider writes them, without case.
func matching(have, want []string) []string {
	var out []string
	for _, g := range have {
		if slices.ContainsFunc(want, func(w string) bool { return strings.EqualFold(strings.TrimSpace(w), g) }) {
			out = append(out, g)
		}
	}
	return out
}

// enter lets the person id names in: the organisation their groups give
// (asked names one when several do; none asked, several: choose is them
// and nothing is written), their user there found, linked or made, and
// kept current (role, email; enabled again when the provider's refusal
// was why they were disabled). Each user of theirs in an organisation
// their groups no longer give is cut off. A refusal is a *Refusal.
func (s *Service) enter(ctx context.Context, id idp.Identity, asked, client string) (account.User, account.Organisation, []account.Organisation, error) {
	places, err := s.places(ctx, id)
	if err != nil {
		return account.User{}, account.Organisation{}, nil, err
	}
	linked, err := s.store.IdentityUsers(ctx, id.Issuer, id.Subject)
	if err != nil {
		return account.User{}, account.Organisation{}, nil, err
	}
	for _, u := range linked {
		if !slices.ContainsFunc(places, func(pl place) bool { return pl.org.ID == u.Org }) && !u.Disabled {
			s.cutOff(ctx, u, "no group of theirs at the identity provider gives them this organisation any more (signing in)")
		}
	}
	if asked != "" {
		places = slices.DeleteFunc(places, func(pl place) bool { return pl.org.Name != asked && pl.org.ID != asked })
	}
	switch {
	case len(places) == 0 && asked != "":
		return account.User{}, account.Organisation{}, nil, refuse(publicNoAccess, "%s at %s (groups %s) has no place in organisation %s", id.Subject, id.Issuer, words(id.Groups), asked)
	case len(places) == 0:
		return account.User{}, account.Organisation{}, nil, refuse(publicNoAccess, "no organisation's mapping names a group of %s at %s (groups %s)", id.Subject, id.Issuer, words(id.Groups))
	case len(places) > 1:
		orgs := make([]account.Organisation, len(places))
		for i, pl := range places {
			orgs[i] = pl.org
		}
		return account.User{}, account.Organisation{}, orgs, nil
	}
	pl := places[0]
	u, err := s.settle(ctx, id, pl, linked, client)
	return u, pl.org, nil, err
}

// settle finds, links or makes the person's user in pl's organisation and
// brings it up to date.
func (s *Service) settle(ctx context.Context, id idp.Identity, pl place, linked []account.User, client string) (account.User, error) {
	now := s.now()
	ev := func(action, target, detail string) audit.Event {
		return audit.Event{At: now, Org: pl.org.ID, Action: action, Target: target, Detail: detail}
	}
	i := slices.IndexFunc(linked, func(u account.User) bool { return u.Org == pl.org.ID })
	var u account.User
	var events []audit.Event
	switch {
	case i >= 0:
		u = linked[i]
	case id.Email != "" && id.EmailVerified:
		found, err := s.store.UnlinkedUserByEmail(ctx, pl.org.ID, id.Email)
		if err != nil && !errors.Is(err, fault.NotFound) {
			return account.User{}, err
		}
		if err == nil {
			u = found
			u.Issuer, u.Subject = id.Issuer, id.Subject
			events = append(events, ev(audit.UserLink, u.Name, fmt.Sprintf("%s at %s, by the verified email %s", id.Subject, id.Issuer, id.Email)))
		}
	}
	if u.ID == "" {
		return s.provision(ctx, id, pl, client)
	}
	if u.Disabled && !u.DisabledByIdP {
		return account.User{}, refuse(publicDisabled, "%s of %s was disabled by an administrator", u.Name, pl.org.Name)
	}
	if u.Role != pl.role {
		events = append(events, ev(audit.UserRole, u.Name, fmt.Sprintf("%s → %s: %s at the identity provider", u.Role, pl.role, pl.why)))
		u.Role = pl.role
	}
	if u.Disabled {
		events = append(events, ev(audit.UserEnable, u.Name, "the identity provider lets them in again: "+pl.why))
		u.Disabled, u.DisabledByIdP = false, false
	}
	if id.Email != "" && id.Email != u.Email && account.CheckText("email", id.Email, account.MaxEmail) == nil {
		u.Email = id.Email
		if len(events) == 0 {
			events = append(events, ev(audit.UserLink, u.Name, "email now "+id.Email+", as the identity provider says"))
		}
	}
	if len(events) == 0 {
		return u, nil
	}
	if err := s.store.UpdateSignedIn(ctx, u, events...); err != nil {
		return account.User{}, fmt.Errorf("update %s: %w", u.Name, err)
	}
	return u, nil
}

// provision makes the person's user in pl's organisation at their first
// sign-in there (just in time): named by their email, else their user
// name at the provider, else a name drawn from their subject, the first
// of these the organisation has free.
func (s *Service) provision(ctx context.Context, id idp.Identity, pl place, client string) (account.User, error) {
	name, err := s.freeName(ctx, pl.org.ID, id)
	if err != nil {
		return account.User{}, err
	}
	email := id.Email
	if account.CheckText("email", email, account.MaxEmail) != nil {
		email = ""
	}
	u := account.User{ID: account.NewID("usr"), Org: pl.org.ID, Name: name, Email: email, Role: pl.role, CreatedAt: s.now(),
		Issuer: id.Issuer, Subject: id.Subject}
	e := audit.Event{At: u.CreatedAt, Org: u.Org, Action: audit.UserCreate, Target: u.Name,
		Detail: fmt.Sprintf("%s, %s: at their first sign-in (%s) through the identity provider, %s at %s; %s", u.ID, u.Role, client, id.Subject, id.Issuer, pl.why)}
	err = s.store.CreateUser(ctx, u, e)
	if errors.Is(err, fault.Conflict) {
		// Another sign-in of theirs made it first.
		linked, lerr := s.store.IdentityUsers(ctx, id.Issuer, id.Subject)
		if lerr == nil {
			if i := slices.IndexFunc(linked, func(x account.User) bool { return x.Org == pl.org.ID }); i >= 0 {
				return linked[i], nil
			}
		}
	}
	if err != nil {
		return account.User{}, fmt.Errorf("make the user of %s: %w", id.Subject, err)
	}
	s.log.InfoContext(ctx, "user made at first sign-in", "user", u.ID, "name", u.Name, "org", u.Org, "role", u.Role)
	return u, nil
}

// freeName is the first of the person's candidate names that is a valid
// user name free in org.
func (s *Service) freeName(ctx context.Context, org string, id idp.Identity) (string, error) {
	var candidates []string
	if id.Email != "" {
		candidates = append(candidates, strings.ToLower(id.Email))
	}
	if id.Username != "" {
		candidates = append(candidates, strings.ToLower(id.Username))
	}
	candidates = append(candidates, "sso-"+digest(id.Issuer + "\x00" + id.Subject)[:12])
	for _, c := range candidates {
		if account.CheckUserName(c) != nil {
			continue
		}
		_, err := s.store.FindUser(ctx, org, c)
		if errors.Is(err, fault.NotFound) {
			return c, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", refuse(publicBusy, "every name for %s at %s is taken in the organisation (%s)", id.Subject, id.Issuer, strings.Join(candidates, ", "))
}

// cutOff ends the access of a user the provider no longer lets in: they
// are disabled (DisabledByIdP: a sign-in the provider allows again
// enables them), their sign-ins' sessions end and keys are revoked, and
// their sandboxes end as a disabled owner's do (seed 004: agent sandboxes
// terminated, engineer sandboxes expired with their volumes kept,
// repository credentials revoked). A failure is logged; the keys of a
// disabled user, their sandboxes' own among them, stop working anyway.
func (s *Service) cutOff(ctx context.Context, u account.User, why string) {
	now := s.now()
	if !u.Disabled {
		e := audit.Event{At: now, Org: u.Org, Action: audit.UserDisable, Target: u.Name, Detail: u.ID + ", by the identity provider: " + why}
		if err := s.store.SetUserDisabled(ctx, u.ID, true, true, e); err != nil {
			s.log.ErrorContext(ctx, "a user the identity provider no longer lets in was not disabled", "user", u.ID, "err", err)
			return
		}
	}
	if _, err := s.store.EndUserSSOSessions(ctx, u.ID, now, func(ss Session) []audit.Event {
		return []audit.Event{
			{At: now, Org: u.Org, Action: audit.SSOSignOut, Target: u.Name, Detail: ss.Client + ": ended, key " + ss.Key + " revoked: " + why},
			{At: now, Org: u.Org, Action: audit.KeyRevoke, Target: ss.Key, Detail: "its sign-in ended: " + why},
		}
	}); err != nil {
		s.log.ErrorContext(ctx, "the sign-ins of a user the identity provider no longer lets in were not ended", "user", u.ID, "err", err)
	}
	s.log.WarnContext(ctx, "access ended by the identity provider", "user", u.ID, "org", u.Org, "why", why)
	if s.sandboxes == nil {
		return
	}
	if _, err := s.sandboxes.EndOwnerBecause(ctx, "", "its owner's access ended at the identity provider: "+why, u.ID); err != nil {
		s.log.ErrorContext(ctx, "the sandboxes of a user the identity provider no longer lets in were not all ended", "user", u.ID, "err", err)
	}
}
