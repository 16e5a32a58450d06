package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

// sandboxArgs returns sb's values for insertSandboxSQL and updateSandboxSQL:
// the columns of sandboxes as the statements below name them, id to
// compare (egress, forked_from and compare last: an update writes none of
// them, and puts the state it expects in their place).
func sandboxArgs(sb sandbox.Sandbox) ([]any, error) {
	sshKeys, err := jsonArg(sb.SSHKeys, sb.SSHKeys == nil)
	if err != nil {
		return nil, fmt.Errorf("ssh_keys: %w", err)
	}
	env, err := jsonArg(sb.Env, sb.Env == nil)
	if err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	setup, err := jsonArg(sb.SetupCommand, sb.SetupCommand == nil)
	if err != nil {
		return nil, fmt.Errorf("setup_command: %w", err)
	}
	compare, err := jsonArg(sb.Compare, sb.Compare == nil)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	live := 0
	if sb.Live() {
		live = 1
	}
	return []any{
		string(sb.ID), sb.Name, sb.Org, sb.Project, sb.Owner, string(sb.Purpose), sb.Class, sb.Image,
		string(sb.Isolation), sb.Runtime, int64(sb.CPU), int64(sb.Memory), int64(sb.Disk), string(sb.State),
		sb.Reason, sb.Repo, sb.Branch, sb.Task, sb.Runner, sshKeys, env, sb.KeyID,
		timeArg(sb.CreatedAt), timeArg(sb.ExpiresAt), timeArg(sb.EndedAt), live, string(sb.GitMode),
		string(sb.Role), string(sb.Contract), setup, boolArg(sb.FromPool), sb.Model, boolArg(sb.Session), int64(sb.Checkpoint), sb.Egress, string(sb.ForkedFrom), compare,
	}, nil
}

// insertSandboxSQL writes a new row from sandboxArgs.
const insertSandboxSQL = `
	INSERT INTO sandboxes (
		id, name, org_id, project_id, owner_id, purpose, class, image, isolation, runtime, cpu,
		memory, disk, state, reason, repo, branch, task, runner, ssh_keys, env, key_id, created_at,
		expires_at, ended_at, live, git_mode, role, contract, setup_command, from_pool, model, session, checkpoint, egress, forked_from, compare)
	VALUES (
		$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
		$21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37)`

// updateSandboxSQL rewrites a row from sandboxArgs, but its egress, whom
// it was forked from and what it compares (a create's alone), if it is
// still in the state given as the last argument. A row's egress is
// written at its create and changed only by FreezeEgress: an update made
// from a copy read before a freeze must not open the sandbox up again.
const updateSandboxSQL = `
	UPDATE sandboxes SET
		name = $2, org_id = $3, project_id = $4, owner_id = $5, purpose = $6, class = $7,
		image = $8, isolation = $9, runtime = $10, cpu = $11, memory = $12, disk = $13,
		state = $14, reason = $15, repo = $16, branch = $17, task = $18, runner = $19,
		ssh_keys = $20, env = $21, key_id = $22, created_at = $23, expires_at = $24,
		ended_at = $25, live = $26, git_mode = $27, role = $28, contract = $29, setup_command = $30,
		from_pool = $31, model = $32, session = $33, checkpoint = $34
	WHERE id = $1 AND state = $35`

// sandboxColumns read a sandbox with its running time from the segments:
// the total of the closed ones, the start of the open one, the start of
// the first one, and the end of the latest closed one (segments never
// overlap, so the latest ends last).
const sandboxColumns = `
	s.id, s.name, s.org_id, s.project_id, s.owner_id, s.purpose, s.class, s.image, s.isolation,
		s.runtime, s.cpu, s.memory, s.disk, s.state, s.reason, s.repo, s.branch, s.task, s.runner,
		s.ssh_keys, s.env, s.key_id, s.created_at, s.expires_at, s.ended_at, s.git_mode, s.role,
		s.contract, s.setup_command, s.from_pool, s.model, s.session, s.checkpoint, s.egress, s.forked_from, s.compare, s.active_at,
		(SELECT CAST(COALESCE(SUM(g.ended_at - g.started_at), 0) AS BIGINT) FROM segments g
			WHERE g.sandbox_id = s.id AND g.ended_at IS NOT NULL),
		(SELECT g.started_at FROM segments g WHERE g.sandbox_id = s.id AND g.ended_at IS NULL),
		(SELECT MIN(g.started_at) FROM segments g WHERE g.sandbox_id = s.id),
		(SELECT MAX(g.ended_at) FROM segments g WHERE g.sandbox_id = s.id)`

