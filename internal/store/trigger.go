package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
)

var _ trigger.Store = (*Store)(nil)

const triggerColumns = `id, org_id, project_id, name, source, kind, label, command, schedule, next_at, repo, base, class, runner, model, role, task,
	concurrency, daily_tokens, daily_usd, open_pr, session, owner_id, created_at, updated_at`

func scanTrigger(row rowScanner) (trigger.Trigger, error) {
	var t trigger.Trigger
	var source, kind string
	var openPR, session int
	var created, updated, next sql.NullInt64
	err := row.Scan(&t.ID, &t.Org, &t.Project, &t.Name, &source, &kind, &t.On.Label, &t.On.Command, &t.On.Schedule, &next, &t.Repo, &t.Base, &t.Class, &t.Runner,
		&t.Model, &t.Role, &t.Task, &t.Concurrency, &t.DailyTokens, &t.DailyUSD, &openPR, &session, &t.Owner, &created, &updated)
	t.On.Source, t.On.Kind, t.OpenPR, t.Session = event.Source(source), event.Kind(kind), openPR != 0, session != 0
	t.CreatedAt, t.UpdatedAt = timeOf(created), timeOf(updated)
	if next.Valid && next.Int64 != 0 {
		t.NextAt = timeOf(next)
	}
	return t, err
}

// PutTrigger writes a trigger whole, with its audit entry; a project holds
// at most trigger.MaxTriggers.
func (s *Store) PutTrigger(ctx context.Context, t trigger.Trigger, e audit.Event) error {
	return s.withEvents(ctx, sqldb.Bounded, []audit.Event{e}, func(q sqldb.Queryer) error {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM triggers WHERE project_id = $1 AND id <> $2`, t.Project, t.ID).Scan(&n); err != nil {
			return fmt.Errorf("count triggers: %w", err)
		}
		if n >= trigger.MaxTriggers {
			return fault.Errorf(fault.Conflict, "the project has %d triggers, the most it may have", n)
		}
		_, err := q.ExecContext(ctx, `
			INSERT INTO triggers (`+triggerColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)
			ON CONFLICT (id) DO UPDATE SET
				source = excluded.source, kind = excluded.kind, label = excluded.label, command = excluded.command,
				schedule = excluded.schedule, next_at = excluded.next_at,
				repo = excluded.repo, base = excluded.base, class = excluded.class, runner = excluded.runner,
				model = excluded.model, role = excluded.role, task = excluded.task, concurrency = excluded.concurrency,
				daily_tokens = excluded.daily_tokens, daily_usd = excluded.daily_usd, open_pr = excluded.open_pr,
				session = excluded.session, owner_id = excluded.owner_id, updated_at = excluded.updated_at`,
			t.ID, t.Org, t.Project, t.Name, string(t.On.Source), string(t.On.Kind), t.On.Label, t.On.Command, t.On.Schedule, nextArg(t.NextAt), t.Repo, t.Base,
			t.Class, t.Runner, t.Model, t.Role, t.Task, t.Concurrency, t.DailyTokens, t.DailyUSD, boolInt(t.OpenPR), boolInt(t.Session), t.Owner,
			timeArg(t.CreatedAt), timeArg(t.UpdatedAt))
		if constraintOf(err) == uniqueConstraint {
			return fault.Errorf(fault.Conflict, "the project has another trigger named %s", t.Name)
		}
		if err != nil {
			return fmt.Errorf("put trigger %s: %w", t.Name, err)
		}
		return nil
	})
}

// nextArg is a schedule's next firing; 0 for a trigger without one.
func nextArg(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// DueSchedules lists the schedules' triggers due at now, the most overdue
// first.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]trigger.Trigger, error) {
	return s.triggers(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE source = $1 AND next_at > 0 AND next_at <= $2 ORDER BY next_at, id LIMIT $3`,
		string(event.SourceSchedule), now.UnixNano(), limit)
}

// AdvanceSchedule moves a schedule's next firing, if no one moved it.
func (s *Store) AdvanceSchedule(ctx context.Context, id string, from, to time.Time) error {
	return s.db.Autocommit(ctx, sqldb.Bounded, func(q sqldb.Queryer) error {
		res, err := q.ExecContext(ctx, `UPDATE triggers SET next_at = $1 WHERE id = $2 AND next_at = $3`, nextArg(to), id, nextArg(from))
		if err != nil {
			return fmt.Errorf("advance the schedule of %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.Conflict, "the schedule of %s was advanced by another", id)
		}
		return nil
	})
}

// GetTrigger reads a trigger by id.
func (s *Store) GetTrigger(ctx context.Context, id string) (trigger.Trigger, error) {
	t, err := scanTrigger(s.db.QueryRowContext(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE id = $1`, id))
	if notFound(err) {
		return trigger.Trigger{}, fault.Errorf(fault.NotFound, "no such trigger")
	}
	if err != nil {
		return trigger.Trigger{}, fmt.Errorf("trigger %s: %w", id, err)
	}
	return t, nil
}

