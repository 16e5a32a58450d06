package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/store/sqldb"
)

// GetGuardrail returns the guardrail of org (project "") or of one of its
// projects as written. One never written is the zero Guardrail.
func (s *Store) GetGuardrail(ctx context.Context, org, project string) (guardrail.Guardrail, error) {
	var (
		sandboxes, memory, cpu, ttl sql.NullInt64
		repos, egress               sql.NullString
	)
	err := s.db.QueryRowContext(ctx, `
		SELECT max_sandboxes, max_sandbox_memory, max_sandbox_cpu, max_sandbox_ttl, allowed_repos, egress
		FROM guardrails WHERE org_id = $1 AND project_id = $2`, org, project).
		Scan(&sandboxes, &memory, &cpu, &ttl, &repos, &egress)
	switch {
	case notFound(err):
		return guardrail.Guardrail{}, nil
	case err != nil:
		return guardrail.Guardrail{}, fmt.Errorf("get guardrail of %s: %w", scope(org, project), err)
	}
	g := guardrail.Guardrail{
		MaxSandboxes:     ptrOf[int](sandboxes),
		MaxSandboxMemory: ptrOf[int64](memory),
		MaxSandboxCPU:    ptrOf[quantity.Millicores](cpu),
		MaxSandboxTTL:    ptrOf[time.Duration](ttl),
	}
	if err := jsonOf(repos, &g.AllowedRepos); err != nil {
		return guardrail.Guardrail{}, fmt.Errorf("get guardrail of %s: allowed_repos: %w", scope(org, project), err)
	}
	if err := jsonOf(egress, &g.Egress); err != nil {
		return guardrail.Guardrail{}, fmt.Errorf("get guardrail of %s: egress: %w", scope(org, project), err)
	}
	return g, nil
}

// PutGuardrail writes the guardrail of org (project "") or of one of its
// projects whole, replacing every field, with events. An organisation
// that does not exist is fault.NotFound.
func (s *Store) PutGuardrail(ctx context.Context, org, project string, g guardrail.Guardrail, events ...audit.Event) error {
	repos, err := jsonArg(g.AllowedRepos, g.AllowedRepos == nil)
	if err != nil {
		return fmt.Errorf("put guardrail of %s: allowed_repos: %w", scope(org, project), err)
	}
	egress, err := jsonArg(g.Egress, g.Egress == nil)
	if err != nil {
		return fmt.Errorf("put guardrail of %s: egress: %w", scope(org, project), err)
	}
	return s.withEvents(ctx, sqldb.Bounded, events, func(q sqldb.Queryer) error { return putGuardrail(ctx, q, org, project, g, repos, egress) })
}

func putGuardrail(ctx context.Context, q sqldb.Queryer, org, project string, g guardrail.Guardrail, repos, egress any) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO guardrails (org_id, project_id, max_sandboxes, max_sandbox_memory, max_sandbox_cpu, max_sandbox_ttl, allowed_repos, egress)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (org_id, project_id) DO UPDATE SET
			max_sandboxes = excluded.max_sandboxes,
			max_sandbox_memory = excluded.max_sandbox_memory,
			max_sandbox_cpu = excluded.max_sandbox_cpu,
			max_sandbox_ttl = excluded.max_sandbox_ttl,
			allowed_repos = excluded.allowed_repos,
			egress = excluded.egress`,
		org, project, ptrArg(g.MaxSandboxes), ptrArg(g.MaxSandboxMemory), ptrArg(g.MaxSandboxCPU),
		ptrArg(g.MaxSandboxTTL), repos, egress)
	switch {
	case constraintOf(err) == foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "guardrail of %s: organisation %s", scope(org, project), org)
	case err != nil:
		return fmt.Errorf("put guardrail of %s: %w", scope(org, project), err)
	}
	return nil
}

// scope names a guardrail's owner in messages.
func scope(org, project string) string {
	if project == "" {
		return "organisation " + org
	}
	return "project " + project
}
