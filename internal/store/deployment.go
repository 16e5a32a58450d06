package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"berth.dev/berth/internal/store/sqldb"
)

// DeploymentID returns the deployment's identity, minting it on first use:
// "berth" and eight random characters. It never changes afterwards.
func (s *Store) DeploymentID(ctx context.Context) (string, error) {
	var id string
	err := s.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		// Replicas starting together must mint one id between them.
		if err := s.db.Serialize(ctx, tx, "deployment"); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `SELECT id FROM deployment`).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		id = "berth" + strings.ToLower(rand.Text()[:8])
		_, err = tx.ExecContext(ctx, `INSERT INTO deployment (id) VALUES ($1)`, id)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("deployment id: %w", err)
	}
	return id, nil
}
