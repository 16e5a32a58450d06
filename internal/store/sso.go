package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store/sqldb"
)

// The sign-in through the identity provider (package sso, issue 20):
// organisations' mappings, the users people are linked to, the attempts
// and handoffs of sign-ins under way here; its sessions in
// sso_session.go.

var _ sso.Store = (*Store)(nil)

// SSOMapping is org's mapping: with nil lists when none is set.
func (s *Store) SSOMapping(ctx context.Context, org string) (idp.Mapping, error) {
	m, err := scanMapping(s.db.QueryRowContext(ctx, `SELECT org_id, members, administrators FROM sso_mappings WHERE org_id = $1`, org))
	switch {
	case notFound(err):
		return idp.Mapping{Org: org}, nil
	case err != nil:
		return idp.Mapping{}, fmt.Errorf("get the sign-in mapping of %s: %w", org, err)
	}
	return m, nil
}

// SSOMappings is every organisation's mapping that names at least one
// group, the oldest organisation's first.
func (s *Store) SSOMappings(ctx context.Context) ([]idp.Mapping, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT m.org_id, m.members, m.administrators
		FROM sso_mappings m JOIN organisations o ON o.id = m.org_id
		ORDER BY o.created_at, o.seq`)
	if err != nil {
		return nil, fmt.Errorf("list sign-in mappings: %w", err)
	}
	defer rows.Close()
	var out []idp.Mapping
	for rows.Next() {
		m, err := scanMapping(rows)
		if err != nil {
			return nil, fmt.Errorf("list sign-in mappings: %w", err)
		}
		// An empty list is "[]", not NULL: which have groups is told here,
		// not in SQL.
		if len(m.Members)+len(m.Administrators) > 0 {
			out = append(out, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sign-in mappings: %w", err)
	}
	return out, nil
}

func scanMapping(row rowScanner) (idp.Mapping, error) {
	var m idp.Mapping
	var members, admins sql.NullString
	if err := row.Scan(&m.Org, &members, &admins); err != nil {
		return idp.Mapping{}, err
	}
	if err := jsonOf(members, &m.Members); err != nil {
		return idp.Mapping{}, fmt.Errorf("members of %s: %w", m.Org, err)
	}
	if err := jsonOf(admins, &m.Administrators); err != nil {
		return idp.Mapping{}, fmt.Errorf("administrators of %s: %w", m.Org, err)
	}
	return m, nil
}

// SetSSOMapping writes m.Org's mapping in place of any it had, with
// events in the same transaction. Its updated_at is the time of the last
// event (the write's own record), as the store reads no clock. An
// organisation that does not exist is fault.NotFound.
func (s *Store) SetSSOMapping(ctx context.Context, m idp.Mapping, events ...audit.Event) error {
	members, err := jsonArg(m.Members, m.Members == nil)
	if err != nil {
		return fmt.Errorf("set the sign-in mapping of %s: %w", m.Org, err)
	}
	admins, err := jsonArg(m.Administrators, m.Administrators == nil)
	if err != nil {
		return fmt.Errorf("set the sign-in mapping of %s: %w", m.Org, err)
	}
	var updated time.Time
	if len(events) > 0 {
		updated = events[len(events)-1].At
	}
	return s.withEvents(ctx, sqldb.Bounded, events, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `
			INSERT INTO sso_mappings (org_id, members, administrators, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (org_id) DO UPDATE
			SET members = excluded.members, administrators = excluded.administrators, updated_at = excluded.updated_at`,
			m.Org, members, admins, timeArg(updated))
		if constraintOf(err) == foreignKeyConstraint {
			return fault.Errorf(fault.NotFound, "organisation %s", m.Org)
		}
		if err != nil {
			return fmt.Errorf("set the sign-in mapping of %s: %w", m.Org, err)
		}
		return nil
	})
}

// FirstOrganisation is the oldest organisation (the bootstrap's);
// fault.NotFound when there is none.
func (s *Store) FirstOrganisation(ctx context.Context) (account.Organisation, error) {
	var o account.Organisation
	var created sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT id, name, created_at FROM organisations ORDER BY created_at, seq LIMIT 1`).
		Scan(&o.ID, &o.Name, &created)
	switch {
	case notFound(err):
		return account.Organisation{}, fault.Errorf(fault.NotFound, "the deployment has no organisation")
	case err != nil:
		return account.Organisation{}, fmt.Errorf("get the first organisation: %w", err)
	}
	o.CreatedAt = timeOf(created)
	return o, nil
}

