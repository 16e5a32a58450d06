package store

import (
	"context"
	"database/sql"
	"fmt"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/store/sqldb"
)

// PutSecret writes a project's sealed secret, replacing the one of its
// name, with its audit entry (placeholder.Store).
func (s *Store) PutSecret(ctx context.Context, x placeholder.Sealed, e audit.Event) error {
	hosts, err := jsonArg(x.Hosts, false)
	if err != nil {
		return fmt.Errorf("put secret %s: %w", x.Name, err)
	}
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		var others int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM project_secrets WHERE project_id = $1 AND name <> $2`,
			x.Project, x.Name).Scan(&others); err != nil {
			return fmt.Errorf("put secret %s: %w", x.Name, err)
		}
		if others >= placeholder.MaxSecrets {
			return fault.Errorf(fault.Conflict, "the project has %d secrets, the most it may have: delete one first", others)
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO project_secrets (project_id, name, org_id, hosts, value, created_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (project_id, name) DO UPDATE SET
				hosts = excluded.hosts, value = excluded.value, created_at = excluded.created_at, created_by = excluded.created_by`,
			x.Project, x.Name, x.Org, hosts, x.Value, timeArg(x.CreatedAt), x.CreatedBy)
		if err != nil {
			return fmt.Errorf("put secret %s: %w", x.Name, err)
		}
		return insertAudits(ctx, tx, []audit.Event{e})
	})
}

// Secrets lists a project's sealed secrets by name.
func (s *Store) Secrets(ctx context.Context, project string) ([]placeholder.Sealed, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT name, org_id, hosts, value, created_at, created_by FROM project_secrets
		WHERE project_id = $1 ORDER BY name`, project)
	if err != nil {
		return nil, fmt.Errorf("secrets of project %s: %w", project, err)
	}
	defer rows.Close()
	var out []placeholder.Sealed
	for rows.Next() {
		x := placeholder.Sealed{}
		x.Project = project
		var hosts sql.NullString
		var created sql.NullInt64
		if err := rows.Scan(&x.Name, &x.Org, &hosts, &x.Value, &created, &x.CreatedBy); err != nil {
			return nil, fmt.Errorf("secrets of project %s: %w", project, err)
		}
		if err := jsonOf(hosts, &x.Hosts); err != nil {
			return nil, fmt.Errorf("secrets of project %s: %s's hosts: %w", project, x.Name, err)
		}
		x.CreatedAt = timeOf(created)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("secrets of project %s: %w", project, err)
	}
	return out, nil
}

// DeleteSecret removes a project's secret, with its audit entry.
func (s *Store) DeleteSecret(ctx context.Context, project, name string, e audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM project_secrets WHERE project_id = $1 AND name = $2`, project, name)
		if err != nil {
			return fmt.Errorf("delete secret %s: %w", name, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fault.Errorf(fault.NotFound, "secret %s", name)
		}
		return insertAudits(ctx, tx, []audit.Event{e})
	})
}