// TriggerByName reads a project's trigger by name.
func (s *Store) TriggerByName(ctx context.Context, org, project, name string) (trigger.Trigger, error) {
	t, err := scanTrigger(s.db.QueryRowContext(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE org_id = $1 AND project_id = $2 AND name = $3`, org, project, name))
	if notFound(err) {
		return trigger.Trigger{}, fault.Errorf(fault.NotFound, "no trigger named %s in the project", name)
	}
	if err != nil {
		return trigger.Trigger{}, fmt.Errorf("trigger %s: %w", name, err)
	}
	return t, nil
}

// ListTriggers lists a project's triggers by name.
func (s *Store) ListTriggers(ctx context.Context, org, project string) ([]trigger.Trigger, error) {
	return s.triggers(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE org_id = $1 AND project_id = $2 ORDER BY name`, org, project)
}

// TriggersOn lists the triggers on source for repo, in every organisation.
func (s *Store) TriggersOn(ctx context.Context, source event.Source, repo string) ([]trigger.Trigger, error) {
	return s.triggers(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE source = $1 AND repo = $2 ORDER BY id`, string(source), repo)
}

func (s *Store) triggers(ctx context.Context, query string, args ...any) ([]trigger.Trigger, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	defer rows.Close()
	var out []trigger.Trigger
	for rows.Next() {
		t, err := scanTrigger(rows)
		if err != nil {
			return nil, fmt.Errorf("list triggers: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteTrigger deletes a trigger and its deliveries, with its audit entry.
func (s *Store) DeleteTrigger(ctx context.Context, id string, e audit.Event) error {
	return s.withEvents(ctx, sqldb.Bounded, []audit.Event{e}, func(q sqldb.Queryer) error {
		if _, err := q.ExecContext(ctx, `DELETE FROM trigger_deliveries WHERE trigger_id = $1`, id); err != nil {
			return fmt.Errorf("delete trigger %s: %w", id, err)
		}
		res, err := q.ExecContext(ctx, `DELETE FROM triggers WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("delete trigger %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "no such trigger")
		}
		return nil
	})
}

// AddDelivery records a delivery once (fault.Conflict for one recorded),
// with the outcome admit gives it on the count of the trigger's runs live
// or on their way, counted in the same transaction: on SQLite under the
// database's write lock, on PostgreSQL under the trigger's own lock.
func (s *Store) AddDelivery(ctx context.Context, d trigger.Delivery, admit func(live int) (trigger.Outcome, string)) (trigger.Delivery, error) {
	err := s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		if err := s.db.Serialize(ctx, tx, "trigger:"+d.Trigger); err != nil {
			return err
		}
		var live int
		err := tx.QueryRowContext(ctx, `
			SELECT COUNT(*) FROM trigger_deliveries d LEFT JOIN sandboxes s ON s.id = d.sandbox_id
			WHERE d.trigger_id = $1 AND ((d.outcome = '' AND d.at > $2) OR (d.outcome = $3 AND s.live = 1))`,
			d.Trigger, d.At.Add(-trigger.InFlight).UnixNano(), string(trigger.Started)).Scan(&live)
		if err != nil {
			return fmt.Errorf("count the runs of %s: %w", d.Trigger, err)
		}
		d.Outcome, d.Reason = admit(live)
		_, err = tx.ExecContext(ctx, `
			INSERT INTO trigger_deliveries (trigger_id, delivery_id, at, outcome, reason, sandbox_id, thread_kind, thread_number, url)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			d.Trigger, d.ID, timeArg(d.At), string(d.Outcome), d.Reason, string(d.Sandbox), string(d.Thread.Kind), d.Thread.Number, d.URL)
		switch constraintOf(err) {
		case uniqueConstraint:
			return fault.Errorf(fault.Conflict, "delivery %s was handed to the trigger before", d.ID)
		case foreignKeyConstraint:
			return fault.Errorf(fault.NotFound, "no such trigger")
		}
		if err != nil {
			return fmt.Errorf("add delivery %s: %w", d.ID, err)
		}
		return nil
	})
	return d, err
}

// FinishDelivery writes a delivery's outcome.
func (s *Store) FinishDelivery(ctx context.Context, d trigger.Delivery) error {
	return s.db.Autocommit(ctx, sqldb.Bounded, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `UPDATE trigger_deliveries SET outcome = $1, reason = $2, sandbox_id = $3 WHERE trigger_id = $4 AND delivery_id = $5`,
			string(d.Outcome), d.Reason, string(d.Sandbox), d.Trigger, d.ID)
		if err != nil {
			return fmt.Errorf("finish delivery %s: %w", d.ID, err)
		}
		return nil
	})
}

// Deliveries lists a trigger's deliveries since at, newest first.
func (s *Store) Deliveries(ctx context.Context, trig string, since time.Time, limit int) ([]trigger.Delivery, error) {
	from := int64(0)
	if !since.IsZero() {
		from = since.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT trigger_id, delivery_id, at, outcome, reason, sandbox_id, thread_kind, thread_number, url
		FROM trigger_deliveries WHERE trigger_id = $1 AND at >= $2 ORDER BY at DESC, delivery_id LIMIT $3`,
		trig, from, limit)
	if err != nil {
		return nil, fmt.Errorf("deliveries of %s: %w", trig, err)
	}
	defer rows.Close()
	var out []trigger.Delivery
	for rows.Next() {
		var d trigger.Delivery
		var at sql.NullInt64
		var outcome, sb, kind string
		if err := rows.Scan(&d.Trigger, &d.ID, &at, &outcome, &d.Reason, &sb, &kind, &d.Thread.Number, &d.URL); err != nil {
			return nil, fmt.Errorf("deliveries of %s: %w", trig, err)
		}
		d.At, d.Outcome, d.Sandbox, d.Thread.Kind = timeOf(at), trigger.Outcome(outcome), sandbox.ID(sb), forge.ThreadKind(kind)
		out = append(out, d)
	}
	return out, rows.Err()
}

