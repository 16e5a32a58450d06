package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

var _ inference.Store = (*Store)(nil)

// GetInferenceSettings returns the inference settings of org (project "")
// or of one of its projects as written; never written is the zero
// Settings.
func (s *Store) GetInferenceSettings(ctx context.Context, org, project string) (inference.Settings, error) {
	var (
		models        sql.NullString
		budget        sql.NullFloat64
		requests, per sql.NullInt64
		out           inference.Settings
	)
	err := s.db.QueryRowContext(ctx, `
		SELECT models, budget_usd, rate_requests, rate_period, system_prompt
		FROM inference_settings WHERE org_id = $1 AND project_id = $2`, org, project).
		Scan(&models, &budget, &requests, &per, &out.SystemPrompt)
	switch {
	case notFound(err):
		return inference.Settings{}, nil
	case err != nil:
		return inference.Settings{}, fmt.Errorf("get inference settings of %s: %w", scope(org, project), err)
	}
	if err := jsonOf(models, &out.Models); err != nil {
		return inference.Settings{}, fmt.Errorf("get inference settings of %s: models: %w", scope(org, project), err)
	}
	if budget.Valid {
		out.BudgetUSD = &budget.Float64
	}
	if requests.Valid && per.Valid {
		out.Rate = &inference.Rate{Requests: int(requests.Int64), Per: time.Duration(per.Int64)}
	}
	return out, nil
}

// PutInferenceSettings writes the inference settings of org (project "")
// or of one of its projects whole. An organisation that does not exist is
// fault.NotFound.
func (s *Store) PutInferenceSettings(ctx context.Context, org, project string, set inference.Settings) error {
	models, err := jsonArg(set.Models, set.Models == nil)
	if err != nil {
		return fmt.Errorf("put inference settings of %s: models: %w", scope(org, project), err)
	}
	var budget, requests, per any
	if set.BudgetUSD != nil {
		budget = *set.BudgetUSD
	}
	if set.Rate != nil {
		requests, per = int64(set.Rate.Requests), int64(set.Rate.Per)
	}
	_, err = s.db.Write(ctx, sqldb.Bounded, `
		INSERT INTO inference_settings (org_id, project_id, models, budget_usd, rate_requests, rate_period, system_prompt)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (org_id, project_id) DO UPDATE SET
			models = excluded.models,
			budget_usd = excluded.budget_usd,
			rate_requests = excluded.rate_requests,
			rate_period = excluded.rate_period,
			system_prompt = excluded.system_prompt`,
		org, project, models, budget, requests, per, set.SystemPrompt)
	switch {
	case constraintOf(err) == foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "inference settings of %s: organisation %s", scope(org, project), org)
	case err != nil:
		return fmt.Errorf("put inference settings of %s: %w", scope(org, project), err)
	}
	return nil
}

// RecordInference appends one metered request. It returns once the
// record is committed; records of concurrent requests are committed
// together (see recordBatch).
func (s *Store) RecordInference(ctx context.Context, r inference.Record) error {
	if err := s.inference.record(r, func(rs []inference.Record) error { return s.insertInference(ctx, rs) }); err != nil {
		return fmt.Errorf("record inference: %w", err)
	}
	return nil
}

// insertInferenceSQL appends one record to inference_usage.
const insertInferenceSQL = `
	INSERT INTO inference_usage (at, org_id, project_id, user_id, key_id, sandbox_id, session, provider, model, dialect,
		status, input, cache_read, cache_write, output, reasoning, cost_usd, metered)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`

// insertInference writes records in one transaction, with what they take
// off their replicas' leases.
func (s *Store) insertInference(ctx context.Context, rs []inference.Record) error {
	insert, err := s.db.Prepared(ctx, insertInferenceSQL)
	if err != nil {
		return err
	}
	if len(rs) == 1 && rs[0].Lease.Replica == "" {
		// One record and no lease to release (the usual batch but in a
		// burst): its INSERT is a transaction of its own, without a BEGIN
		// and a COMMIT through the driver; each answer's end waits for it.
		return s.db.Autocommit(ctx, sqldb.Patient, func(sqldb.Queryer) error {
			_, err := insert.ExecContext(ctx, inferenceArgs(rs[0])...)
			return err
		})
	}
	return s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		st := tx.StmtContext(ctx, insert)
		defer st.Close()
		for _, r := range rs {
			if _, err := st.ExecContext(ctx, inferenceArgs(r)...); err != nil {
				return err
			}
		}
		return releaseLeases(ctx, tx, rs)
	})
}