// selectSandbox reads sandboxColumns of sandboxes s.
const selectSandbox = `SELECT ` + sandboxColumns + ` FROM sandboxes s`

// scanSandbox reads sandboxColumns, then extra.
func scanSandbox(row rowScanner, extra ...any) (sandbox.Sandbox, error) {
	var (
		sb                             sandbox.Sandbox
		id, purpose, isolation, state  string
		forkedFrom                     string
		gitMode, role, contract        string
		cpu, memory, disk, ran         int64
		checkpoint                     int64
		sshKeys, env, setup, compare   sql.NullString
		created, expires, ended, since sql.NullInt64
		first, active, lastRan         sql.NullInt64
		fromPool, session              int
	)
	err := row.Scan(append([]any{&id, &sb.Name, &sb.Org, &sb.Project, &sb.Owner, &purpose, &sb.Class, &sb.Image, &isolation,
		&sb.Runtime, &cpu, &memory, &disk, &state, &sb.Reason, &sb.Repo, &sb.Branch, &sb.Task, &sb.Runner,
		&sshKeys, &env, &sb.KeyID, &created, &expires, &ended, &gitMode, &role, &contract, &setup, &fromPool, &sb.Model, &session, &checkpoint, &sb.Egress, &forkedFrom, &compare, &active, &ran, &since, &first, &lastRan},
		extra...)...)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	sb.ID, sb.Purpose, sb.Isolation, sb.State = sandbox.ID(id), sandbox.Purpose(purpose), sandbox.Tier(isolation), sandbox.State(state)
	sb.GitMode, sb.Role, sb.Contract = sandbox.GitMode(gitMode), sandbox.Role(role), sandbox.Contract(contract)
	sb.CPU, sb.Memory, sb.Disk = quantity.Millicores(cpu), quantity.Bytes(memory), quantity.Bytes(disk)
	sb.CreatedAt, sb.ExpiresAt, sb.EndedAt = timeOf(created), timeOf(expires), timeOf(ended)
	sb.Ran, sb.RunningSince, sb.FirstRan, sb.LastRanUntil = time.Duration(ran), timeOf(since), timeOf(first), timeOf(lastRan)
	sb.ActiveAt = timeOf(active)
	sb.FromPool, sb.Session = fromPool != 0, session != 0
	sb.Checkpoint, sb.ForkedFrom = quantity.Bytes(checkpoint), sandbox.ID(forkedFrom)
	if err := jsonOf(compare, &sb.Compare); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %s: compare: %w", id, err)
	}
	if err := jsonOf(sshKeys, &sb.SSHKeys); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %s: ssh_keys: %w", id, err)
	}
	if err := jsonOf(env, &sb.Env); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %s: env: %w", id, err)
	}
	if err := jsonOf(setup, &sb.SetupCommand); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %s: setup_command: %w", id, err)
	}
	return sb, nil
}

