package store

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/store/sqldb"
)

// order is how a list's rows are sorted, which is also what its pages'
// keys hold (keyset pagination: a page starts after the last key of the
// one before, never at an offset, so rows inserted or deleted meanwhile
// shift nothing).
type order int

const (
	oldestFirst order = iota // created_at, seq
	newestFirst              // created_at DESC, seq DESC
	bySeq                    // seq (the audit log)
	bySeqDesc                // seq DESC (the audit log, newest first)
	byName                   // name (classes)
)

// keyset returns the condition that keeps the rows after pg.After in o
// ("" from the list's start) and the ORDER BY and LIMIT that read one
// page and one row more, appending their arguments to args. Column
// names take alias ("s." or "").
func keyset(o order, alias string, pg paging.Request, args *[]any) (cond, tail string) {
	arg := func(v any) string {
		*args = append(*args, v)
		return fmt.Sprintf("$%d", len(*args))
	}
	if k := pg.After; k != nil {
		switch o {
		case oldestFirst:
			cond = fmt.Sprintf("(%[1]screated_at, %[1]sseq) > (%s, %s)", alias, arg(k.At), arg(k.Seq))
		case newestFirst:
			cond = fmt.Sprintf("(%[1]screated_at, %[1]sseq) < (%s, %s)", alias, arg(k.At), arg(k.Seq))
		case bySeq:
			cond = fmt.Sprintf("%sseq > %s", alias, arg(k.Seq))
		case bySeqDesc:
			cond = fmt.Sprintf("%sseq < %s", alias, arg(k.Seq))
		case byName:
			cond = fmt.Sprintf("%sname > %s", alias, arg(k.Name))
		}
	}
	switch o {
	case oldestFirst:
		tail = fmt.Sprintf(" ORDER BY %[1]screated_at, %[1]sseq", alias)
	case newestFirst:
		tail = fmt.Sprintf(" ORDER BY %[1]screated_at DESC, %[1]sseq DESC", alias)
	case bySeq:
		tail = fmt.Sprintf(" ORDER BY %sseq", alias)
	case bySeqDesc:
		tail = fmt.Sprintf(" ORDER BY %sseq DESC", alias)
	case byName:
		tail = fmt.Sprintf(" ORDER BY %sname", alias)
	}
	if n := pg.Fetch(); n > 0 {
		tail += " LIMIT " + arg(n)
	}
	return cond, tail
}

// keyed is a row read with its page key.
type keyed[T any] struct {
	item T
	key  paging.Key
}

// cut makes the page of rows read with pg.Fetch().
func cut[T any](rows []keyed[T], pg paging.Request) ([]T, *paging.Key) {
	rows, next := paging.Cut(rows, pg, func(r keyed[T]) paging.Key { return r.key })
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = r.item
	}
	return out, next
}

// listPage runs q, a page read whose keyset and tail are in it, and makes
// the page of its rows; what names the operation in errors.
func listPage[T any](ctx context.Context, db sqldb.Queryer, what, q string, args []any, pg paging.Request,
	scan func(rowScanner) (T, paging.Key, error)) ([]T, *paging.Key, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var read []keyed[T]
	for rows.Next() {
		item, key, err := scan(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		read = append(read, keyed[T]{item, key})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	items, next := cut(read, pg)
	return items, next, nil
}

// listOldestFirst reads a page of the rows of table whose column is value,
// oldest first: columns as scan reads them, created their created_at.
func listOldestFirst[T any](ctx context.Context, db sqldb.Queryer, what, columns, table, column string, value any, pg paging.Request,
	scan func(rowScanner, ...any) (T, error), created func(T) time.Time) ([]T, *paging.Key, error) {
	args := []any{value}
	cond, tail := keyset(oldestFirst, "", pg, &args)
	q := fmt.Sprintf("SELECT %s, seq FROM %s WHERE %s = $1", columns, table, column)
	if cond != "" {
		q += " AND " + cond
	}
	return listPage(ctx, db, what, q+tail, args, pg, func(row rowScanner) (T, paging.Key, error) {
		var seq int64
		x, err := scan(row, &seq)
		return x, paging.Key{At: created(x).UnixNano(), Seq: seq}, err
	})
}
