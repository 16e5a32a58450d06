package store

import (
	"context"
	"database/sql"
	"fmt"

	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/store/sqldb"
)

// AgentConfig reads one scope's agent configuration (project "" the
// organisation's); one never written is the zero Config.
func (s *Store) AgentConfig(ctx context.Context, org, project string) (agentconfig.Config, error) {
	var c agentconfig.Config
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, `
		SELECT instructions, effort, model, updated_at, updated_by FROM agent_configs
		WHERE org_id = $1 AND project_id = $2`, org, project).Scan(&c.Instructions, &c.Effort, &c.Model, &at, &c.UpdatedBy)
	switch {
	case notFound(err):
		return agentconfig.Config{}, nil
	case err != nil:
		return agentconfig.Config{}, fmt.Errorf("agent configuration of %s: %w", scope(org, project), err)
	}
	c.UpdatedAt = timeOf(at)
	return c, nil
}

// PutAgentConfig writes one scope's agent configuration whole, with its
// audit entry.
func (s *Store) PutAgentConfig(ctx context.Context, org, project string, c agentconfig.Config, e audit.Event) error {
	return s.withEvents(ctx, sqldb.Bounded, []audit.Event{e}, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `
			INSERT INTO agent_configs (org_id, project_id, instructions, effort, model, updated_at, updated_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (org_id, project_id) DO UPDATE SET
				instructions = excluded.instructions, effort = excluded.effort, model = excluded.model,
				updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
			org, project, c.Instructions, c.Effort, c.Model, timeArg(c.UpdatedAt), c.UpdatedBy)
		if err != nil {
			return fmt.Errorf("put agent configuration of %s: %w", scope(org, project), err)
		}
		return nil
	})
}
