package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// constraint is the kind of integrity constraint a write broke.
type constraint int

const (
	noConstraint constraint = iota
	uniqueConstraint
	foreignKeyConstraint
)

// PostgreSQL's SQLSTATE codes for the constraints constraintOf tells apart.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// constraintOf tells which constraint err reports breaking, if any, in
// either dialect.
func constraintOf(err error) constraint {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code {
		case pgUniqueViolation:
			return uniqueConstraint
		case pgForeignKeyViolation:
			return foreignKeyConstraint
		}
		return noConstraint
	}
	e, ok := errors.AsType[*sqlite.Error](err)
	if !ok {
		return noConstraint
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return uniqueConstraint
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return foreignKeyConstraint
	}
	return noConstraint
}
