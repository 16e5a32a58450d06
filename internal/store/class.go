package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/store/sqldb"
)

const classColumns = `name, description, image, isolation, cpu, memory, disk, default_ttl, max_ttl, warm, purposes, git, contract, setup_command, runner, ports, egress, session_idle`

func scanClass(row rowScanner) (class.Class, error) {
	var (
		c                  class.Class
		isolation, git     string
		contract           string
		cpu, memory, disk  int64
		defaultTTL, maxTTL int64
		sessionIdle        int64
		purposes, setup    sql.NullString
		ports              sql.NullString
		egressWritten      string
	)
	if err := row.Scan(&c.Name, &c.Description, &c.Image, &isolation, &cpu, &memory, &disk,
		&defaultTTL, &maxTTL, &c.Warm, &purposes, &git, &contract, &setup, &c.Runner, &ports, &egressWritten, &sessionIdle); err != nil {
		return class.Class{}, err
	}
	if egressWritten != "" { // "": by purpose
		p, err := egress.Parse(egressWritten)
		if err != nil {
			return class.Class{}, fmt.Errorf("class %s: egress: %w", c.Name, err)
		}
		c.Egress = p
	}
	c.Isolation, c.Git, c.Contract = class.Tier(isolation), class.GitMode(git), class.Contract(contract)
	c.CPU, c.Memory, c.Disk = quantity.Millicores(cpu), quantity.Bytes(memory), quantity.Bytes(disk)
	c.DefaultTTL, c.MaxTTL, c.SessionIdle = time.Duration(defaultTTL), time.Duration(maxTTL), time.Duration(sessionIdle)
	if err := jsonOf(purposes, &c.Purposes); err != nil {
		return class.Class{}, fmt.Errorf("class %s: purposes: %w", c.Name, err)
	}
	if err := jsonOf(setup, &c.SetupCommand); err != nil {
		return class.Class{}, fmt.Errorf("class %s: setup_command: %w", c.Name, err)
	}
	if err := jsonOf(ports, &c.Ports); err != nil {
		return class.Class{}, fmt.Errorf("class %s: ports: %w", c.Name, err)
	}
	return c, nil
}

// ListClasses returns a page of an organisation's classes by name, and
// the key of its last one when more follow.
func (s *Store) ListClasses(ctx context.Context, org string, pg paging.Request) ([]class.Class, *paging.Key, error) {
	args := []any{org}
	cond, tail := keyset(byName, "", pg, &args)
	q := `SELECT ` + classColumns + ` FROM classes WHERE org_id = $1`
	if cond != "" {
		q += " AND " + cond
	}
	return listPage(ctx, s.db, "list classes", q+tail, args, pg, func(row rowScanner) (class.Class, paging.Key, error) {
		c, err := scanClass(row)
		return c, paging.Key{Name: c.Name}, err
	})
}

// GetClass returns one of an organisation's classes; one it does not have
// is fault.NotFound.
func (s *Store) GetClass(ctx context.Context, org, name string) (class.Class, error) {
	c, err := scanClass(s.db.QueryRowContext(ctx, `SELECT `+classColumns+` FROM classes WHERE org_id = $1 AND name = $2`, org, name))
	switch {
	case notFound(err):
		return class.Class{}, fault.Errorf(fault.NotFound, "class %s", name)
	case err != nil:
		return class.Class{}, fmt.Errorf("get class %s: %w", name, err)
	}
	return c, nil
}

// PutClasses upserts every class in one transaction and returns, in input
// order, the names of those that did not exist before. An organisation that
// does not exist is fault.NotFound. events are recorded with them.
func (s *Store) PutClasses(ctx context.Context, org string, classes []class.Class, events ...audit.Event) ([]string, error) {
	var created []string
	err := s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		created = nil
		// What was created is read before the upserts write it.
		if err := s.db.Serialize(ctx, tx, "classes:"+org); err != nil {
			return fmt.Errorf("put classes: %w", err)
		}
		for _, c := range classes {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM classes WHERE org_id = $1 AND name = $2`, org, c.Name).Scan(&one)
			switch {
			case notFound(err):
				created = append(created, c.Name)
			case err != nil:
				return fmt.Errorf("put class %s: %w", c.Name, err)
			}
			if err := upsertClass(ctx, tx, org, c); err != nil {
				return err
			}
		}
		return insertAudits(ctx, tx, events)
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

func upsertClass(ctx context.Context, tx *sql.Tx, org string, c class.Class) error {
	purposes, err := jsonArg(c.Purposes, c.Purposes == nil)
	if err != nil {
		return fmt.Errorf("put class %s: purposes: %w", c.Name, err)
	}
	setup, err := jsonArg(c.SetupCommand, c.SetupCommand == nil)
	if err != nil {
		return fmt.Errorf("put class %s: setup_command: %w", c.Name, err)
	}
	ports, err := jsonArg(c.Ports, c.Ports == nil)
	if err != nil {
		return fmt.Errorf("put class %s: ports: %w", c.Name, err)
	}
	egressWritten := ""
	if c.Egress.Mode != "" {
		egressWritten = c.Egress.String()
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO classes (org_id, name, description, image, isolation, cpu, memory, disk, default_ttl, max_ttl, warm, purposes, git,
			contract, setup_command, runner, ports, egress, session_idle)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
		ON CONFLICT (org_id, name) DO UPDATE SET
			description = excluded.description,
			image = excluded.image,
			isolation = excluded.isolation,
			cpu = excluded.cpu,
			memory = excluded.memory,
			disk = excluded.disk,
			default_ttl = excluded.default_ttl,
			max_ttl = excluded.max_ttl,
			warm = excluded.warm,
			purposes = excluded.purposes,
			git = excluded.git,
			contract = excluded.contract,
			setup_command = excluded.setup_command,
			runner = excluded.runner,
			ports = excluded.ports,
			egress = excluded.egress,
			session_idle = excluded.session_idle`,
		org, c.Name, c.Description, c.Image, string(c.Isolation), int64(c.CPU), int64(c.Memory), int64(c.Disk),
		int64(c.DefaultTTL), int64(c.MaxTTL), c.Warm, purposes, string(c.Git), string(c.Contract), setup, c.Runner, ports, egressWritten,
		int64(c.SessionIdle))
	switch {
	case constraintOf(err) == foreignKeyConstraint:
		return fault.Errorf(fault.NotFound, "class %s: organisation %s", c.Name, org)
	case err != nil:
		return fmt.Errorf("put class %s: %w", c.Name, err)
	}
	return nil
}

// DeleteClass removes one of an organisation's classes; one it does not
// have is fault.NotFound. Sandboxes made from it keep their copy.
// events are recorded with it.
func (s *Store) DeleteClass(ctx context.Context, org, name string, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM classes WHERE org_id = $1 AND name = $2`, org, name)
		if err != nil {
			return fmt.Errorf("delete class %s: %w", name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete class %s: %w", name, err)
		}
		if n == 0 {
			return fault.Errorf(fault.NotFound, "class %s", name)
		}
		return insertAudits(ctx, tx, events)
	})
}
