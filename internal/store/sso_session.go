package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store/sqldb"
)

// CreateSSOSession writes a sign-in's key and its session in one
// transaction, with events. An id already used is fault.Conflict; a user
// who does not exist is fault.NotFound.
func (s *Store) CreateSSOSession(ctx context.Context, ss sso.Session, k account.Key, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		if err := insertKey(ctx, tx, k); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO sso_sessions (id, user_id, key_id, client, client_id, issuer, subject, refresh, created_at, refreshed_at, expires_at, ended_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			ss.ID, ss.User, ss.Key, ss.Client, ss.ClientID, ss.Issuer, ss.Subject, ss.Refresh,
			timeArg(ss.CreatedAt), timeArg(ss.RefreshedAt), timeArg(ss.ExpiresAt), timeArg(ss.EndedAt))
		switch constraintOf(err) {
		case uniqueConstraint:
			return fault.Errorf(fault.Conflict, "sign-in session %s", ss.ID)
		case foreignKeyConstraint:
			return fault.Errorf(fault.NotFound, "sign-in session %s: user %s or key %s", ss.ID, ss.User, ss.Key)
		}
		if err != nil {
			return fmt.Errorf("write sign-in session %s: %w", ss.ID, err)
		}
		return insertAudits(ctx, tx, events)
	})
}

const ssoSessionColumns = `id, user_id, key_id, client, client_id, issuer, subject, refresh, created_at, refreshed_at, expires_at, ended_at`

// scanSSOSession reads ssoSessionColumns, then extra.
func scanSSOSession(row rowScanner, extra ...any) (sso.Session, error) {
	var ss sso.Session
	var created, refreshed, expires, ended sql.NullInt64
	if err := row.Scan(append([]any{&ss.ID, &ss.User, &ss.Key, &ss.Client, &ss.ClientID, &ss.Issuer, &ss.Subject, &ss.Refresh,
		&created, &refreshed, &expires, &ended}, extra...)...); err != nil {
		return sso.Session{}, err
	}
	ss.CreatedAt, ss.RefreshedAt, ss.ExpiresAt, ss.EndedAt = timeOf(created), timeOf(refreshed), timeOf(expires), timeOf(ended)
	return ss, nil
}

// SSOSessionOfKey is the session that gave key keyID (fault.NotFound).
func (s *Store) SSOSessionOfKey(ctx context.Context, keyID string) (sso.Session, error) {
	ss, err := scanSSOSession(s.db.QueryRowContext(ctx, `SELECT `+ssoSessionColumns+` FROM sso_sessions WHERE key_id = $1`, keyID))
	switch {
	case notFound(err):
		return sso.Session{}, fault.Errorf(fault.NotFound, "a sign-in session of key %s", keyID)
	case err != nil:
		return sso.Session{}, fmt.Errorf("get the sign-in session of key %s: %w", keyID, err)
	}
	return ss, nil
}

// DueSSOSessions are at most limit sessions to refresh: not ended, not
// expired at now, with a refresh token, their key not revoked and their
// user not disabled, last refreshed (or made) before before; the longest
// waiting first.
func (s *Store) DueSSOSessions(ctx context.Context, now, before time.Time, limit int) ([]sso.Session, error) {
	// The conditions on ended_at and refresh, and the order, are those of
	// the index sso_sessions_due.
	rows, err := s.db.QueryContext(ctx, `
		SELECT s.id, s.user_id, s.key_id, s.client, s.client_id, s.issuer, s.subject, s.refresh, s.created_at, s.refreshed_at, s.expires_at, s.ended_at
		FROM sso_sessions s
		JOIN keys k ON k.id = s.key_id
		JOIN users u ON u.id = s.user_id
		WHERE s.ended_at IS NULL AND s.refresh IS NOT NULL
		  AND COALESCE(s.refreshed_at, s.created_at) < $2
		  AND s.expires_at > $1 AND k.revoked_at IS NULL AND u.disabled = 0
		ORDER BY COALESCE(s.refreshed_at, s.created_at), s.seq
		LIMIT $3`, timeArg(now), timeArg(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list sign-in sessions due: %w", err)
	}
	defer rows.Close()
	var out []sso.Session
	for rows.Next() {
		ss, err := scanSSOSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sign-in sessions due: %w", err)
		}
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sign-in sessions due: %w", err)
	}
	return out, nil
}

