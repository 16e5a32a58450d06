package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/store/sqldb"
)

// Bootstrap writes the first organisation, its project, an operator and
// the operator's key in one transaction, with events, what it records. It
// is fault.Conflict when any organisation exists.
func (s *Store) Bootstrap(ctx context.Context, org account.Organisation, project account.Project, user account.User, key account.Key, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		// Two replicas bootstrapping at once must not both find none.
		if err := s.db.Serialize(ctx, tx, "bootstrap"); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM organisations`).Scan(&n); err != nil {
			return fmt.Errorf("count organisations: %w", err)
		}
		if n > 0 {
			return fault.Errorf(fault.Conflict, "the deployment already has %d organisations", n)
		}
		if err := insertOrganisation(ctx, tx, org); err != nil {
			return err
		}
		if err := insertProject(ctx, tx, project); err != nil {
			return err
		}
		if err := insertUser(ctx, tx, user); err != nil {
			return err
		}
		if err := insertKey(ctx, tx, key); err != nil {
			return err
		}
		return insertAudits(ctx, tx, events)
	})
}

// CreateOrganisation writes an organisation and its first project in one
// transaction, with events. A name taken is fault.Conflict.
func (s *Store) CreateOrganisation(ctx context.Context, org account.Organisation, project account.Project, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		if err := insertOrganisation(ctx, tx, org); err != nil {
			return err
		}
		if err := insertProject(ctx, tx, project); err != nil {
			return err
		}
		return insertAudits(ctx, tx, events)
	})
}

func insertOrganisation(ctx context.Context, q sqldb.Queryer, org account.Organisation) error {
	_, err := q.ExecContext(ctx, `INSERT INTO organisations (id, name, created_at) VALUES ($1, $2, $3)`,
		org.ID, org.Name, timeArg(org.CreatedAt))
	switch {
	case constraintOf(err) == uniqueConstraint:
		return fault.Errorf(fault.Conflict, "organisation %q", org.Name)
	case err != nil:
		return fmt.Errorf("insert organisation %s: %w", org.Name, err)
	}
	return nil
}

// GetOrganisation finds an organisation by id or name.
func (s *Store) GetOrganisation(ctx context.Context, ref string) (account.Organisation, error) {
	var o account.Organisation
	var created sql.NullInt64
	// An id match wins over a name match, should a name ever look like an id.
	err := s.db.QueryRowContext(ctx, `
		SELECT id, name, created_at FROM organisations
		WHERE id = $1 OR name = $1
		ORDER BY CASE WHEN id = $1 THEN 0 ELSE 1 END
		LIMIT 1`, ref).Scan(&o.ID, &o.Name, &created)
	switch {
	case notFound(err):
		return account.Organisation{}, fault.Errorf(fault.NotFound, "organisation %s", ref)
	case err != nil:
		return account.Organisation{}, fmt.Errorf("get organisation %s: %w", ref, err)
	}
	o.CreatedAt = timeOf(created)
	return o, nil
}

// ListOrganisations returns a page of the organisations, oldest first,
// and the key of its last one when more follow.
func (s *Store) ListOrganisations(ctx context.Context, pg paging.Request) ([]account.Organisation, *paging.Key, error) {
	var args []any
	cond, tail := keyset(oldestFirst, "", pg, &args)
	q := `SELECT id, name, created_at, seq FROM organisations`
	if cond != "" {
		q += " WHERE " + cond
	}
	return listPage(ctx, s.db, "list organisations", q+tail, args, pg, func(row rowScanner) (account.Organisation, paging.Key, error) {
		var o account.Organisation
		var created sql.NullInt64
		var seq int64
		if err := row.Scan(&o.ID, &o.Name, &created, &seq); err != nil {
			return o, paging.Key{}, err
		}
		o.CreatedAt = timeOf(created)
		return o, paging.Key{At: created.Int64, Seq: seq}, nil
	})
}

// CreateProject writes a project, with events. A name its organisation
// already uses is fault.Conflict; an organisation that does not
// exist is fault.NotFound.
func (s *Store) CreateProject(ctx context.Context, p account.Project, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Bounded, events, func(q sqldb.Queryer) error { return insertProject(ctx, q, p) })
}

func insertProject(ctx context.Context, q sqldb.Queryer, p account.Project) error {
	_, err := q.ExecContext(ctx, `INSERT INTO projects (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)`,
		p.ID, p.Org, p.Name, timeArg(p.CreatedAt))
	switch constraintOf(err) {
	case uniqueConstraint:
		return fault.Errorf(fault.Conflict, "project %q", p.Name)
	case foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "project %q: organisation %s", p.Name, p.Org)
	}
	if err != nil {
		return fmt.Errorf("insert project %s: %w", p.Name, err)
	}
	return nil
}

const projectColumns = `id, org_id, name, created_at`

// scanProject reads projectColumns, then extra.
func scanProject(row rowScanner, extra ...any) (account.Project, error) {
	var p account.Project
	var created sql.NullInt64
	if err := row.Scan(append([]any{&p.ID, &p.Org, &p.Name, &created}, extra...)...); err != nil {
		return account.Project{}, err
	}
	p.CreatedAt = timeOf(created)
	return p, nil
}

// GetProject finds one of org's projects by id or name.
func (s *Store) GetProject(ctx context.Context, org, ref string) (account.Project, error) {
	p, err := scanProject(s.db.QueryRowContext(ctx, `
		SELECT `+projectColumns+` FROM projects
		WHERE org_id = $1 AND (id = $2 OR name = $2)
		ORDER BY CASE WHEN id = $2 THEN 0 ELSE 1 END
		LIMIT 1`, org, ref))
	switch {
	case notFound(err):
		return account.Project{}, fault.Errorf(fault.NotFound, "project %s", ref)
	case err != nil:
		return account.Project{}, fmt.Errorf("get project %s: %w", ref, err)
	}
	return p, nil
}

// ListProjects returns a page of org's projects, oldest (the default)
// first, and the key of its last one when more follow.
func (s *Store) ListProjects(ctx context.Context, org string, pg paging.Request) ([]account.Project, *paging.Key, error) {
	return listOldestFirst(ctx, s.db, "list projects", projectColumns, "projects", "org_id", org, pg, scanProject,
		func(x account.Project) time.Time { return x.CreatedAt })
}

// CreateUser writes a user, with events. A name its organisation already uses is
// fault.Conflict; an organisation that does not exist is
// fault.NotFound.
func (s *Store) CreateUser(ctx context.Context, u account.User, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Bounded, events, func(q sqldb.Queryer) error { return insertUser(ctx, q, u) })
}

func insertUser(ctx context.Context, q sqldb.Queryer, u account.User) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO users (id, org_id, name, email, role, created_at, project_id, disabled, issuer, subject, disabled_by_idp)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		u.ID, u.Org, u.Name, u.Email, string(u.Role), timeArg(u.CreatedAt), nullString(u.Project),
		boolArg(u.Disabled), nullString(u.Issuer), nullString(u.Subject), boolArg(u.DisabledByIdP))
	switch constraintOf(err) {
	case uniqueConstraint:
		if u.Subject != "" {
			return fault.Errorf(fault.Conflict, "user %q: its id or name is taken, or %s at %s is another user of the organisation", u.Name, u.Subject, u.Issuer)
		}
		return fault.Errorf(fault.Conflict, "user %q", u.Name)
	case foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "user %q: organisation %s", u.Name, u.Org)
	}
	if err != nil {
		return fmt.Errorf("insert user %s: %w", u.Name, err)
	}
	return nil
}

const userColumns = `id, org_id, name, email, role, created_at, disabled, project_id, issuer, subject, disabled_by_idp`

// scanUser reads userColumns, then extra.
func scanUser(row rowScanner, extra ...any) (account.User, error) {
	var u account.User
	var role string
	var created sql.NullInt64
	var disabled, byIdP int
	var project, issuer, subject sql.NullString
	if err := row.Scan(append([]any{&u.ID, &u.Org, &u.Name, &u.Email, &role, &created, &disabled, &project,
		&issuer, &subject, &byIdP}, extra...)...); err != nil {
		return account.User{}, err
	}
	u.Disabled, u.DisabledByIdP = disabled != 0, byIdP != 0
	u.Project, u.Issuer, u.Subject = project.String, issuer.String, subject.String
	u.Role = account.Role(role)
	u.CreatedAt = timeOf(created)
	return u, nil
}

// GetUser finds a user by id.
func (s *Store) GetUser(ctx context.Context, id string) (account.User, error) {
	u, err := scanUser(s.queryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	switch {
	case notFound(err):
		return account.User{}, fault.Errorf(fault.NotFound, "user %s", id)
	case err != nil:
		return account.User{}, fmt.Errorf("get user %s: %w", id, err)
	}
	return u, nil
}

// FindUser finds one of org's users by id or name.
func (s *Store) FindUser(ctx context.Context, org, ref string) (account.User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, `
		SELECT `+userColumns+` FROM users
		WHERE org_id = $1 AND (id = $2 OR name = $2)
		ORDER BY CASE WHEN id = $2 THEN 0 ELSE 1 END
		LIMIT 1`, org, ref))
	switch {
	case notFound(err):
		return account.User{}, fault.Errorf(fault.NotFound, "user %s", ref)
	case err != nil:
		return account.User{}, fmt.Errorf("find user %s: %w", ref, err)
	}
	return u, nil
}

// ListUsers returns a page of org's users, oldest first, and the key of
// its last one when more follow.
func (s *Store) ListUsers(ctx context.Context, org string, pg paging.Request) ([]account.User, *paging.Key, error) {
	return listOldestFirst(ctx, s.db, "list users", userColumns, "users", "org_id", org, pg, scanUser,
		func(x account.User) time.Time { return x.CreatedAt })
}

// CreateKey writes a key, and events with it in one transaction. An id
// already used is fault.Conflict; a user who does not exist is
// fault.NotFound.
func (s *Store) CreateKey(ctx context.Context, k account.Key, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Bounded, events, func(q sqldb.Queryer) error { return insertKey(ctx, q, k) })
}

// insertKey writes k, with account's errors.
func insertKey(ctx context.Context, q sqldb.Queryer, k account.Key) error {
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

// execInsertKey writes k and returns the driver's error as it is, for the
// caller to map to its own package's errors.
func execInsertKey(ctx context.Context, q sqldb.Queryer, k account.Key) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO keys (id, user_id, name, sandbox_id, project_id, hash, created_at, expires_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		k.ID, k.User, k.Name, k.Sandbox, k.Project, k.Hash,
		timeArg(k.CreatedAt), timeArg(k.ExpiresAt), timeArg(k.RevokedAt))
	return err
}

const keyColumns = `id, user_id, name, sandbox_id, project_id, hash, created_at, expires_at, revoked_at`

// scanKey reads keyColumns, then extra.
func scanKey(row rowScanner, extra ...any) (account.Key, error) {
	var k account.Key
	var created, expires, revoked sql.NullInt64
	if err := row.Scan(append([]any{&k.ID, &k.User, &k.Name, &k.Sandbox, &k.Project, &k.Hash, &created, &expires, &revoked}, extra...)...); err != nil {
		return account.Key{}, err
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt = timeOf(created), timeOf(expires), timeOf(revoked)
	return k, nil
}

// GetKey finds a key by id.
func (s *Store) GetKey(ctx context.Context, id string) (account.Key, error) {
	k, err := scanKey(s.queryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id))
	switch {
	case notFound(err):
		return account.Key{}, fault.Errorf(fault.NotFound, "key %s", id)
	case err != nil:
		return account.Key{}, fmt.Errorf("get key %s: %w", id, err)
	}
	return k, nil
}

// ListKeys returns a page of a user's keys, oldest first, revoked and
// expired ones included, and the key of its last one when more follow.
func (s *Store) ListKeys(ctx context.Context, user string, pg paging.Request) ([]account.Key, *paging.Key, error) {
	return listOldestFirst(ctx, s.db, "list keys", keyColumns, "keys", "user_id", user, pg, scanKey,
		func(x account.Key) time.Time { return x.CreatedAt })
}

// RevokeKey marks a key revoked at at, unless it already is (the first
// revocation time stands), and records events in the same transaction
// when it did. A key that does not exist is fault.NotFound.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM keys WHERE id = $1`, id).Scan(&one)
		switch {
		case notFound(err):
			return fault.Errorf(fault.NotFound, "key %s", id)
		case err != nil:
			return fmt.Errorf("revoke key %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, timeArg(at), id)
		if err != nil {
			return fmt.Errorf("revoke key %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // revoked already: nothing changed, nothing to record
		}
		return insertAudits(ctx, tx, events)
	})
}