// CreateSandbox inserts sb and its key in one transaction. It first refuses
// a name one of the owner's live sandboxes has (fault.Conflict), then
// counts the live sandboxes of sb's organisation and project and hands the
// counts to admit; admit's error is returned as it is and nothing is
// written. A sandbox created running opens its running segment at its
// CreatedAt. events are appended to the audit log in the same
// transaction.
func (s *Store) CreateSandbox(ctx context.Context, sb sandbox.Sandbox, key account.Key, admit func(sandbox.Live) error, events ...audit.Event) error {
	args, err := sandboxArgs(sb)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.ID, err)
	}
	if s.admitting != nil {
		select {
		case s.admitting <- struct{}{}:
			defer func() { <-s.admitting }()
		case <-ctx.Done():
			return fmt.Errorf("create sandbox %s: %w", sb.ID, ctx.Err())
		}
	}
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		// The counts below must not change before commit (SPEC S7: N
		// concurrent creates never exceed a quota). On SQLite this
		// transaction already holds the database's write lock
		// (_txlock=immediate); on PostgreSQL creates in one organisation
		// (whose counts include its projects') take turns here, whichever
		// replica they reach.
		if err := s.db.Serialize(ctx, tx, "admit:"+sb.Org); err != nil {
			return fmt.Errorf("create sandbox %s: %w", sb.ID, err)
		}
		if sb.Live() {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM sandboxes WHERE owner_id = $1 AND name = $2 AND live = 1`,
				sb.Owner, sb.Name).Scan(&one)
			switch {
			case err == nil:
				return nameTaken(sb.Name)
			case !notFound(err):
				return fmt.Errorf("create sandbox %s: %w", sb.ID, err)
			}
		}
		var live sandbox.Live
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE org_id = $1 AND live = 1`, sb.Org).Scan(&live.Org); err != nil {
			return fmt.Errorf("create sandbox %s: count live sandboxes: %w", sb.ID, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE project_id = $1 AND live = 1`, sb.Project).Scan(&live.Project); err != nil {
			return fmt.Errorf("create sandbox %s: count live sandboxes: %w", sb.ID, err)
		}
		if admit != nil {
			if err := admit(live); err != nil {
				return err
			}
		}
		if err := insertSandboxKey(ctx, tx, key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, insertSandboxSQL, args...)
		switch constraintOf(err) {
		case uniqueConstraint:
			// The name was checked above, so this is most likely the id.
			return fault.Errorf(fault.Conflict, "sandbox %s or its name %q", sb.ID, sb.Name)
		case foreignKeyConstraint:
			return fault.Errorf(fault.NotFound, "sandbox %s: its organisation %s, project %s or owner %s", sb.ID, sb.Org, sb.Project, sb.Owner)
		}
		if err != nil {
			return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
		}
		if sb.State == sandbox.StateRunning {
			if err := openSegment(ctx, tx, sb.ID, sb.CreatedAt); err != nil {
				return err
			}
		}
		return insertAudits(ctx, tx, events)
	})
}

func nameTaken(name string) error {
	return fault.Errorf(fault.Conflict, "the name %q is taken by a live sandbox of the same owner", name)
}

// GetSandbox returns a sandbox by id, with its running time.
func (s *Store) GetSandbox(ctx context.Context, id sandbox.ID) (sandbox.Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, selectSandbox+` WHERE s.id = $1`, string(id)))
	switch {
	case notFound(err):
		return sandbox.Sandbox{}, fault.Errorf(fault.NotFound, "sandbox %s", id)
	case err != nil:
		return sandbox.Sandbox{}, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	return sb, nil
}

// ListSandboxes returns every sandbox f selects, newest first. Without
// f.Ended only live ones are returned.
func (s *Store) ListSandboxes(ctx context.Context, f sandbox.Filter) ([]sandbox.Sandbox, error) {
	sbs, _, err := s.PageSandboxes(ctx, f, paging.Request{})
	return sbs, err
}

// PageSandboxes returns a page of the sandboxes f selects, newest first
// (created_at, then seq), and the key of its last one when more follow.
// It reads one row past the page, never more.
func (s *Store) PageSandboxes(ctx context.Context, f sandbox.Filter, pg paging.Request) ([]sandbox.Sandbox, *paging.Key, error) {
	q, args := pageSandboxesQuery(f, pg)
	return listPage(ctx, s.db, "list sandboxes", q, args, pg, func(row rowScanner) (sandbox.Sandbox, paging.Key, error) {
		var seq int64
		sb, err := scanSandbox(row, &seq)
		return sb, paging.Key{At: sb.CreatedAt.UnixNano(), Seq: seq}, err
	})
}

// pageSandboxesQuery is PageSandboxes' query and its arguments. A live
// list's page is read from an index in its order (sandboxes_live_created
// for every live sandbox, sandboxes_created for an organisation's), so it
// reads one page and one row however many rows there are: without the
// first, SQLite sorted every live row (10,000: about 10 ms of a 12 ms
// list, its p99 over 50 ms under load).
func pageSandboxesQuery(f sandbox.Filter, pg paging.Request) (string, []any) {
	var (
		where []string
		args  []any
	)
	eq := func(column, value string) {
		if value != "" {
			args = append(args, value)
			where = append(where, fmt.Sprintf("s.%s = $%d", column, len(args)))
		}
	}
	eq("org_id", f.Org)
	eq("owner_id", f.Owner)
	eq("name", f.Name)
	eq("class", f.Class)
	eq("purpose", string(f.Purpose))
	eq("state", string(f.State))
	if f.Search != "" {
		args = append(args, "%"+likeEscape(strings.ToLower(f.Search))+"%")
		where = append(where, fmt.Sprintf(`(LOWER(s.name) LIKE $%[1]d ESCAPE '\' OR LOWER(s.repo) LIKE $%[1]d ESCAPE '\')`, len(args)))
	}
	if !f.CreatedSince.IsZero() {
		args = append(args, timeArg(f.CreatedSince))
		where = append(where, fmt.Sprintf("s.created_at >= $%d", len(args)))
	}
	if !f.Ended {
		where = append(where, "s.live = 1")
	}
	cond, tail := keyset(newestFirst, "s.", pg, &args)
	if cond != "" {
		where = append(where, cond)
	}
	from := ` FROM sandboxes s`
	if len(where) > 0 {
		from += " WHERE " + strings.Join(where, " AND ")
	}
	q := `SELECT ` + sandboxColumns + `, s.seq` + from + tail
	if pg.Fetch() > 0 {
		// The page's rows are chosen first, by their keys alone, so the
		// running time's subqueries run for those rows only (SQLite
		// computes them for every row it sorts).
		q = `SELECT ` + sandboxColumns + `, s.seq FROM (SELECT s.seq` + from + tail + `) page JOIN sandboxes s ON s.seq = page.seq` +
			` ORDER BY s.created_at DESC, s.seq DESC`
	}
	return q, args
}

// likeEscape escapes LIKE's wildcards in s, so a search matches them as
// they are.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

// SaveActivity moves a sandbox's active_at forward to at; an earlier at,
// or a sandbox that is gone, changes nothing.
func (s *Store) SaveActivity(ctx context.Context, id sandbox.ID, at time.Time) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `
		UPDATE sandboxes SET active_at = $2
		WHERE id = $1 AND (active_at IS NULL OR active_at < $2)`, string(id), timeArg(at))
	if err != nil {
		return fmt.Errorf("save activity of sandbox %s: %w", id, err)
	}
	return nil
}

