package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

// PutRun writes an agent sandbox's run whole. Its telemetry is kept as
// JSON: the runner package owns its shape.
func (s *Store) PutRun(ctx context.Context, r agentrun.Run) error {
	tel, outputs, results, err := outputArgs(r)
	if err != nil {
		return fmt.Errorf("put run of %s: %w", r.Sandbox, err)
	}
	exited := 0
	if r.Exited {
		exited = 1
	}
	_, err = s.db.Write(ctx, sqldb.Patient, `
		INSERT INTO runs (sandbox_id, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored, started_at, ended_at,
			review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results, exited, ended, ended_by, kelos_setup)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
		ON CONFLICT (sandbox_id) DO UPDATE SET
			runner = excluded.runner, model = excluded.model, state = excluded.state, exit_code = excluded.exit_code,
			error = excluded.error, branch = excluded.branch, commit_id = excluded.commit_id, telemetry = excluded.telemetry,
			lines = excluded.lines, ignored = excluded.ignored, started_at = excluded.started_at,
			ended_at = COALESCE(excluded.ended_at, runs.ended_at),
			exited = excluded.exited, ended = excluded.ended, ended_by = excluded.ended_by,
			review_outcome = excluded.review_outcome, review_summary = excluded.review_summary,
			review_sha256 = excluded.review_sha256, review_reason = excluded.review_reason, review_file = excluded.review_file,
			outputs = excluded.outputs, results = excluded.results, kelos_setup = excluded.kelos_setup`,
		string(r.Sandbox), r.Runner, r.Model, string(r.State), r.ExitCode, r.Error, r.Branch, r.Commit, tel,
		r.Lines, r.Ignored, timeArg(r.StartedAt), timeArg(r.EndedAt),
		string(r.Review.Outcome), r.Review.Summary, r.Review.SHA256, r.Review.Reason, r.Review.File, outputs, results,
		exited, string(r.Ended), r.EndedBy, int(r.Setup))
	if err != nil {
		return fmt.Errorf("put run of %s: %w", r.Sandbox, err)
	}
	return nil
}

// PutRunOutput writes what a run's output said: its telemetry and line
// counts, and a kelos image's outputs, results and setup.
func (s *Store) PutRunOutput(ctx context.Context, r agentrun.Run) error {
	tel, outputs, results, err := outputArgs(r)
	if err != nil {
		return fmt.Errorf("put the output of the run of %s: %w", r.Sandbox, err)
	}
	if _, err := s.db.Write(ctx, sqldb.Patient, `UPDATE runs SET telemetry = $2, lines = $3, ignored = $4, outputs = $5, results = $6, kelos_setup = $7
		WHERE sandbox_id = $1`,
		string(r.Sandbox), tel, r.Lines, r.Ignored, outputs, results, int(r.Setup)); err != nil {
		return fmt.Errorf("put the output of the run of %s: %w", r.Sandbox, err)
	}
	return nil
}

// outputArgs are what a run's output said, as their columns hold it: the
// telemetry as JSON (the runner package owns its shape), and a kelos
// image's outputs and results as JSON, NULL when it had none.
func outputArgs(r agentrun.Run) (tel string, outputs, results any, err error) {
	b, err := json.Marshal(r.Telemetry)
	if err != nil {
		return "", nil, nil, err
	}
	if outputs, err = jsonArg(r.Outputs, r.Outputs == nil); err != nil {
		return "", nil, nil, fmt.Errorf("outputs: %w", err)
	}
	if results, err = jsonArg(r.Results, r.Results == nil); err != nil {
		return "", nil, nil, fmt.Errorf("results: %w", err)
	}
	return string(b), outputs, results, nil
}

// ClaimRunEnd sets the end of a run that is still running and has none.
func (s *Store) ClaimRunEnd(ctx context.Context, id sandbox.ID, at time.Time) error {
	res, err := s.db.Write(ctx, sqldb.Patient, `UPDATE runs SET ended_at = $2 WHERE sandbox_id = $1 AND state = $3 AND ended_at IS NULL`,
		string(id), timeArg(at), string(agentrun.RunRunning))
	if err != nil {
		return fmt.Errorf("claim the end of the run of %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fault.Errorf(fault.Conflict, "the run of %s is over or has reported its end", id)
	}
	return nil
}

// GetRun reads an agent sandbox's run; fault.NotFound without one.
func (s *Store) GetRun(ctx context.Context, id sandbox.ID) (agentrun.Run, error) {
	r := agentrun.Run{Sandbox: id}
	var state, tel, outcome, endedAs string
	var started, ended sql.NullInt64
	var outputs, results sql.NullString
	var exited, setup int
	err := s.db.QueryRowContext(ctx, `SELECT runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored, started_at, ended_at,
			review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results, exited, ended, ended_by, kelos_setup
		FROM runs WHERE sandbox_id = $1`, string(id)).
		Scan(&r.Runner, &r.Model, &state, &r.ExitCode, &r.Error, &r.Branch, &r.Commit, &tel, &r.Lines, &r.Ignored, &started, &ended,
			&outcome, &r.Review.Summary, &r.Review.SHA256, &r.Review.Reason, &r.Review.File, &outputs, &results, &exited, &endedAs, &r.EndedBy, &setup)
	if errors.Is(err, sql.ErrNoRows) {
		return agentrun.Run{}, fault.Errorf(fault.NotFound, "run of %s", id)
	}
	if err != nil {
		return agentrun.Run{}, fmt.Errorf("get run of %s: %w", id, err)
	}
	r.State, r.Review.Outcome = agentrun.RunState(state), review.Outcome(outcome)
	r.Exited, r.Ended, r.Setup = exited != 0, sandbox.State(endedAs), kelos.Setup(setup)
	r.StartedAt, r.EndedAt = timeOf(started), timeOf(ended)
	if err := json.Unmarshal([]byte(tel), &r.Telemetry); err != nil {
		return agentrun.Run{}, fmt.Errorf("run of %s: telemetry: %w", id, err)
	}
	if err := jsonOf(outputs, &r.Outputs); err != nil {
		return agentrun.Run{}, fmt.Errorf("run of %s: outputs: %w", id, err)
	}
	if err := jsonOf(results, &r.Results); err != nil {
		return agentrun.Run{}, fmt.Errorf("run of %s: results: %w", id, err)
	}
	return r, nil
}