// revokeKey sets revoked_at on key id unless it is already set.
func revokeKey(ctx context.Context, q sqldb.Queryer, id string, at time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, timeArg(at), id)
	return err
}

// SetUserProject sets the project a user's new sandboxes and keys land in
// ("": the organisation's oldest), with its audit events; fault.NotFound
// if the user is unknown.
func (s *Store) SetUserProject(ctx context.Context, id, project string, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Patient, events, func(q sqldb.Queryer) error {
		res, err := q.ExecContext(ctx, `UPDATE users SET project_id = $2 WHERE id = $1`, id, nullString(project))
		if err != nil {
			return fmt.Errorf("set the project of user %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "user %s", id)
		}
		return nil
	})
}

// SetUserDisabled disables or enables a user, with its audit events in
// the same transaction; fault.NotFound if unknown. Disabling records
// byIdP (the identity provider no longer lets them in), which a later
// sign-in the provider allows undoes; enabling clears it.
func (s *Store) SetUserDisabled(ctx context.Context, id string, disabled, byIdP bool, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Patient, events, func(q sqldb.Queryer) error {
		res, err := q.ExecContext(ctx, `UPDATE users SET disabled = $2, disabled_by_idp = $3 WHERE id = $1`,
			id, boolArg(disabled), boolArg(disabled && byIdP))
		if err != nil {
			return fmt.Errorf("disable user %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "user %s", id)
		}
		return nil
	})
}
