package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/store/sqldb"
)

var _ audit.Recorder = (*Store)(nil)

// Record appends an audit event.
func (s *Store) Record(ctx context.Context, e audit.Event) error {
	return s.db.Autocommit(ctx, sqldb.Patient, func(q sqldb.Queryer) error { return insertAudit(ctx, q, e) })
}

// insertAudit appends e through db, the database or a transaction whose
// change it records.
func insertAudit(ctx context.Context, db sqldb.Queryer, e audit.Event) error {
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
// one transaction, in its turn t (sqldb.Turn); without events it is the
// write alone. Like InTx's fn, a patient write may run more than once.
func (s *Store) withEvents(ctx context.Context, t sqldb.Turn, events []audit.Event, write func(q sqldb.Queryer) error) error {
	if len(events) == 0 {
		return s.db.Autocommit(ctx, t, write)
	}
	return s.db.InTx(ctx, t, func(tx *sql.Tx) error {
		if err := write(tx); err != nil {
			return err
		}
		return insertAudits(ctx, tx, events)
	})
}

// insertAudits appends events in order through q, the transaction of the
// change they record.
func insertAudits(ctx context.Context, q sqldb.Queryer, events []audit.Event) error {
	for _, e := range events {
		if err := insertAudit(ctx, q, e); err != nil {
			return err
		}
	}
	return nil
}

// ListAudit returns a page of the events f selects, oldest first (by
// seq, the order they were recorded in), and the key of its last one when
// more follow. A page after the first takes f.Since as passed: every event
// after its key was recorded after the first page's, so a window that
// moved on meanwhile drops none of them.
func (s *Store) ListAudit(ctx context.Context, f audit.Filter, pg paging.Request) ([]audit.Event, *paging.Key, error) {
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
	// Oldest first, the window's start matters on the first page only;
	// newest first, it is where every page ends.
	if !f.Since.IsZero() && (pg.After == nil || f.Newest) {
		add("at >= $%d", timeArg(f.Since))
	}
	o := bySeq
	if f.Newest {
		o = bySeqDesc
	}
	cond, tail := keyset(o, "", pg, &args)
	if cond != "" {
		where = append(where, cond)
	}
	q := `SELECT seq, at, org_id, actor_id, sandbox_id, action, target, outcome, detail FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return listPage(ctx, s.db, "list audit", q+tail, args, pg, func(row rowScanner) (audit.Event, paging.Key, error) {
		var e audit.Event
		var at sql.NullInt64
		err := row.Scan(&e.ID, &at, &e.Org, &e.Actor, &e.Sandbox, &e.Action, &e.Target, &e.Outcome, &e.Detail)
		e.At = timeOf(at)
		return e, paging.Key{Seq: e.ID}, err
	})
}