// inferenceArgs are insertInferenceSQL's arguments for r.
func inferenceArgs(r inference.Record) []any {
	metered := 0
	if r.Metered {
		metered = 1
	}
	u := r.Usage
	return []any{timeArg(r.At), r.Org, r.Project, r.User, r.Key, r.Sandbox, r.Session, r.Provider, r.Model, string(r.Dialect),
		r.Status, u.Input, u.CacheRead, u.CacheWrite, u.Output, u.Reasoning, r.CostUSD, metered}
}

// recordBatch is a group commit for the records of model requests: the
// caller that finds no commit under way writes every record waiting in
// one transaction while the others wait for it, and hands the next batch
// to the first that arrived meanwhile. One commit (one fsync) serves many
// requests, and concurrent writers never meet SQLite's busy wait, which
// sleeps. It needs no goroutine of its own.
type recordBatch struct {
	mu      sync.Mutex
	queue   []*pendingRecord
	writing bool
}

type pendingRecord struct {
	r    inference.Record
	done chan error // the batch's outcome, or errLead
}

// errLead tells a waiting caller to write the next batch.
var errLead = errors.New("lead the next batch")

func (b *recordBatch) record(r inference.Record, write func([]inference.Record) error) error {
	me := &pendingRecord{r: r, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, me)
	if b.writing {
		b.mu.Unlock()
		if err := <-me.done; err != errLead {
			return err
		}
		b.mu.Lock()
	}
	b.writing = true
	batch := b.queue
	b.queue = nil
	b.mu.Unlock()
	rs := make([]inference.Record, len(batch))
	for i, p := range batch {
		rs[i] = p.r
	}
	err := write(rs)
	for _, p := range batch {
		if p != me {
			p.done <- err
		}
	}
	b.mu.Lock()
	if len(b.queue) > 0 {
		b.queue[0].done <- errLead
	} else {
		b.writing = false
	}
	b.mu.Unlock()
	return err
}

// InferenceSpend sums the cost charged to org (project "": all its
// projects) or one of its projects since a time.
func (s *Store) InferenceSpend(ctx context.Context, org, project string, since time.Time) (float64, error) {
	q := `SELECT COALESCE(SUM(cost_usd), 0) FROM inference_usage WHERE org_id = $1 AND at >= $2`
	args := []any{org, since.UnixNano()}
	if project != "" {
		q += ` AND project_id = $3`
		args = append(args, project)
	}
	var spent float64
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&spent); err != nil {
		return 0, fmt.Errorf("inference spend of %s: %w", scope(org, project), err)
	}
	return spent, nil
}

