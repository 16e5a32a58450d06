package store

import (
	"context"
	"database/sql"
	"fmt"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/store/sqldb"
)

// AddEgress counts tallies into their sandboxes' egress summaries
// (egress.Tallies): each adds to the row of its sandbox, host, port and
// decision, whichever replica wrote it before.
func (s *Store) AddEgress(ctx context.Context, ts []egress.Tally) error {
	err := s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		for _, t := range ts {
			_, err := tx.ExecContext(ctx, `
				INSERT INTO egress_tallies (sandbox_id, host, port, allowed, connections, bytes_up, bytes_down, first_at, last_at, why)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
				ON CONFLICT (sandbox_id, host, port, allowed) DO UPDATE SET
					connections = egress_tallies.connections + excluded.connections,
					bytes_up = egress_tallies.bytes_up + excluded.bytes_up,
					bytes_down = egress_tallies.bytes_down + excluded.bytes_down,
					first_at = CASE WHEN excluded.first_at < egress_tallies.first_at THEN excluded.first_at ELSE egress_tallies.first_at END,
					last_at = CASE WHEN excluded.last_at > egress_tallies.last_at THEN excluded.last_at ELSE egress_tallies.last_at END,
					why = CASE WHEN excluded.why <> '' THEN excluded.why ELSE egress_tallies.why END`,
				t.Sandbox, t.Host, t.Port, boolArg(t.Allowed), t.Connections, t.Up, t.Down, t.First.UnixNano(), t.Last.UnixNano(), t.Why)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count %d egress tallies: %w", len(ts), err)
	}
	return nil
}

// EgressOf returns a sandbox's egress tallies, in no order.
func (s *Store) EgressOf(ctx context.Context, sandbox string) ([]egress.Tally, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT host, port, allowed, connections, bytes_up, bytes_down, first_at, last_at, why
		FROM egress_tallies WHERE sandbox_id = $1`, sandbox)
	if err != nil {
		return nil, fmt.Errorf("egress of %s: %w", sandbox, err)
	}
	defer rows.Close()
	var ts []egress.Tally
	for rows.Next() {
		t := egress.Tally{Sandbox: sandbox}
		var allowed int
		var first, last sql.NullInt64
		if err := rows.Scan(&t.Host, &t.Port, &allowed, &t.Connections, &t.Up, &t.Down, &first, &last, &t.Why); err != nil {
			return nil, fmt.Errorf("egress of %s: %w", sandbox, err)
		}
		t.Allowed, t.First, t.Last = allowed == 1, timeOf(first), timeOf(last)
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("egress of %s: %w", sandbox, err)
	}
	return ts, nil
}
