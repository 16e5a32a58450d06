package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store/sqldb"
)

// The device grants of berth login --sso --device (sso.Device).

const deviceColumns = `id, user_code, key_name, org, interval_ns, created_at, expires_at, polled_at, user_id, denied, session_issuer, session_subject, session_refresh`

func scanDevice(row rowScanner) (sso.Device, error) {
	var (
		d                        sso.Device
		interval                 int64
		created, expires, polled sql.NullInt64
		user                     sql.NullString
	)
	err := row.Scan(&d.ID, &d.UserCode, &d.KeyName, &d.Org, &interval, &created, &expires, &polled, &user, &d.Denied,
		&d.Session.Issuer, &d.Session.Subject, &d.Session.Refresh)
	if err != nil {
		return sso.Device{}, err
	}
	d.Interval = time.Duration(interval)
	d.CreatedAt, d.ExpiresAt, d.PolledAt = timeOf(created), timeOf(expires), timeOf(polled)
	d.User = user.String
	return d, nil
}

// CreateSSODevice writes a device grant under way. A device or user code
// already used is fault.Conflict. It starts something new on a public
// route: a busy database answers fault.Busy.
func (s *Store) CreateSSODevice(ctx context.Context, d sso.Device) error {
	_, err := s.db.Write(ctx, sqldb.Bounded, `
		INSERT INTO sso_devices (id, user_code, key_name, org, interval_ns, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		d.ID, d.UserCode, d.KeyName, d.Org, int64(d.Interval), timeArg(d.CreatedAt), timeArg(d.ExpiresAt))
	if constraintOf(err) == uniqueConstraint {
		return fault.Errorf(fault.Conflict, "device grant %s", d.ID)
	}
	if err != nil {
		return fmt.Errorf("write device grant: %w", err)
	}
	return nil
}

// SSODeviceByUserCode finds the device grant whose user code hashes to
// userCode, undecided and live at at; fault.NotFound otherwise.
func (s *Store) SSODeviceByUserCode(ctx context.Context, userCode string, at time.Time) (sso.Device, error) {
	d, err := scanDevice(s.queryRow(ctx, `SELECT `+deviceColumns+` FROM sso_devices
		WHERE user_code = $1 AND expires_at > $2 AND user_id IS NULL AND denied = ''`, userCode, timeArg(at)))
	switch {
	case notFound(err):
		return sso.Device{}, fault.Errorf(fault.NotFound, "device code")
	case err != nil:
		return sso.Device{}, fmt.Errorf("find device grant: %w", err)
	}
	return d, nil
}

// DecideSSODevice records who signed in for device id, or why not, if it
// is still undecided and live at at; fault.NotFound otherwise.
func (s *Store) DecideSSODevice(ctx context.Context, id, user, denied string, ss sso.Session, at time.Time) error {
	res, err := s.db.Write(ctx, sqldb.Patient, `
		UPDATE sso_devices SET user_id = $2, denied = $3, session_issuer = $4, session_subject = $5, session_refresh = $6
		WHERE id = $1 AND expires_at > $7 AND user_id IS NULL AND denied = ''`,
		id, nullString(user), denied, ss.Issuer, ss.Subject, ss.Refresh, timeArg(at))
	if constraintOf(err) == foreignKeyConstraint {
		return fault.Errorf(fault.NotFound, "device grant: user %s", user)
	}
	if err != nil {
		return fmt.Errorf("decide device grant: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fault.Errorf(fault.NotFound, "device grant (decided or expired)")
	}
	return nil
}

// PollSSODevice returns device id as it was before this poll, and records
// the poll at at, in one transaction.
func (s *Store) PollSSODevice(ctx context.Context, id string, at time.Time) (sso.Device, error) {
	var d sso.Device
	err := s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		var err error
		if d, err = scanDevice(tx.QueryRowContext(ctx, `SELECT `+deviceColumns+` FROM sso_devices WHERE id = $1`, id)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sso_devices SET polled_at = $2 WHERE id = $1`, id, timeArg(at))
		return err
	})
	switch {
	case notFound(err):
		return sso.Device{}, fault.Errorf(fault.NotFound, "device code")
	case err != nil:
		return sso.Device{}, fmt.Errorf("poll device grant: %w", err)
	}
	return d, nil
}

// TakeSSODevice deletes and returns device id once somebody signed in for
// it, in one statement: of two takes at once one alone has it.
func (s *Store) TakeSSODevice(ctx context.Context, id string) (sso.Device, error) {
	var d sso.Device
	err := s.db.Autocommit(ctx, sqldb.Patient, func(q sqldb.Queryer) error {
		var err error
		d, err = scanDevice(q.QueryRowContext(ctx, `DELETE FROM sso_devices WHERE id = $1 AND user_id IS NOT NULL RETURNING `+deviceColumns, id))
		return err
	})
	switch {
	case notFound(err):
		return sso.Device{}, fault.Errorf(fault.NotFound, "device grant (not signed in for, or taken)")
	case err != nil:
		return sso.Device{}, fmt.Errorf("take device grant: %w", err)
	}
	return d, nil
}