// SessionUsage sums the requests of one session.
func (s *Store) SessionUsage(ctx context.Context, session string) (inference.SessionUsage, error) {
	var out inference.SessionUsage
	if session == "" {
		return out, nil
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT model, COUNT(*), SUM(input), SUM(cache_read), SUM(cache_write), SUM(output), SUM(reasoning),
			SUM(cost_usd), SUM(1 - metered), MIN(seq)
		FROM inference_usage WHERE session = $1 GROUP BY model ORDER BY MIN(seq)`, session)
	if err != nil {
		return out, fmt.Errorf("usage of session %s: %w", session, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			model               string
			n, in, cr, cw, o, r int64
			unmetered, first    int64
			cost                float64
		)
		if err := rows.Scan(&model, &n, &in, &cr, &cw, &o, &r, &cost, &unmetered, &first); err != nil {
			return out, fmt.Errorf("usage of session %s: %w", session, err)
		}
		out.Requests += int(n)
		out.Usage.Input += in
		out.Usage.CacheRead += cr
		out.Usage.CacheWrite += cw
		out.Usage.Output += o
		out.Usage.Reasoning += r
		out.CostUSD += cost
		out.Unmetered += int(unmetered)
		out.Models = append(out.Models, model)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("usage of session %s: %w", session, err)
	}
	return out, nil
}

// MeteredOfSandbox sums what the gateway metered of one sandbox's model
// calls within span (a session's run; the zero Span: all): everything its
// keys asked, whichever session the CLI named (or none: not every CLI can
// send the session header).
func (s *Store) MeteredOfSandbox(ctx context.Context, id sandbox.ID, span agentrun.Span) (agentrun.Metered, error) {
	var m agentrun.Metered
	rows, err := s.db.QueryContext(ctx, `
		SELECT model, COUNT(*), SUM(input), SUM(cache_read), SUM(cache_write), SUM(output), SUM(reasoning), SUM(cost_usd),
			SUM(1 - metered), SUM(CASE WHEN metered = 0 THEN cost_usd ELSE 0 END)
		FROM inference_usage WHERE sandbox_id = $1 AND at >= COALESCE($2, at) AND at <= COALESCE($3, at)
		GROUP BY model ORDER BY MIN(seq)`, string(id), timeArg(span.From), timeArg(span.To))
	if err != nil {
		return m, fmt.Errorf("metered usage of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			model               string
			n, unmetered        int
			in, cr, cw, o, r    int64
			cost, unmeteredCost float64
		)
		if err := rows.Scan(&model, &n, &in, &cr, &cw, &o, &r, &cost, &unmetered, &unmeteredCost); err != nil {
			return m, fmt.Errorf("metered usage of %s: %w", id, err)
		}
		m.Requests += n
		m.Usage.Input += in
		m.Usage.CacheRead += cr
		m.Usage.CacheWrite += cw
		m.Usage.Output += o
		m.Usage.Reasoning += r
		m.CostUSD += cost
		m.Unmetered += unmetered
		m.UnmeteredCostUSD += unmeteredCost
		m.Models = append(m.Models, model)
	}
	return m, rows.Err()
}

// MeteredCallsOfSandbox lists one sandbox's metered model calls one by
// one, oldest first, at most limit of them: what a run's difference from
// the gateway's count is explained from.
func (s *Store) MeteredCallsOfSandbox(ctx context.Context, id sandbox.ID, span agentrun.Span, limit int) ([]agentrun.MeteredCall, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT model, status, input, cache_read, cache_write, output, reasoning, cost_usd, metered
		FROM inference_usage WHERE sandbox_id = $1 AND at >= COALESCE($3, at) AND at <= COALESCE($4, at)
		ORDER BY seq LIMIT $2`, string(id), limit, timeArg(span.From), timeArg(span.To))
	if err != nil {
		return nil, fmt.Errorf("metered calls of %s: %w", id, err)
	}
	defer rows.Close()
	var out []agentrun.MeteredCall
	for rows.Next() {
		var (
			c       agentrun.MeteredCall
			metered int
		)
		if err := rows.Scan(&c.Model, &c.Status, &c.Usage.Input, &c.Usage.CacheRead, &c.Usage.CacheWrite, &c.Usage.Output,
			&c.Usage.Reasoning, &c.CostUSD, &metered); err != nil {
			return nil, fmt.Errorf("metered calls of %s: %w", id, err)
		}
		c.Metered = metered != 0
		out = append(out, c)
	}
	return out, rows.Err()
}

// MeteredBySandbox sums what the gateway metered of each sandbox's model
// calls (its key's, whatever the session) since a time, in an
// organisation ("" for every one): the usage report's tokens and cost.
func (s *Store) MeteredBySandbox(ctx context.Context, org string, since time.Time) (map[sandbox.ID]agentrun.Metered, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT sandbox_id, COUNT(*), SUM(input), SUM(cache_read), SUM(cache_write), SUM(output), SUM(reasoning), SUM(cost_usd),
			SUM(1 - metered), SUM(CASE WHEN metered = 0 THEN cost_usd ELSE 0 END)
		FROM inference_usage WHERE sandbox_id <> '' AND ($1 = '' OR org_id = $1) AND at >= $2
		GROUP BY sandbox_id`, org, timeArg(since))
	if err != nil {
		return nil, fmt.Errorf("metered usage by sandbox: %w", err)
	}
	defer rows.Close()
	out := map[sandbox.ID]agentrun.Metered{}
	for rows.Next() {
		var (
			id   string
			m    agentrun.Metered
			cost float64
		)
		if err := rows.Scan(&id, &m.Requests, &m.Usage.Input, &m.Usage.CacheRead, &m.Usage.CacheWrite, &m.Usage.Output, &m.Usage.Reasoning, &cost,
			&m.Unmetered, &m.UnmeteredCostUSD); err != nil {
			return nil, fmt.Errorf("metered usage by sandbox: %w", err)
		}
		m.CostUSD = cost
		out[sandbox.ID(id)] = m
	}
	return out, rows.Err()
}
