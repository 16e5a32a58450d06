package sso

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/idp"
)

// refreshBatch is how many sessions a pass reads at a time: it reads
// batches until no more are due (or only those it tried already, whose
// provider did not answer, are).
var refreshBatch = 100

// keepEnded is how long an ended or expired session is kept.
const keepEnded = 7 * 24 * time.Hour

// Run refreshes the sessions that are due every tick (a quarter of
// RefreshEvery, between a second and a minute) on the replica that leads,
// and forgets what is old, until ctx ends. It does nothing without a
// provider.
func (s *Service) Run(ctx context.Context) {
	if s.cfg.Provider == nil {
		return
	}
	every := min(max(s.cfg.RefreshEvery/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if lead, err := s.lead(ctx); err != nil || !lead {
			continue
		}
		if _, err := s.RefreshDue(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "sign-in sessions not refreshed", "err", err)
		}
		if err := s.store.ForgetSSO(ctx, s.now().Add(-keepEnded)); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "old sign-ins not forgotten", "err", err)
		}
	}
}

// RefreshDue is one pass: every session not refreshed for RefreshEvery
// is refreshed at the provider. A refresh the provider refuses
// (idp.ErrRevoked), or an ID token whose groups no longer give the
// user's organisation, cuts the user off; a changed role is written. A
// provider that cannot be reached, or any other failure, says nothing of
// the person: the session stays due and is tried again. It returns how
// many sessions it refreshed.
func (s *Service) RefreshDue(ctx context.Context) (int, error) {
	if s.cfg.Provider == nil {
		return 0, nil
	}
	now := s.now()
	var cut []string // users cut off in this pass
	tried := map[string]bool{}
	n := 0
	for {
		due, err := s.store.DueSSOSessions(ctx, now, now.Add(-s.cfg.RefreshEvery), refreshBatch)
		if err != nil {
			return n, err
		}
		fresh := 0
		for _, sess := range due {
			if tried[sess.ID] {
				continue
			}
			tried[sess.ID] = true
			fresh++
			m, err := s.refreshDue(ctx, sess, &cut)
			if err != nil {
				return n, err
			}
			n += m
		}
		if len(due) < refreshBatch || fresh == 0 {
			return n, nil
		}
	}
}

// refreshDue refreshes one due session (RefreshDue): 1 when it did. A
// user it cuts off joins cut, and their other sessions are passed over.
func (s *Service) refreshDue(ctx context.Context, sess Session, cut *[]string) (int, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if slices.Contains(*cut, sess.User) {
		return 0, nil
	}
	u, err := s.store.GetUser(ctx, sess.User)
	if err != nil {
		return 0, err
	}
	why, err := s.refreshOne(ctx, sess, u)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "sign-in session not refreshed; tried again later", "session", sess.ID, "user", u.ID, "err", err)
	case why != "":
		*cut = append(*cut, u.ID)
		s.cutOff(ctx, u, why)
	default:
		return 1, nil
	}
	return 0, nil
}

// refreshOne refreshes one session. why is not "" when the user is to be
// cut off; err when the refresh said nothing of the person.
func (s *Service) refreshOne(ctx context.Context, sess Session, u account.User) (why string, err error) {
	if id := s.cfg.Provider.ClientID(); sess.ClientID != id {
		// The deployment changed its client: the provider would refuse
		// this token as another client's, which says nothing of the
		// person. The session ends; its key lasts its lifetime no more.
		now := s.now()
		return "", s.store.EndSSOSession(ctx, sess.ID, now,
			audit.Event{At: now, Org: u.Org, Action: audit.SSOSignOut, Target: u.Name,
				Detail: fmt.Sprintf("%s: ended, key %s revoked: opened for the client %q, and berth is now the client %q: sign in again", sess.Client, sess.Key, sess.ClientID, id)},
			audit.Event{At: now, Org: u.Org, Action: audit.KeyRevoke, Target: sess.Key, Detail: "its sign-in was for another client of the identity provider"})
	}
	token, err := s.sealer.open(sess.Refresh, sess.Issuer, sess.Subject)
	if err != nil {
		// Never readable again: the session is not refreshed any more,
		// and ends with its key.
		s.log.ErrorContext(ctx, "a sign-in's refresh token cannot be read; the session ends with its key", "session", sess.ID, "err", err)
		return "", s.store.RefreshedSSOSession(ctx, sess.ID, nil, s.now())
	}
	r, err := s.cfg.Provider.Refresh(ctx, token.Reveal())
	now := s.now()
	if errors.Is(err, idp.ErrRevoked) {
		s.record(ctx, audit.Event{At: now, Org: u.Org, Action: audit.SSORefresh, Target: u.Name, Outcome: audit.Refused,
			Detail: fmt.Sprintf("%s sign-in of %s: %v", sess.Client, sess.CreatedAt.UTC().Format(time.RFC3339), err)})
		return "the identity provider refused to refresh their sign-in", nil
	}
	if err != nil {
		return "", err
	}
	var events []audit.Event
	if id := r.Identity; id != nil {
		if id.Subject != sess.Subject || id.Issuer != sess.Issuer {
			s.record(ctx, audit.Event{At: now, Org: u.Org, Action: audit.SSORefresh, Target: u.Name, Outcome: audit.Refused,
				Detail: fmt.Sprintf("the refreshed ID token names %s at %s, not %s", id.Subject, id.Issuer, sess.Subject)})
			return "the identity provider's refresh named another person", nil
		}
		places, err := s.places(ctx, *id)
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(places, func(pl place) bool { return pl.org.ID == u.Org })
		if i < 0 {
			return "no group of theirs at the identity provider gives them this organisation any more (refresh)", nil
		}
		if pl := places[i]; pl.role != u.Role {
			events = append(events, audit.Event{At: now, Org: u.Org, Action: audit.UserRole, Target: u.Name,
				Detail: fmt.Sprintf("%s → %s: %s at the identity provider (refresh)", u.Role, pl.role, pl.why)})
			u.Role = pl.role
			if err := s.store.UpdateSignedIn(ctx, u, events...); err != nil {
				return "", err
			}
		}
	}
	return "", s.store.RefreshedSSOSession(ctx, sess.ID, s.sealer.seal(r.Refresh, sess.Issuer, sess.Subject), now)
}
