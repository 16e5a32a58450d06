package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
	"berth.dev/berth/internal/warm"
)

// boolArg is a boolean column's value: 0 or 1 on both engines.
func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ListWarmClasses returns every organisation's classes with warm > 0
// (SPEC S12), by organisation and name.
func (s *Store) ListWarmClasses(ctx context.Context) ([]warm.Class, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT org_id, `+classColumns+` FROM classes WHERE warm > 0 ORDER BY org_id, name`)
	if err != nil {
		return nil, fmt.Errorf("list warm classes: %w", err)
	}
	defer rows.Close()
	var out []warm.Class
	for rows.Next() {
		var org string
		var wc warm.Class
		c, err := scanClass(prefixed{rows, &org})
		if err != nil {
			return nil, fmt.Errorf("list warm classes: %w", err)
		}
		wc.Org, wc.Class = org, c
		out = append(out, wc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list warm classes: %w", err)
	}
	return out, nil
}

// prefixed scans one column into first, then the rest as scanClass asks.
type prefixed struct {
	rows  *sql.Rows
	first any
}

func (p prefixed) Scan(dest ...any) error { return p.rows.Scan(append([]any{p.first}, dest...)...) }

// AddBootstrap keeps a bootstrap token's hash, with events.
func (s *Store) AddBootstrap(ctx context.Context, t warm.Token, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Patient, events, func(q sqldb.Queryer) error { return addBootstrap(ctx, q, t) })
}

func addBootstrap(ctx context.Context, q sqldb.Queryer, t warm.Token) error {
	_, err := q.ExecContext(ctx, `INSERT INTO bootstrap_tokens (hash, sandbox_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		t.Hash, string(t.Sandbox), timeArg(t.CreatedAt), timeArg(t.ExpiresAt))
	switch constraintOf(err) {
	case foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "bootstrap token of %s", t.Sandbox)
	case uniqueConstraint:
		return fault.Errorf(fault.Conflict, "bootstrap token of %s", t.Sandbox)
	}
	if err != nil {
		return fmt.Errorf("add bootstrap token of %s: %w", t.Sandbox, err)
	}
	return nil
}

// UseBootstrap marks the unused, unexpired token of hash used at at and
// returns its sandbox. One statement decides, so two uses racing (two
// replicas) cannot both win.
func (s *Store) UseBootstrap(ctx context.Context, hash string, at time.Time) (sandbox.ID, error) {
	var id string
	err := s.db.Autocommit(ctx, sqldb.Patient, func(q sqldb.Queryer) error {
		return q.QueryRowContext(ctx, `
			UPDATE bootstrap_tokens SET used_at = $1
			WHERE hash = $2 AND used_at IS NULL AND expires_at > $1
			RETURNING sandbox_id`, timeArg(at), hash).Scan(&id)
	})
	switch {
	case notFound(err):
		return "", fault.Errorf(fault.NotFound, "bootstrap token")
	case err != nil:
		return "", fmt.Errorf("use bootstrap token: %w", err)
	}
	return sandbox.ID(id), nil
}
