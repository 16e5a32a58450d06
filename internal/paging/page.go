// Package paging reads lists a page at a time. A Request asks for at most
// Limit entries after a Key, the position of an entry in the store's
// order (keyset pagination: a position, never an offset, so entries
// inserted or deleted between two pages move nothing else); Cut makes a
// page of what a store read; a Cursor carries the Key and the list's
// filters from one page to the next, sealed so that it cannot be altered
// nor used by another caller. It imports nothing of ours.
package paging

// Request asks for one page of a list.
type Request struct {
	// Limit is the most entries the page holds; 0 is no bound (berth's own
	// reads that need every entry).
	Limit int
	// After is the Key of the previous page's last entry; nil starts at the
	// beginning of the list.
	After *Key
}

// Key is where an entry sits in its list's order: the store's sort key
// of its row. Which fields a list uses is the list's own: a time and the
// row's insertion sequence as the tie-break (sandboxes, organisations,
// projects, users, keys), the sequence alone (the audit log), or a name
// (classes, usage rows, models).
type Key struct {
	At   int64  `json:"t,omitempty"` // unix nanoseconds
	Seq  int64  `json:"s,omitempty"`
	Name string `json:"n,omitempty"`
}

// Fetch is how many entries a store reads for r: one past the page, so
// Cut can tell whether another page follows. 0 is no bound.
func (r Request) Fetch() int {
	if r.Limit <= 0 {
		return 0
	}
	return r.Limit + 1
}

// Cut returns the page of rows, which a store read with r.Fetch(), and the
// Key of the page's last entry when more follow (nil at the list's end).
func Cut[T any](rows []T, r Request, key func(T) Key) ([]T, *Key) {
	if r.Limit <= 0 || len(rows) <= r.Limit {
		return rows, nil
	}
	rows = rows[:r.Limit]
	k := key(rows[len(rows)-1])
	return rows, &k
}

// Slice pages a list held whole in memory (a report's rows, the model
// catalog), sorted by key: the entries after r.After, at most r.Limit.
func Slice[T any](all []T, r Request, key func(T) Key, less func(a, b Key) bool) ([]T, *Key) {
	start := 0
	if r.After != nil {
		for start < len(all) && !less(*r.After, key(all[start])) {
			start++
		}
	}
	end := len(all)
	if r.Limit > 0 && start+r.Limit+1 <= end {
		end = start + r.Limit + 1
	}
	return Cut(all[start:end], r, key)
}

// ByName orders Keys by Name.
func ByName(a, b Key) bool { return a.Name < b.Name }
