package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/store/sqldb"
)

// CreateInvitation writes inv and marks the user's earlier unused
// invitations replaced, in one transaction, with events. Unless inv is a
// recovery invitation, a user who has ever had a key is
// fault.Conflict; a user who does not exist is fault.NotFound.
func (s *Store) CreateInvitation(ctx context.Context, inv account.Invitation, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		// An invitation issued and one redeemed at once, for the same
		// user, must not both pass the check of the other (PostgreSQL; on
		// SQLite the transaction holds the write lock).
		if err := s.db.Serialize(ctx, tx, "invitations:"+inv.User); err != nil {
			return err
		}
		if !inv.Recovery {
			enrolled, err := hasKey(ctx, tx, inv.User)
			if err != nil {
				return fmt.Errorf("create invitation: %w", err)
			}
			if enrolled {
				return fault.Errorf(fault.Conflict, "user %s has had a key", inv.User)
			}
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE invitations SET replaced_at = $1
			WHERE user_id = $2 AND redeemed_at IS NULL AND replaced_at IS NULL`,
			timeArg(inv.CreatedAt), inv.User); err != nil {
			return fmt.Errorf("replace invitations of %s: %w", inv.User, err)
		}
		recovery := 0
		if inv.Recovery {
			recovery = 1
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO invitations (id, user_id, created_by, recovery, hash, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			inv.ID, inv.User, inv.CreatedBy, recovery, inv.Hash, timeArg(inv.CreatedAt), timeArg(inv.ExpiresAt))
		switch constraintOf(err) {
		case uniqueConstraint:
			return fault.Errorf(fault.Conflict, "invitation %s", inv.ID)
		case foreignKeyConstraint:
			return fault.Errorf(fault.NotFound, "invitation %s: user %s", inv.ID, inv.User)
		}
		if err != nil {
			return fmt.Errorf("insert invitation %s: %w", inv.ID, err)
		}
		return insertAudits(ctx, tx, events)
	})
}

// hasKey reports whether user has ever had a key: keys are revoked, never
// deleted, but for sandboxes' own, which retention deletes long after the
// user's own key that made the sandbox.
func hasKey(ctx context.Context, q sqldb.Queryer, user string) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM keys WHERE user_id = $1`, user).Scan(&n); err != nil {
		return false, fmt.Errorf("count keys of %s: %w", user, err)
	}
	return n > 0, nil
}

// GetInvitation finds an invitation by id.
func (s *Store) GetInvitation(ctx context.Context, id string) (account.Invitation, error) {
	var (
		inv                                  account.Invitation
		recovery                             int
		created, expires, replaced, redeemed sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, `
		SELECT id, user_id, created_by, recovery, hash, created_at, expires_at, replaced_at, redeemed_at, redeemed_from, key_id
		FROM invitations WHERE id = $1`, id).Scan(&inv.ID, &inv.User, &inv.CreatedBy, &recovery, &inv.Hash,
		&created, &expires, &replaced, &redeemed, &inv.RedeemedFrom, &inv.Key)
	switch {
	case notFound(err):
		return account.Invitation{}, fault.Errorf(fault.NotFound, "invitation %s", id)
	case err != nil:
		return account.Invitation{}, fmt.Errorf("get invitation %s: %w", id, err)
	}
	inv.Recovery = recovery != 0
	inv.CreatedAt, inv.ExpiresAt, inv.ReplacedAt, inv.RedeemedAt = timeOf(created), timeOf(expires), timeOf(replaced), timeOf(redeemed)
	return inv, nil
}

// RedeemInvitation marks invitation id used at at from the address from
// and writes k, in one transaction, if the invitation is still usable at
// at: not used, not replaced, not expired, and, unless it is a recovery
// invitation, its user has never had a key. Otherwise it is
// fault.Conflict and nothing is written; an unknown id is
// fault.NotFound. events are recorded with it.
func (s *Store) RedeemInvitation(ctx context.Context, id string, at time.Time, from string, k account.Key, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Bounded, func(tx *sql.Tx) error {
		if err := s.db.Serialize(ctx, tx, "invitations:"+k.User); err != nil {
			return err
		}
		// One statement decides, so two uses at once cannot both pass.
		res, err := tx.ExecContext(ctx, `
			UPDATE invitations SET redeemed_at = $1, redeemed_from = $2, key_id = $3
			WHERE id = $4 AND user_id = $5 AND redeemed_at IS NULL AND replaced_at IS NULL AND expires_at > $1
			  AND (recovery = 1 OR NOT EXISTS (SELECT 1 FROM keys WHERE user_id = $5))`,
			timeArg(at), from, k.ID, id, k.User)
		if err != nil {
			return fmt.Errorf("redeem invitation %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("redeem invitation %s: %w", id, err)
		} else if n == 0 {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM invitations WHERE id = $1`, id).Scan(&one)
			if notFound(err) {
				return fault.Errorf(fault.NotFound, "invitation %s", id)
			}
			return fault.Errorf(fault.Conflict, "invitation %s is no longer usable", id)
		}
		if err := insertKey(ctx, tx, k); err != nil {
			return err
		}
		return insertAudits(ctx, tx, events)
	})
}