// IdentityUsers are the users, of any organisation, linked to the person
// issuer and subject name at the identity provider, oldest first.
func (s *Store) IdentityUsers(ctx context.Context, issuer, subject string) ([]account.User, error) {
	users, err := s.queryUsers(ctx, `
		SELECT `+userColumns+` FROM users WHERE issuer = $1 AND subject = $2
		ORDER BY created_at, seq`, issuer, subject)
	if err != nil {
		return nil, fmt.Errorf("users of %s at %s: %w", subject, issuer, err)
	}
	return users, nil
}

// UnlinkedUserByEmail finds the oldest user of org whose email is email,
// compared without case, and who is linked to nobody at the identity
// provider; fault.NotFound when there is none, and for email "".
func (s *Store) UnlinkedUserByEmail(ctx context.Context, org, email string) (account.User, error) {
	if email == "" {
		return account.User{}, fault.Errorf(fault.NotFound, "a user of %s without an email", org)
	}
	// Case is folded here, not by SQL's LOWER, which folds only ASCII on
	// SQLite and more on PostgreSQL: both dialects answer alike. Only the
	// organisation's unlinked users with an email are read.
	users, err := s.queryUsers(ctx, `
		SELECT `+userColumns+` FROM users WHERE org_id = $1 AND issuer IS NULL AND email <> ''
		ORDER BY created_at, seq`, org)
	if err != nil {
		return account.User{}, fmt.Errorf("find the user of %s with email %s: %w", org, email, err)
	}
	for _, u := range users {
		if strings.EqualFold(u.Email, email) {
			return u, nil
		}
	}
	return account.User{}, fault.Errorf(fault.NotFound, "a user of %s with email %s, not yet signed in through the identity provider", org, email)
}