// FreezeEgress ends a sandbox's learning (egress learn): its egress
// becomes to, if it still learns. It reports whether it did; a sandbox
// frozen already, or that never learnt, keeps what it has.
func (s *Store) FreezeEgress(ctx context.Context, id sandbox.ID, to string) (bool, error) {
	res, err := s.db.Write(ctx, sqldb.Patient, `UPDATE sandboxes SET egress = $2 WHERE id = $1 AND egress = 'learn'`, string(id), to)
	if err != nil {
		return false, fmt.Errorf("freeze the egress of sandbox %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("freeze the egress of sandbox %s: %w", id, err)
	}
	return n == 1, nil
}

// UpdateSandbox writes u.Sandbox if its row is still in state u.From: a
// row that moved on is fault.Conflict, one that does not exist
// fault.NotFound. In the same transaction it opens a running segment
// at u.At when the sandbox becomes running, closes it at u.At when it stops
// running, and revokes the key the row named before the update (u.RevokeKey,
// or u.NewKey, which it then stores).
func (s *Store) UpdateSandbox(ctx context.Context, u sandbox.Update) error {
	sb := u.Sandbox
	args, err := sandboxArgs(sb)
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
	}
	return s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		// The key read here is the one revoked below: no other update of
		// this sandbox may come between.
		if err := s.db.Serialize(ctx, tx, "sandbox:"+string(sb.ID)); err != nil {
			return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
		}
		var oldKey string
		err := tx.QueryRowContext(ctx, `SELECT key_id FROM sandboxes WHERE id = $1`, string(sb.ID)).Scan(&oldKey)
		switch {
		case notFound(err):
			return fault.Errorf(fault.NotFound, "sandbox %s", sb.ID)
		case err != nil:
			return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
		}
		res, err := tx.ExecContext(ctx, updateSandboxSQL, append(args[:len(args)-3:len(args)-3], string(u.From))...)
		switch {
		case constraintOf(err) == uniqueConstraint:
			return nameTaken(sb.Name)
		case err != nil:
			return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
		}
		if n == 0 {
			// The row exists (read above in this transaction), so its
			// state moved on.
			return fault.Errorf(fault.Conflict, "sandbox %s is no longer %s", sb.ID, u.From)
		}

		wasRunning, isRunning := u.From == sandbox.StateRunning, sb.State == sandbox.StateRunning
		if isRunning && !wasRunning {
			if err := openSegment(ctx, tx, sb.ID, u.At); err != nil {
				return err
			}
		}
		if wasRunning && !isRunning {
			if err := closeSegment(ctx, tx, sb.ID, u.At); err != nil {
				return err
			}
		}

		if (u.RevokeKey || u.NewKey != nil) && oldKey != "" {
			if err := revokeKey(ctx, tx, oldKey, u.At); err != nil {
				return fmt.Errorf("update sandbox %s: revoke key %s: %w", sb.ID, oldKey, err)
			}
		}
		if u.NewKey != nil {
			if err := insertSandboxKey(ctx, tx, *u.NewKey); err != nil {
				return err
			}
		}
		if err := insertAudits(ctx, tx, u.Audit); err != nil {
			return fmt.Errorf("update sandbox %s: %w", sb.ID, err)
		}
		return nil
	})
}

