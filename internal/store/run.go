package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

// PutRun writes a run of an agent sandbox whole, the run r.Seq of
// r.Sandbox (a Seq of 0 is its first: callers that know no sessions).
// Its telemetry is kept as JSON: the runner package owns its shape.
func (s *Store) PutRun(ctx context.Context, r agentrun.Run) error {
	tel, outputs, results, err := outputArgs(r)
	if err != nil {
		return fmt.Errorf("put run %d of %s: %w", runSeq(r), r.Sandbox, err)
	}
	exited := 0
	if r.Exited {
		exited = 1
	}
	_, err = s.db.Write(ctx, sqldb.Patient, `
		INSERT INTO runs (sandbox_id, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored, started_at, ended_at,
			review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results, exited, ended, ended_by, kelos_setup,
			seq, task, onto, review_best)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)
		ON CONFLICT (sandbox_id, seq) DO UPDATE SET
			runner = excluded.runner, model = excluded.model, state = excluded.state, exit_code = excluded.exit_code,
			error = excluded.error, branch = excluded.branch, commit_id = excluded.commit_id, telemetry = excluded.telemetry,
			lines = excluded.lines, ignored = excluded.ignored, started_at = excluded.started_at,
			ended_at = COALESCE(excluded.ended_at, runs.ended_at),
			exited = excluded.exited, ended = excluded.ended, ended_by = excluded.ended_by,
			review_outcome = excluded.review_outcome, review_summary = excluded.review_summary,
			review_sha256 = excluded.review_sha256, review_reason = excluded.review_reason, review_file = excluded.review_file,
			review_best = excluded.review_best,
			outputs = excluded.outputs, results = excluded.results, kelos_setup = excluded.kelos_setup,
			task = excluded.task, onto = excluded.onto`,
		string(r.Sandbox), r.Runner, r.Model, string(r.State), r.ExitCode, r.Error, r.Branch, r.Commit, tel,
		r.Lines, r.Ignored, timeArg(r.StartedAt), timeArg(r.EndedAt),
		string(r.Review.Outcome), r.Review.Summary, r.Review.SHA256, r.Review.Reason, r.Review.File, outputs, results,
		exited, string(r.Ended), r.EndedBy, int(r.Setup), runSeq(r), r.Task, r.Onto, r.Review.Best)
	if err != nil {
		return fmt.Errorf("put run %d of %s: %w", runSeq(r), r.Sandbox, err)
	}
	return nil
}

// runSeq is the number of r in its sandbox: a run from a caller written
// before sessions (Seq 0) is its sandbox's first.
func runSeq(r agentrun.Run) int {
	return max(r.Seq, 1)
}

// PutRunOutput writes what a run's output said: its telemetry and line
// counts, and a kelos image's outputs, results and setup. It writes the
// run r.Seq of r.Sandbox alone (a Seq of 0 is its first).
func (s *Store) PutRunOutput(ctx context.Context, r agentrun.Run) error {
	tel, outputs, results, err := outputArgs(r)
	if err != nil {
		return fmt.Errorf("put the output of run %d of %s: %w", runSeq(r), r.Sandbox, err)
	}
	if _, err := s.db.Write(ctx, sqldb.Patient, `UPDATE runs SET telemetry = $3, lines = $4, ignored = $5, outputs = $6, results = $7, kelos_setup = $8
		WHERE sandbox_id = $1 AND seq = $2`,
		string(r.Sandbox), runSeq(r), tel, r.Lines, r.Ignored, outputs, results, int(r.Setup)); err != nil {
		return fmt.Errorf("put the output of run %d of %s: %w", runSeq(r), r.Sandbox, err)
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

// ClaimRunEnd sets the end of a sandbox's latest run (its highest seq) if
// it is still running and has none; fault.Conflict otherwise. An earlier
// run of a session is over: its end is never claimed again.
func (s *Store) ClaimRunEnd(ctx context.Context, id sandbox.ID, at time.Time) error {
	res, err := s.db.Write(ctx, sqldb.Patient, `UPDATE runs SET ended_at = $2
		WHERE sandbox_id = $1 AND seq = (SELECT MAX(l.seq) FROM runs l WHERE l.sandbox_id = $1)
			AND state = $3 AND ended_at IS NULL`,
		string(id), timeArg(at), string(agentrun.RunRunning))
	if err != nil {
		return fmt.Errorf("claim the end of the run of %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fault.Errorf(fault.Conflict, "the run of %s is over or has reported its end", id)
	}
	return nil
}

// GetRun reads an agent sandbox's latest run (its highest seq);
// fault.NotFound without one.
func (s *Store) GetRun(ctx context.Context, id sandbox.ID) (agentrun.Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE sandbox_id = $1 ORDER BY seq DESC LIMIT 1`,
		string(id)), id)
	if notFound(err) {
		return agentrun.Run{}, fault.Errorf(fault.NotFound, "run of %s", id)
	}
	if err != nil {
		return agentrun.Run{}, fmt.Errorf("get run of %s: %w", id, err)
	}
	return r, nil
}

// ListRuns reads every run of an agent sandbox, by seq: a session's tasks
// in the order it was given them. A sandbox without runs has none (an
// empty list, no error).
func (s *Store) ListRuns(ctx context.Context, id sandbox.ID) ([]agentrun.Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE sandbox_id = $1 ORDER BY seq`, string(id))
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", id, err)
	}
	defer rows.Close()
	runs := []agentrun.Run{}
	for rows.Next() {
		r, err := scanRun(rows, id)
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", id, err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", id, err)
	}
	return runs, nil
}

// runColumns are the columns of runs scanRun reads.
const runColumns = `seq, task, onto, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored,
	started_at, ended_at, review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results,
	exited, ended, ended_by, kelos_setup, review_best`

// scanRun reads runColumns of a run of sandbox id. The row's own error
// (sql.ErrNoRows) is returned as it is.
func scanRun(row rowScanner, id sandbox.ID) (agentrun.Run, error) {
	r := agentrun.Run{Sandbox: id}
	var state, tel, outcome, endedAs string
	var started, ended sql.NullInt64
	var outputs, results sql.NullString
	var exited, setup int
	err := row.Scan(&r.Seq, &r.Task, &r.Onto, &r.Runner, &r.Model, &state, &r.ExitCode, &r.Error, &r.Branch, &r.Commit, &tel,
		&r.Lines, &r.Ignored, &started, &ended, &outcome, &r.Review.Summary, &r.Review.SHA256, &r.Review.Reason, &r.Review.File,
		&outputs, &results, &exited, &endedAs, &r.EndedBy, &setup, &r.Review.Best)
	if err != nil {
		return agentrun.Run{}, err
	}
	r.State, r.Review.Outcome = agentrun.RunState(state), review.Outcome(outcome)
	r.Exited, r.Ended, r.Setup = exited != 0, sandbox.State(endedAs), kelos.Setup(setup)
	r.StartedAt, r.EndedAt = timeOf(started), timeOf(ended)
	if err := json.Unmarshal([]byte(tel), &r.Telemetry); err != nil {
		return agentrun.Run{}, fmt.Errorf("run %d: telemetry: %w", r.Seq, err)
	}
	if err := jsonOf(outputs, &r.Outputs); err != nil {
		return agentrun.Run{}, fmt.Errorf("run %d: outputs: %w", r.Seq, err)
	}
	if err := jsonOf(results, &r.Results); err != nil {
		return agentrun.Run{}, fmt.Errorf("run %d: results: %w", r.Seq, err)
	}
	return r, nil
}