// RefreshedSSOSession records a refresh of session id at at, and the
// provider's refresh token now (sealed; nil: none, and the session is
// refreshed no more), with events. An unknown session is
// fault.NotFound.
func (s *Store) RefreshedSSOSession(ctx context.Context, id string, refresh []byte, at time.Time, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Patient, events, func(q sqldb.Queryer) error {
		res, err := q.ExecContext(ctx, `UPDATE sso_sessions SET refresh = $2, refreshed_at = $3 WHERE id = $1`, id, refresh, timeArg(at))
		if err != nil {
			return fmt.Errorf("record the refresh of sign-in session %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("record the refresh of sign-in session %s: %w", id, err)
		} else if n == 0 {
			return fault.Errorf(fault.NotFound, "sign-in session %s", id)
		}
		return nil
	})
}

// EndSSOSession ends session id at at and revokes its key (unless it is
// revoked already: the first revocation stands), with events, in one
// transaction. A session that has ended already is left as it is, and
// events are not recorded; an unknown one is fault.NotFound.
func (s *Store) EndSSOSession(ctx context.Context, id string, at time.Time, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		// One statement decides, so of two ends at once one alone records.
		var key string
		err := tx.QueryRowContext(ctx, `UPDATE sso_sessions SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL RETURNING key_id`,
			timeArg(at), id).Scan(&key)
		if notFound(err) {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM sso_sessions WHERE id = $1`, id).Scan(&one)
			switch {
			case notFound(err):
				return fault.Errorf(fault.NotFound, "sign-in session %s", id)
			case err != nil:
				return fmt.Errorf("end sign-in session %s: %w", id, err)
			}
			return nil // ended already: nothing changed, nothing to record
		}
		if err != nil {
			return fmt.Errorf("end sign-in session %s: %w", id, err)
		}
		if err := revokeKey(ctx, tx, key, at); err != nil {
			return fmt.Errorf("end sign-in session %s: revoke key %s: %w", id, key, err)
		}
		return insertAudits(ctx, tx, events)
	})
}

// EndUserSSOSessions ends every live session of user (not ended, not
// expired at at) and revokes their keys, recording the events events makes of each
// one it ended, oldest first, in one transaction. It returns how many it
// ended.
func (s *Store) EndUserSSOSessions(ctx context.Context, user string, at time.Time, events func(sso.Session) []audit.Event) (int, error) {
	var n int
	err := s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		ended, err := endUserSSOSessions(ctx, tx, user, at)
		if err != nil {
			return fmt.Errorf("end the sign-in sessions of %s: %w", user, err)
		}
		for _, ss := range ended {
			if err := revokeKey(ctx, tx, ss.Key, at); err != nil {
				return fmt.Errorf("end the sign-in sessions of %s: revoke key %s: %w", user, ss.Key, err)
			}
			if events != nil {
				if err := insertAudits(ctx, tx, events(ss)); err != nil {
					return err
				}
			}
		}
		n = len(ended)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// endUserSSOSessions sets ended_at on user's live sessions and returns
// them, oldest first. One statement decides which, so a session ended at
// the same time by EndSSOSession is ended (and recorded) once.
func endUserSSOSessions(ctx context.Context, tx *sql.Tx, user string, at time.Time) ([]sso.Session, error) {
	rows, err := tx.QueryContext(ctx, `
		UPDATE sso_sessions SET ended_at = $1
		WHERE user_id = $2 AND ended_at IS NULL AND expires_at > $1
		RETURNING `+ssoSessionColumns+`, seq`, timeArg(at), user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type row struct {
		ss  sso.Session
		seq int64
	}
	var read []row
	for rows.Next() {
		var r row
		if r.ss, err = scanSSOSession(rows, &r.seq); err != nil {
			return nil, err
		}
		read = append(read, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// RETURNING has no order.
	slices.SortFunc(read, func(a, b row) int {
		return cmp.Or(a.ss.CreatedAt.Compare(b.ss.CreatedAt), cmp.Compare(a.seq, b.seq))
	})
	out := make([]sso.Session, len(read))
	for i, r := range read {
		out[i] = r.ss
	}
	return out, nil
}