// queryUsers reads the users q selects (userColumns).
func (s *Store) queryUsers(ctx context.Context, q string, args ...any) ([]account.User, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []account.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// UpdateSignedIn writes what a sign-in says of the existing user u.ID:
// its Issuer and Subject, Email, Role, Disabled and DisabledByIdP, with
// events in the same transaction. An unknown user is fault.NotFound;
// another user of the organisation already linked to the same person is
// fault.Conflict.
func (s *Store) UpdateSignedIn(ctx context.Context, u account.User, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Patient, events, func(q sqldb.Queryer) error {
		res, err := q.ExecContext(ctx, `
			UPDATE users SET issuer = $2, subject = $3, email = $4, role = $5, disabled = $6, disabled_by_idp = $7
			WHERE id = $1`,
			u.ID, nullString(u.Issuer), nullString(u.Subject), u.Email, string(u.Role), boolArg(u.Disabled), boolArg(u.DisabledByIdP))
		if constraintOf(err) == uniqueConstraint {
			return fault.Errorf(fault.Conflict, "user %s: %s at %s is another user of the organisation", u.Name, u.Subject, u.Issuer)
		}
		if err != nil {
			return fmt.Errorf("update user %s: %w", u.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("update user %s: %w", u.ID, err)
		} else if n == 0 {
			return fault.Errorf(fault.NotFound, "user %s", u.ID)
		}
		return nil
	})
}

// CreateSSOAttempt writes a sign-in under way. An id already used is
// fault.Conflict.
func (s *Store) CreateSSOAttempt(ctx context.Context, a sso.Attempt) error {
	var port, challenge, state, device, code any
	if a.CLI != nil {
		port, challenge, state = a.CLI.Port, a.CLI.Challenge, a.CLI.State
	}
	if a.Device != nil {
		device, code = a.Device.ID, a.Device.UserCode
	}
	_, err := s.db.Write(ctx, sqldb.Bounded, `
		INSERT INTO sso_attempts (id, nonce, verifier, browser, next, org, cli_port, cli_challenge, cli_state, device_id, device_code, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		a.ID, a.Nonce, a.Verifier, a.Browser, a.Next, a.Org, port, challenge, state, device, code, timeArg(a.CreatedAt), timeArg(a.ExpiresAt))
	if constraintOf(err) == uniqueConstraint {
		return fault.Errorf(fault.Conflict, "sign-in attempt %s", a.ID)
	}
	if err != nil {
		return fmt.Errorf("write sign-in attempt: %w", err)
	}
	return nil
}

// TakeSSOAttempt deletes and returns the attempt id names, in one
// statement, so of two takes at once one alone has it. An attempt
// expired by at is deleted as well, but fault.NotFound, as is an unknown
// or taken one.
func (s *Store) TakeSSOAttempt(ctx context.Context, id string, at time.Time) (sso.Attempt, error) {
	var (
		a                sso.Attempt
		port             sql.NullInt64
		challenge, state sql.NullString
		device, code     sql.NullString
		created, expires sql.NullInt64
	)
	err := s.db.Autocommit(ctx, sqldb.Patient, func(q sqldb.Queryer) error {
		return q.QueryRowContext(ctx, `
			DELETE FROM sso_attempts WHERE id = $1
			RETURNING id, nonce, verifier, browser, next, org, cli_port, cli_challenge, cli_state, device_id, device_code, created_at, expires_at`, id).
			Scan(&a.ID, &a.Nonce, &a.Verifier, &a.Browser, &a.Next, &a.Org, &port, &challenge, &state, &device, &code, &created, &expires)
	})
	switch {
	case notFound(err):
		return sso.Attempt{}, fault.Errorf(fault.NotFound, "sign-in attempt")
	case err != nil:
		return sso.Attempt{}, fmt.Errorf("take sign-in attempt: %w", err)
	}
	a.CreatedAt, a.ExpiresAt = timeOf(created), timeOf(expires)
	if !a.ExpiresAt.After(at) {
		return sso.Attempt{}, fault.Errorf(fault.NotFound, "sign-in attempt (expired at %s)", a.ExpiresAt.Format(time.RFC3339))
	}
	if port.Valid {
		a.CLI = &sso.CLI{Port: int(port.Int64), Challenge: challenge.String, State: state.String}
	}
	if device.Valid {
		a.Device = &sso.DeviceRef{ID: device.String, UserCode: code.String}
	}
	return a, nil
}

// CreateSSOHandoff writes a CLI sign-in's one-time code (its SHA-256) and
// what trading it opens. An id already used is fault.Conflict; a user
// who does not exist is fault.NotFound.
func (s *Store) CreateSSOHandoff(ctx context.Context, h sso.Handoff) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `
		INSERT INTO sso_handoffs (id, user_id, challenge, session_client, session_issuer, session_subject, session_refresh, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		h.ID, h.User, h.Challenge, h.Session.Client, h.Session.Issuer, h.Session.Subject, h.Session.Refresh,
		timeArg(h.CreatedAt), timeArg(h.ExpiresAt))
	switch constraintOf(err) {
	case uniqueConstraint:
		return fault.Errorf(fault.Conflict, "sign-in handoff %s", h.ID)
	case foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "sign-in handoff: user %s", h.User)
	}
	if err != nil {
		return fmt.Errorf("write sign-in handoff: %w", err)
	}
	return nil
}

// TakeSSOHandoff is TakeSSOAttempt for handoffs. The Session it returns
// holds what the handoff carries: Client, Issuer, Subject and Refresh.
func (s *Store) TakeSSOHandoff(ctx context.Context, id string, at time.Time) (sso.Handoff, error) {
	var (
		h                sso.Handoff
		created, expires sql.NullInt64
	)
	err := s.db.Autocommit(ctx, sqldb.Patient, func(q sqldb.Queryer) error {
		return q.QueryRowContext(ctx, `
			DELETE FROM sso_handoffs WHERE id = $1
			RETURNING id, user_id, challenge, session_client, session_issuer, session_subject, session_refresh, created_at, expires_at`, id).
			Scan(&h.ID, &h.User, &h.Challenge, &h.Session.Client, &h.Session.Issuer, &h.Session.Subject, &h.Session.Refresh, &created, &expires)
	})
	switch {
	case notFound(err):
		return sso.Handoff{}, fault.Errorf(fault.NotFound, "sign-in code")
	case err != nil:
		return sso.Handoff{}, fmt.Errorf("take sign-in handoff: %w", err)
	}
	h.CreatedAt, h.ExpiresAt = timeOf(created), timeOf(expires)
	if !h.ExpiresAt.After(at) {
		return sso.Handoff{}, fault.Errorf(fault.NotFound, "sign-in code (expired at %s)", h.ExpiresAt.Format(time.RFC3339))
	}
	return h, nil
}

// ForgetSSO deletes the attempts and handoffs that expired before before,
// and the sessions that ended or expired before it, in one transaction.
func (s *Store) ForgetSSO(ctx context.Context, before time.Time) error {
	return s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM sso_attempts WHERE expires_at < $1`,
			`DELETE FROM sso_handoffs WHERE expires_at < $1`,
			`DELETE FROM sso_devices WHERE expires_at < $1`,
			`DELETE FROM sso_sessions WHERE ended_at < $1 OR expires_at < $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, timeArg(before)); err != nil {
				return fmt.Errorf("forget old sign-ins: %w", err)
			}
		}
		return nil
	})
}
