package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"berth.dev/berth/internal/audit"
)

var _ audit.Recorder = (*Store)(nil)

// Record appends an audit event.
func (s *Store) Record(ctx context.Context, e audit.Event) error {
	return insertAudit(ctx, s.db, e)
}

// insertAudit appends e through db, the database or a transaction whose
// change it records.
func insertAudit(ctx context.Context, db queryer, e audit.Event) error {
	if e.Outcome == "" {
		e.Outcome = audit.OK
	}
	_, err := db.ExecContext(ctx, `INSERT INTO audit (at, org_id, actor_id, sandbox_id, action, target, outcome, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		timeArg(e.At), e.Org, e.Actor, e.Sandbox, e.Action, e.Target, e.Outcome, e.Detail)
	if err != nil {
		return fmt.Errorf("record audit event %s: %w", e.Action, err)
	}
	return nil
}

// withEvents makes a write through write and records events with it, in
// one transaction; without events it is the write alone.
func (s *Store) withEvents(ctx context.Context, events []audit.Event, write func(q queryer) error) error {
	if len(events) == 0 {
		return write(s.db)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := write(tx); err != nil {
			return err
		}
		return insertAudits(ctx, tx, events)
	})
}

// insertAudits appends events in order through q, the transaction of the
// change they record.
func insertAudits(ctx context.Context, q queryer, events []audit.Event) error {
	for _, e := range events {
		if err := insertAudit(ctx, q, e); err != nil {
			return err
		}
	}
	return nil
}

// ListAudit returns events oldest first, narrowed by f; at most f.Limit
// (default 1000) of the newest that match.
func (s *Store) ListAudit(ctx context.Context, f audit.Filter) ([]audit.Event, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Org != "" {
		add("org_id = $%d", f.Org)
	}
	if f.Sandbox != "" {
		add("sandbox_id = $%d", f.Sandbox)
	}
	if !f.Since.IsZero() {
		add("at >= $%d", timeArg(f.Since))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	q := `SELECT seq, at, org_id, actor_id, sandbox_id, action, target, outcome, detail FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q = fmt.Sprintf(`SELECT * FROM (%s ORDER BY seq DESC LIMIT $%d) newest ORDER BY seq`, q, len(args))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []audit.Event
	for rows.Next() {
		var e audit.Event
		var at sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Org, &e.Actor, &e.Sandbox, &e.Action, &e.Target, &e.Outcome, &e.Detail); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.At = timeOf(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
