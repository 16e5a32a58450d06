package store

import (
	"context"
	"database/sql"
	"encoding/json"
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
	var skills, mcp string
	err := s.db.QueryRowContext(ctx, `
		SELECT instructions, effort, model, skills, skills_path, mcp, pull_requests, updated_at, updated_by FROM agent_configs
		WHERE org_id = $1 AND project_id = $2`, org, project).Scan(&c.Instructions, &c.Effort, &c.Model, &skills, &c.SkillsPath, &mcp, &c.PullRequests, &at, &c.UpdatedBy)
	switch {
	case notFound(err):
		return agentconfig.Config{}, nil
	case err != nil:
		return agentconfig.Config{}, fmt.Errorf("agent configuration of %s: %w", scope(org, project), err)
	}
	c.UpdatedAt = timeOf(at)
	if err := json.Unmarshal([]byte(skills), &c.Skills); err != nil {
		return agentconfig.Config{}, fmt.Errorf("agent configuration of %s: skills: %w", scope(org, project), err)
	}
	if err := json.Unmarshal([]byte(mcp), &c.MCP); err != nil {
		return agentconfig.Config{}, fmt.Errorf("agent configuration of %s: MCP servers: %w", scope(org, project), err)
	}
	if len(c.Skills) == 0 {
		c.Skills = nil // none is none, as written
	}
	if len(c.MCP) == 0 {
		c.MCP = nil
	}
	return c, nil
}

// jsonList is a list as a JSON array, [] for none.
func jsonList[T any](xs []T) (string, error) {
	if len(xs) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(xs)
	return string(b), err
}

// PutAgentConfig writes one scope's agent configuration whole, with its
// audit entry.
func (s *Store) PutAgentConfig(ctx context.Context, org, project string, c agentconfig.Config, e audit.Event) error {
	skills, err := jsonList(c.Skills)
	if err != nil {
		return err
	}
	mcp, err := jsonList(c.MCP)
	if err != nil {
		return err
	}
	return s.withEvents(ctx, sqldb.Bounded, []audit.Event{e}, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `
			INSERT INTO agent_configs (org_id, project_id, instructions, effort, model, skills, skills_path, mcp, pull_requests, updated_at, updated_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (org_id, project_id) DO UPDATE SET
				instructions = excluded.instructions, effort = excluded.effort, model = excluded.model,
				skills = excluded.skills, skills_path = excluded.skills_path, mcp = excluded.mcp, pull_requests = excluded.pull_requests,
				updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
			org, project, c.Instructions, c.Effort, c.Model, skills, c.SkillsPath, mcp, c.PullRequests, timeArg(c.UpdatedAt), c.UpdatedBy)
		if err != nil {
			return fmt.Errorf("put agent configuration of %s: %w", scope(org, project), err)
		}
		return nil
	})
}
