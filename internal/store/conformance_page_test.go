package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// readPages reads a list page after page of at most limit entries, each
// page after the key of the one before, and returns every entry. A page
// over its limit, an empty page before the end and a list that does not
// end fail the test.
func readPages[T any](t *testing.T, limit int, read func(paging.Request) ([]T, *paging.Key, error)) []T {
	t.Helper()
	var all []T
	pg := paging.Request{Limit: limit}
	for range 10_000 {
		items, next, err := read(pg)
		if err != nil {
			t.Fatalf("page after %+v: %v", pg.After, err)
		}
		if len(items) > limit || (next != nil && len(items) != limit) {
			t.Fatalf("page after %+v holds %d entries (next %+v); want %d but the last", pg.After, len(items), next, limit)
		}
		all = append(all, items...)
		if next == nil {
			return all
		}
		pg.After = next
	}
	t.Fatal("the list does not end")
	return nil
}

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, x := range items {
		out[i] = id(x)
	}
	return out
}

func sandboxID(sb sandbox.Sandbox) string { return string(sb.ID) }

// testPages: every list reads a page at a time in the store's order
// (keyset pagination: created_at and seq, seq, or name), each page at
// most its limit, and its pages together are the whole list whatever the
// page size; ties of created_at break on seq; rows inserted or deleted
// between pages move no other row onto a page twice or off every page.
func testPages(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	// 23 sandboxes, three at each instant (ties), two organisations, some
	// ended.
	for i := range 23 {
		fx := acme
		if i%4 == 3 {
			fx = globex
		}
		sb, key := newSandbox(fx, fx.ann, fmt.Sprintf("s%02d", i), t0.Add(time.Duration(i/3)*time.Minute))
		if i%5 == 0 {
			sb.State, sb.EndedAt = sandbox.StateTerminated, t0.Add(time.Hour)
		}
		mustCreate(t, st, sb, key)
	}
	for _, f := range []sandbox.Filter{{}, {Ended: true}, {Org: acme.org.ID}, {Org: globex.org.ID, Ended: true}} {
		whole, err := st.ListSandboxes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 2, 3, 7, len(whole), len(whole) + 1} {
			got := readPages(t, limit, func(pg paging.Request) ([]sandbox.Sandbox, *paging.Key, error) { return st.PageSandboxes(ctx, f, pg) })
			if !slices.Equal(ids(got, sandboxID), ids(whole, sandboxID)) {
				t.Errorf("%+v in pages of %d:\n%v\nwant the whole list:\n%v", f, limit, ids(got, sandboxID), ids(whole, sandboxID))
			}
		}
	}

	t.Run("changes between pages", func(t *testing.T) {
		before, err := st.ListSandboxes(ctx, sandbox.Filter{Org: acme.org.ID})
		if err != nil {
			t.Fatal(err)
		}
		first, next, err := st.PageSandboxes(ctx, sandbox.Filter{Org: acme.org.ID}, paging.Request{Limit: 5})
		if err != nil || next == nil {
			t.Fatalf("first page: %v, next %v", err, next)
		}
		// A sandbox newer than every one (before the cursor: not on a
		// later page), one older than every one (after it: on the last),
		// one at the cursor's instant (after it by seq), and one of the
		// rows not yet read gone.
		newer, k1 := newSandbox(acme, acme.bob, "newer", t0.Add(time.Hour))
		older, k2 := newSandbox(acme, acme.bob, "older", t0.Add(-time.Hour))
		tie, k3 := newSandbox(acme, acme.bob, "tie", first[len(first)-1].CreatedAt)
		for _, c := range []struct {
			sb  sandbox.Sandbox
			key account.Key
		}{{newer, k1}, {older, k2}, {tie, k3}} {
			mustCreate(t, st, c.sb, c.key)
		}
		gone := before[8]
		move(t, st, gone, sandbox.StateTerminated, t0.Add(time.Minute))
		if _, err := st.DeleteEnded(ctx, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		rest := readPages(t, 5, func(pg paging.Request) ([]sandbox.Sandbox, *paging.Key, error) {
			if pg.After == nil {
				pg.After = next
			}
			return st.PageSandboxes(ctx, sandbox.Filter{Org: acme.org.ID}, pg)
		})
		got := ids(append(first, rest...), sandboxID)
		want := slices.DeleteFunc(ids(before, sandboxID), func(id string) bool { return id == string(gone.ID) })
		// tie was written after every row at its instant, so it sorts
		// first among them: before the cursor.
		want = append(want, string(older.ID))
		if !slices.Equal(got, want) {
			t.Errorf("pages with changes between them:\n%v\nwant the rows there throughout once each, the older one last:\n%v", got, want)
		}
	})

	// The account lists, oldest first, and classes by name.
	for i := range 5 {
		u := account.User{ID: fmt.Sprintf("usr_x%d", i), Org: acme.org.ID, Name: fmt.Sprintf("x%d", i), Role: account.RoleMember, CreatedAt: t0}
		prj := account.Project{ID: fmt.Sprintf("prj_x%d", i), Org: acme.org.ID, Name: fmt.Sprintf("p%d", i), CreatedAt: t0.Add(time.Duration(i%2) * time.Minute)}
		org := account.Organisation{ID: fmt.Sprintf("org_x%d", i), Name: fmt.Sprintf("o%d", i), CreatedAt: t0}
		k, _ := account.NewKey(acme.ann.ID, fmt.Sprintf("k%d", i), t0)
		for _, err := range []error{st.CreateUser(ctx, u), st.CreateProject(ctx, prj), st.CreateKey(ctx, k),
			st.CreateOrganisation(ctx, org, account.Project{ID: "prj_of" + org.ID, Org: org.ID, Name: "default", CreatedAt: t0})} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.PutClasses(ctx, acme.org.ID, []class.Class{{Name: "c"}, {Name: "a"}, {Name: "e"}, {Name: "b"}, {Name: "d"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := st.Record(ctx, audit.Event{At: t0.Add(time.Duration(i) * time.Second), Org: acme.org.ID, Action: audit.KeyCreate, Target: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []struct {
		name string
		read func(paging.Request) ([]string, *paging.Key, error)
	}{
		{"organisations", pageIDs(func(pg paging.Request) ([]account.Organisation, *paging.Key, error) {
			return st.ListOrganisations(ctx, pg)
		},
			func(o account.Organisation) string { return o.ID })},
		{"projects", pageIDs(func(pg paging.Request) ([]account.Project, *paging.Key, error) {
			return st.ListProjects(ctx, acme.org.ID, pg)
		},
			func(p account.Project) string { return p.ID })},
		{"users", pageIDs(func(pg paging.Request) ([]account.User, *paging.Key, error) {
			return st.ListUsers(ctx, acme.org.ID, pg)
		},
			func(u account.User) string { return u.ID })},
		{"keys", pageIDs(func(pg paging.Request) ([]account.Key, *paging.Key, error) { return st.ListKeys(ctx, acme.ann.ID, pg) },
			func(k account.Key) string { return k.ID })},
		{"classes", pageIDs(func(pg paging.Request) ([]class.Class, *paging.Key, error) {
			return st.ListClasses(ctx, acme.org.ID, pg)
		},
			func(c class.Class) string { return c.Name })},
		{"audit", pageIDs(func(pg paging.Request) ([]audit.Event, *paging.Key, error) {
			return st.ListAudit(ctx, audit.Filter{Org: acme.org.ID}, pg)
		}, func(e audit.Event) string { return e.Target })},
	} {
		whole, next, err := l.read(paging.Request{})
		if err != nil || next != nil || len(whole) < 5 {
			t.Fatalf("%s whole: %v, %v, next %v", l.name, whole, err, next)
		}
		for _, limit := range []int{1, 2, 4} {
			if got := readPages(t, limit, l.read); !slices.Equal(got, whole) {
				t.Errorf("%s in pages of %d: %v; want %v", l.name, limit, got, whole)
			}
		}
	}
}

// pageIDs reads a page of a list as the ids of its entries.
func pageIDs[T any](read func(paging.Request) ([]T, *paging.Key, error), id func(T) string) func(paging.Request) ([]string, *paging.Key, error) {
	return func(pg paging.Request) ([]string, *paging.Key, error) {
		items, next, err := read(pg)
		return ids(items, id), next, err
	}
}
