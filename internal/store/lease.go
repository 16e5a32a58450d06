package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/store/sqldb"
)

var _ inference.Leases = (*Store)(nil)

// The leases of inference budgets that replicas share (inference's
// lease.go). Only Lease changes what a replica may admit on, in a
// transaction under the organisation's lock; the other writes only lower
// what leases hold. No statement outside Lease and the records'
// transaction (insertInference) locks more than one lease row, and those
// two lock theirs in one order (organisation, project), so writers of
// leases never wait on each other in a cycle.

// Lease reads each scope's month and writes the replica's leases as
// decide says, under the organisation's lock: four round trips with the
// transaction's own, whatever the scopes.
func (s *Store) Lease(ctx context.Context, g inference.LeaseGrant, decide func([]inference.Leased) ([]float64, error)) error {
	// Bounded: a lease is granted as a request is admitted, and a request
	// refused then has cost nothing.
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		if err := s.db.Serialize(ctx, tx, "budget:"+g.Org); err != nil {
			return err
		}
		fs, err := leased(ctx, tx, g.Org, g.Projects, g.Month, g.Now, g.Replica)
		if err != nil {
			return err
		}
		add, err := decide(fs)
		if err != nil {
			return err
		}
		if len(add) != len(g.Projects) {
			return fmt.Errorf("lease of %s: %d amounts for %d budgets", scope(g.Org, ""), len(add), len(g.Projects))
		}
		// One statement writes them in the order given, the order the
		// records' transactions lock them in.
		var rows []string
		args := []any{g.Org, timeArg(g.Month), g.Replica, timeArg(g.Expires)}
		for i, p := range g.Projects {
			rows = append(rows, fmt.Sprintf("($1, $%d, $2, $3, $%d, $4)", len(args)+1, len(args)+2))
			args = append(args, p, add[i])
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO inference_leases (org_id, project_id, month, replica, amount, expires_at)
			VALUES `+strings.Join(rows, ", ")+`
			ON CONFLICT (org_id, project_id, month, replica) DO UPDATE SET
				amount = inference_leases.amount + excluded.amount, expires_at = excluded.expires_at`, args...); err != nil {
			return fmt.Errorf("lease of %s: %w", scope(g.Org, ""), err)
		}
		return nil
	})
}

// leased reads scopes' month in one statement, so a record committed
// meanwhile is either in the spend with its lease lowered or in neither.
// The replica's own lease counts even expired: Lease writes on top of it.
func leased(ctx context.Context, q sqldb.Queryer, org string, projects []string, month, now time.Time, replica string) ([]inference.Leased, error) {
	var parts []string
	args := []any{org, timeArg(month), timeArg(now), replica}
	for i, p := range projects {
		args = append(args, p)
		n := len(args) // the project's parameter
		spent := `SELECT COALESCE(SUM(cost_usd), 0) FROM inference_usage WHERE org_id = $1 AND at >= $2`
		if p != "" {
			spent += fmt.Sprintf(` AND project_id = $%d`, n)
		}
		lease := fmt.Sprintf(`FROM inference_leases WHERE org_id = $1 AND project_id = $%d AND month = $2`, n)
		parts = append(parts, fmt.Sprintf(`SELECT %d, (%s),
			(SELECT COALESCE(SUM(amount), 0) %s AND expires_at > $3 AND replica <> $4),
			(SELECT COALESCE(SUM(amount), 0) %s AND replica = $4),
			(SELECT COUNT(*) %s AND replica = $4)`, i, spent, lease, lease, lease))
	}
	rows, err := q.QueryContext(ctx, strings.Join(parts, " UNION ALL ")+" ORDER BY 1", args...)
	if err != nil {
		return nil, fmt.Errorf("budgets of %s: %w", scope(org, ""), err)
	}
	defer rows.Close()
	out := make([]inference.Leased, len(projects))
	for rows.Next() {
		var (
			i    int
			f    inference.Leased
			have int
		)
		if err := rows.Scan(&i, &f.Spent, &f.Others, &f.Mine, &have); err != nil {
			return nil, fmt.Errorf("budgets of %s: %w", scope(org, ""), err)
		}
		f.Have = have > 0
		out[i] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("budgets of %s: %w", scope(org, ""), err)
	}
	return out, nil
}

// LeaseStatus reads a scope's month: its spend and what the live leases
// of every replica hold.
func (s *Store) LeaseStatus(ctx context.Context, org, project string, month, now time.Time) (spent, held float64, err error) {
	// No replica is named: every live lease is another's.
	fs, err := leased(ctx, s.db, org, []string{project}, month, now, "")
	if err != nil {
		return 0, 0, err
	}
	return fs[0].Spent, fs[0].Others, nil
}

// ReturnLease takes amount off a replica's lease of a scope.
func (s *Store) ReturnLease(ctx context.Context, replica, org, project string, month time.Time, amount float64) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `UPDATE inference_leases SET amount = amount - $1
		WHERE org_id = $2 AND project_id = $3 AND month = $4 AND replica = $5`,
		amount, org, project, timeArg(month), replica)
	if err != nil {
		return fmt.Errorf("return a lease of %s: %w", scope(org, project), err)
	}
	return nil
}

// DropLease removes a replica's lease of a scope.
func (s *Store) DropLease(ctx context.Context, replica, org, project string, month time.Time) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `DELETE FROM inference_leases
		WHERE org_id = $1 AND project_id = $2 AND month = $3 AND replica = $4`,
		org, project, timeArg(month), replica)
	if err != nil {
		return fmt.Errorf("drop a lease of %s: %w", scope(org, project), err)
	}
	return nil
}

// RenewLeases moves the expiry of the replica's leases to until and
// removes the other replicas' leases expired at now, a row at a time.
func (s *Store) RenewLeases(ctx context.Context, replica string, now, until time.Time) error {
	mine, err := s.leaseKeys(ctx, `WHERE replica = $1`, replica)
	if err != nil {
		return err
	}
	for _, k := range mine {
		if _, err := s.db.Write(ctx, sqldb.Patient, `UPDATE inference_leases SET expires_at = $1
			WHERE org_id = $2 AND project_id = $3 AND month = $4 AND replica = $5`,
			timeArg(until), k.org, k.project, k.month, replica); err != nil {
			return fmt.Errorf("renew a lease of %s: %w", scope(k.org, k.project), err)
		}
	}
	expired, err := s.leaseKeys(ctx, `WHERE replica <> $1 AND expires_at <= $2`, replica, timeArg(now))
	if err != nil {
		return err
	}
	for _, k := range expired {
		// Renewed meanwhile, it stays.
		if _, err := s.db.Write(ctx, sqldb.Patient, `DELETE FROM inference_leases
			WHERE org_id = $1 AND project_id = $2 AND month = $3 AND replica = $4 AND expires_at <= $5`,
			k.org, k.project, k.month, k.replica, timeArg(now)); err != nil {
			return fmt.Errorf("remove an expired lease of %s: %w", scope(k.org, k.project), err)
		}
	}
	return nil
}

// leaseRow names one lease.
type leaseRow struct {
	org, project string
	month        int64
	replica      string
}

func (s *Store) leaseKeys(ctx context.Context, where string, args ...any) ([]leaseRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT org_id, project_id, month, replica FROM inference_leases `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("budgets' leases: %w", err)
	}
	defer rows.Close()
	var out []leaseRow
	for rows.Next() {
		var k leaseRow
		if err := rows.Scan(&k.org, &k.project, &k.month, &k.replica); err != nil {
			return nil, fmt.Errorf("budgets' leases: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// releaseLeases takes what settled requests held off their replicas'
// leases, in the transaction that records them: one statement per lease,
// in the order Lease writes them.
func releaseLeases(ctx context.Context, tx *sql.Tx, rs []inference.Record) error {
	if !slices.ContainsFunc(rs, func(r inference.Record) bool { return r.Lease.Replica != "" }) {
		return nil // a gateway alone with its database holds no leases
	}
	sums := map[leaseRow]float64{}
	for _, r := range rs {
		rel := r.Lease
		if rel.Replica == "" {
			continue
		}
		for _, p := range rel.Projects {
			sums[leaseRow{org: r.Org, project: p, month: rel.Month.UnixNano(), replica: rel.Replica}] += rel.Amount
		}
	}
	keys := make([]leaseRow, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b leaseRow) int {
		return cmp.Or(cmp.Compare(a.org, b.org), cmp.Compare(a.project, b.project), cmp.Compare(a.month, b.month), cmp.Compare(a.replica, b.replica))
	})
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `UPDATE inference_leases SET amount = amount - $1
			WHERE org_id = $2 AND project_id = $3 AND month = $4 AND replica = $5`,
			sums[k], k.org, k.project, k.month, k.replica); err != nil {
			return fmt.Errorf("release a lease of %s: %w", scope(k.org, k.project), err)
		}
	}
	return nil
}