// LiveRuns lists a trigger's runs whose sandboxes are live.
func (s *Store) LiveRuns(ctx context.Context, trig string) ([]sandbox.ID, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT d.sandbox_id FROM trigger_deliveries d JOIN sandboxes s ON s.id = d.sandbox_id
		WHERE d.trigger_id = $1 AND s.live = 1 ORDER BY d.at`, trig)
	if err != nil {
		return nil, fmt.Errorf("live runs of %s: %w", trig, err)
	}
	defer rows.Close()
	var out []sandbox.ID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("live runs of %s: %w", trig, err)
		}
		out = append(out, sandbox.ID(id))
	}
	return out, rows.Err()
}

const reportColumns = `sandbox_id, seq, org_id, repo, base, trigger_id, thread_kind, thread_number, open_pr, comment, state,
	change_number, change_url, change_existed, comments, error, attempts, next_at`

// withPrefix is columns, each with prefix.
func withPrefix(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

func scanReport(row rowScanner) (trigger.Report, error) {
	var r trigger.Report
	var id, kind, state, comments string
	var openPR, comment, existed int
	var next sql.NullInt64
	err := row.Scan(&id, &r.Seq, &r.Org, &r.Repo, &r.Base, &r.Trigger, &kind, &r.Thread.Number, &openPR, &comment, &state,
		&r.Change.Number, &r.Change.URL, &existed, &comments, &r.Error, &r.Attempts, &next)
	if err != nil {
		return trigger.Report{}, err
	}
	r.Sandbox, r.Thread.Kind, r.State = sandbox.ID(id), forge.ThreadKind(kind), trigger.ReportState(state)
	r.OpenPR, r.Comment, r.Change.Existed = openPR != 0, comment != 0, existed != 0
	if next.Valid && next.Int64 != 0 {
		// 0 is a report never tried.
		r.NextAt = timeOf(next)
	}
	if err := json.Unmarshal([]byte(comments), &r.Comments); err != nil {
		return trigger.Report{}, fmt.Errorf("report of %s: comments: %w", id, err)
	}
	return r, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reportSeq is the run r is for: 1 when r says none.
func reportSeq(r trigger.Report) int {
	return max(r.Seq, 1)
}

// AddReport records what a run owes its forge: the run r.Seq (0 the
// first) of its sandbox.
func (s *Store) AddReport(ctx context.Context, r trigger.Report) error {
	return s.db.Autocommit(ctx, sqldb.Bounded, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `INSERT INTO run_reports (`+reportColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, '', 0, '[]', '', 0, 0)`,
			string(r.Sandbox), reportSeq(r), r.Org, r.Repo, r.Base, r.Trigger, string(r.Thread.Kind), r.Thread.Number,
			boolInt(r.OpenPR), boolInt(r.Comment), string(trigger.ReportPending))
		switch constraintOf(err) {
		case uniqueConstraint:
			return fault.Errorf(fault.Conflict, "run %d of sandbox %s owes a report already", reportSeq(r), r.Sandbox)
		case foreignKeyConstraint:
			return fault.Errorf(fault.NotFound, "no sandbox %s", r.Sandbox)
		}
		if err != nil {
			return fmt.Errorf("add report of %s: %w", r.Sandbox, err)
		}
		return nil
	})
}

