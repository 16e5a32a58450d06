package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

var (
	_ local.Tokens     = (*Store)(nil)
	_ repository.Store = (*Store)(nil)
)

// PutForgeToken stores a local forge token (its hash only).
func (s *Store) PutForgeToken(ctx context.Context, t local.StoredToken) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `INSERT INTO forge_tokens (id, repo, hash, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5)`,
		t.ID, t.Repo, t.Hash, timeArg(t.ExpiresAt), timeArg(t.RevokedAt))
	if err != nil {
		return fmt.Errorf("put forge token: %w", err)
	}
	return nil
}

// GetForgeToken reads a local forge token; fault.NotFound if unknown.
func (s *Store) GetForgeToken(ctx context.Context, id string) (local.StoredToken, error) {
	t := local.StoredToken{ID: id}
	var expires, revoked sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT repo, hash, expires_at, revoked_at FROM forge_tokens WHERE id = $1`, id).
		Scan(&t.Repo, &t.Hash, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return local.StoredToken{}, fault.Errorf(fault.NotFound, "forge token %s: no such repository", id)
	}
	if err != nil {
		return local.StoredToken{}, fmt.Errorf("get forge token: %w", err)
	}
	t.ExpiresAt, t.RevokedAt = timeOf(expires), timeOf(revoked)
	return t, nil
}

// RevokeForgeToken ends a local forge token; fault.NotFound if unknown.
func (s *Store) RevokeForgeToken(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.Write(ctx, sqldb.Patient, `UPDATE forge_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`, id, timeArg(at))
	if err != nil {
		return fmt.Errorf("revoke forge token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fault.Errorf(fault.NotFound, "forge token %s: no such repository", id)
	}
	return nil
}

// AddCredential records a credential handed to a sandbox, with events.
func (s *Store) AddCredential(ctx context.Context, c repository.Credential, events ...audit.Event) error {
	return s.withEvents(ctx, sqldb.Patient, events, func(q sqldb.Queryer) error {
		_, err := q.ExecContext(ctx, `INSERT INTO credentials (sandbox_id, token_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			string(c.Sandbox), c.TokenID, timeArg(c.CreatedAt), timeArg(c.ExpiresAt))
		if err != nil {
			return fmt.Errorf("add credential of %s: %w", c.Sandbox, err)
		}
		return nil
	})
}

// LiveCredentials returns a sandbox's credentials not yet revoked, oldest
// first.
func (s *Store) LiveCredentials(ctx context.Context, id sandbox.ID) ([]repository.Credential, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT token_id, created_at, expires_at FROM credentials
		WHERE sandbox_id = $1 AND revoked_at IS NULL ORDER BY seq`, string(id))
	if err != nil {
		return nil, fmt.Errorf("credentials of %s: %w", id, err)
	}
	defer rows.Close()
	var out []repository.Credential
	for rows.Next() {
		c := repository.Credential{Sandbox: id}
		var created, expires sql.NullInt64
		if err := rows.Scan(&c.TokenID, &created, &expires); err != nil {
			return nil, fmt.Errorf("credentials of %s: %w", id, err)
		}
		c.CreatedAt, c.ExpiresAt = timeOf(created), timeOf(expires)
		out = append(out, c)
	}
	return out, rows.Err()
}

// RevokeCredential marks a sandbox's credential revoked, and records
// events with it when it was not revoked already.
func (s *Store) RevokeCredential(ctx context.Context, id sandbox.ID, tokenID string, at time.Time, events ...audit.Event) error {
	return s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE credentials SET revoked_at = $3 WHERE sandbox_id = $1 AND token_id = $2 AND revoked_at IS NULL`,
			string(id), tokenID, timeArg(at))
		if err != nil {
			return fmt.Errorf("revoke credential of %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return insertAudits(ctx, tx, events)
	})
}

// AddCreatedRef records a ref a sandbox created by a push.
func (s *Store) AddCreatedRef(ctx context.Context, id sandbox.ID, ref string) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `INSERT INTO sandbox_refs (sandbox_id, ref) VALUES ($1, $2) ON CONFLICT DO NOTHING`, string(id), ref)
	if err != nil {
		return fmt.Errorf("record ref of %s: %w", id, err)
	}
	return nil
}

// DeleteCreatedRef forgets a ref a sandbox deleted.
func (s *Store) DeleteCreatedRef(ctx context.Context, id sandbox.ID, ref string) error {
	_, err := s.db.Write(ctx, sqldb.Patient, `DELETE FROM sandbox_refs WHERE sandbox_id = $1 AND ref = $2`, string(id), ref)
	if err != nil {
		return fmt.Errorf("forget ref of %s: %w", id, err)
	}
	return nil
}

// CreatedRefs returns the refs a sandbox created.
func (s *Store) CreatedRefs(ctx context.Context, id sandbox.ID) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT ref FROM sandbox_refs WHERE sandbox_id = $1`, string(id))
	if err != nil {
		return nil, fmt.Errorf("refs of %s: %w", id, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			return nil, err
		}
		out[ref] = true
	}
	return out, rows.Err()
}