// insertSandboxKey writes a sandbox's key, with sandbox's errors.
func insertSandboxKey(ctx context.Context, q sqldb.Queryer, k account.Key) error {
	err := execInsertKey(ctx, q, k)
	switch constraintOf(err) {
	case uniqueConstraint:
		return fault.Errorf(fault.Conflict, "key %s", k.ID)
	case foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "key %s: user %s", k.ID, k.User)
	}
	if err != nil {
		return fmt.Errorf("insert key %s: %w", k.ID, err)
	}
	return nil
}

// openSegment starts a running segment at at.
func openSegment(ctx context.Context, q sqldb.Queryer, id sandbox.ID, at time.Time) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO segments (sandbox_id, started_at) VALUES ($1, $2)`, string(id), timeArg(at)); err != nil {
		return fmt.Errorf("open running segment of %s: %w", id, err)
	}
	return nil
}

// closeSegment ends the open running segment at at, but never before it
// began: a start that finishes after the sandbox's expiry opens a segment
// later than the expiry the service clamps the close to.
func closeSegment(ctx context.Context, q sqldb.Queryer, id sandbox.ID, at time.Time) error {
	_, err := q.ExecContext(ctx, `
		UPDATE segments SET ended_at = CASE WHEN started_at > $1 THEN started_at ELSE $1 END
		WHERE sandbox_id = $2 AND ended_at IS NULL`, timeArg(at), string(id))
	if err != nil {
		return fmt.Errorf("close running segment of %s: %w", id, err)
	}
	return nil
}

// endedBefore selects the sandboxes that ended before $1.
const endedBefore = `SELECT id FROM sandboxes WHERE live = 0 AND ended_at < $1`

// DeleteEnded deletes, in one transaction, the sandboxes that ended before
// before, with their running segments, their keys and the records of
// their model calls before that month (SPEC S8: ended sandboxes are
// deleted after BERTH_USAGE_RETENTION), and returns their ids. A live sandbox is never deleted, however old. The audit log keeps
// its entries.
func (s *Store) DeleteEnded(ctx context.Context, before time.Time) ([]sandbox.ID, error) {
	var ids []sandbox.ID
	err := s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		ids = nil
		rows, err := tx.QueryContext(ctx, endedBefore+` ORDER BY id`, timeArg(before))
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, sandbox.ID(id))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		// Their model calls go too, but never one of the month a budget
		// is counting (the month of before, in UTC, and later).
		month := time.Date(before.UTC().Year(), before.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
		if _, err := tx.ExecContext(ctx, `DELETE FROM inference_usage WHERE sandbox_id IN (`+endedBefore+`) AND at < $2`,
			timeArg(before), timeArg(month)); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM segments WHERE sandbox_id IN (` + endedBefore + `)`,
			`DELETE FROM run_logs WHERE sandbox_id IN (` + endedBefore + `)`,
			`DELETE FROM bootstrap_tokens WHERE sandbox_id IN (` + endedBefore + `)`,
			`DELETE FROM keys WHERE sandbox_id <> '' AND sandbox_id IN (` + endedBefore + `)`,
			`DELETE FROM sandboxes WHERE live = 0 AND ended_at < $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, timeArg(before)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete sandboxes ended before %s: %w", before.Format(time.RFC3339), err)
	}
	return ids, nil
}

// CountSandboxes counts the live sandboxes by state and class, for the
// metrics read at each scrape.
func (s *Store) CountSandboxes(ctx context.Context) ([]sandbox.Count, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT state, class, COUNT(*) FROM sandboxes WHERE live = 1
		GROUP BY state, class ORDER BY state, class`)
	if err != nil {
		return nil, fmt.Errorf("count sandboxes: %w", err)
	}
	defer rows.Close()
	var out []sandbox.Count
	for rows.Next() {
		var c sandbox.Count
		var state string
		if err := rows.Scan(&state, &c.Class, &c.N); err != nil {
			return nil, fmt.Errorf("count sandboxes: %w", err)
		}
		c.State = sandbox.State(state)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count sandboxes: %w", err)
	}
	return out, nil
}