// GetReport reads the report of a sandbox's latest run that owes one.
func (s *Store) GetReport(ctx context.Context, id sandbox.ID) (trigger.Report, error) {
	r, err := scanReport(s.db.QueryRowContext(ctx, `SELECT `+reportColumns+` FROM run_reports WHERE sandbox_id = $1
		ORDER BY seq DESC LIMIT 1`, string(id)))
	if notFound(err) {
		return trigger.Report{}, fault.Errorf(fault.NotFound, "sandbox %s owes no report", id)
	}
	if err != nil {
		return trigger.Report{}, fmt.Errorf("report of %s: %w", id, err)
	}
	return r, nil
}

// DueReports lists pending reports due at now whose runs are over: their
// sandbox has ended, or is a session suspended until its next task (a
// session's run ends with its task; its sandbox stays).
func (s *Store) DueReports(ctx context.Context, now time.Time, limit int) ([]trigger.Report, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT `+withPrefix("r.", reportColumns)+` FROM run_reports r JOIN sandboxes s ON s.id = r.sandbox_id
		WHERE r.state = $1 AND r.next_at <= $2 AND (s.live = 0 OR (s.session = 1 AND s.state = $3))
		ORDER BY r.next_at, r.sandbox_id, r.seq LIMIT $4`,
		string(trigger.ReportPending), now.UnixNano(), string(sandbox.StateSuspended), limit)
	if err != nil {
		return nil, fmt.Errorf("due reports: %w", err)
	}
	defer rows.Close()
	var out []trigger.Report
	for rows.Next() {
		r, err := scanReport(rows)
		if err != nil {
			return nil, fmt.Errorf("due reports: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SessionOfChange reads the first report of the live session whose change
// on repo is number: the session following that pull request. Should two
// live sessions hold it (the later found it open), the later one follows
// it, for its branch has the newer work.
func (s *Store) SessionOfChange(ctx context.Context, repo string, number int) (trigger.Report, error) {
	if number <= 0 {
		// A report holds 0 until it has a change.
		return trigger.Report{}, fault.Errorf(fault.NotFound, "no session follows change %d of %s", number, repo)
	}
	r, err := scanReport(s.db.QueryRowContext(ctx, `
		SELECT `+withPrefix("r.", reportColumns)+` FROM run_reports r JOIN sandboxes s ON s.id = r.sandbox_id
		WHERE r.repo = $1 AND r.change_number = $2 AND r.seq = 1 AND s.live = 1 AND s.session = 1
		ORDER BY s.created_at DESC, s.id DESC LIMIT 1`, repo, number))
	if notFound(err) {
		return trigger.Report{}, fault.Errorf(fault.NotFound, "no session follows change %d of %s", number, repo)
	}
	if err != nil {
		return trigger.Report{}, fmt.Errorf("the session of change %d of %s: %w", number, repo, err)
	}
	return r, nil
}

// ClaimReport takes a report for one attempt, unless another did.
func (s *Store) ClaimReport(ctx context.Context, r trigger.Report, next time.Time) error {
	return s.db.Autocommit(ctx, sqldb.Bounded, func(q sqldb.Queryer) error {
		res, err := q.ExecContext(ctx, `UPDATE run_reports SET attempts = attempts + 1, next_at = $1
			WHERE sandbox_id = $2 AND seq = $3 AND attempts = $4 AND state = $5`,
			next.UnixNano(), string(r.Sandbox), reportSeq(r), r.Attempts, string(trigger.ReportPending))
		if err != nil {
			return fmt.Errorf("claim report of %s: %w", r.Sandbox, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.Conflict, "the report of run %d of %s was taken", reportSeq(r), r.Sandbox)
		}
		return nil
	})
}

// SaveReport writes the progress of a report, its run's alone.
func (s *Store) SaveReport(ctx context.Context, r trigger.Report) error {
	comments, err := json.Marshal(r.Comments)
	if err != nil {
		return err
	}
	if r.Comments == nil {
		comments = []byte("[]")
	}
	return s.db.Autocommit(ctx, sqldb.Bounded, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `UPDATE run_reports SET state = $1, change_number = $2, change_url = $3, change_existed = $4,
			comments = $5, error = $6 WHERE sandbox_id = $7 AND seq = $8`,
			string(r.State), r.Change.Number, r.Change.URL, boolInt(r.Change.Existed), string(comments), r.Error, string(r.Sandbox), reportSeq(r))
		if err != nil {
			return fmt.Errorf("save report of %s: %w", r.Sandbox, err)
		}
		return nil
	})
}
