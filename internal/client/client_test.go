package client_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// pager stands in for the gateway's list routes: n keys, served a page at
// a time as the gateway does (limit from 1 to api.MaxLimit, default
// api.DefaultLimit, else 400 naming limit; an opaque cursor in a Link
// rel="next", under another path prefix, as a proxy may show it), and
// records each request's query.
type pager struct {
	n    int
	same bool // answer every page with the same cursor
	mu   sync.Mutex
	got  []string
}

func (p *pager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.got = append(p.got, r.URL.RawQuery)
	p.mu.Unlock()
	q := r.URL.Query()
	limit := api.DefaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxLimit {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(api.Error{Code: api.CodeInvalid, Field: "limit", Message: "limit: " + s})
			return
		}
		limit = n
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		fmt.Sscanf(c, "after-%d", &start)
	}
	end := min(start+limit, p.n)
	if end < p.n {
		next := end
		if p.same {
			next = 0
		}
		w.Header().Set("Link", fmt.Sprintf(`</behind/a/proxy%s?cursor=after-%d&limit=%d>; rel="next"`, r.URL.Path, next, limit))
	}
	keys := []api.Key{}
	for i := start; i < end; i++ {
		keys = append(keys, api.Key{ID: fmt.Sprintf("key_%04d", i)})
	}
	_ = json.NewEncoder(w).Encode(keys)
}

// TestListsFollowPages: a list method reads every page, in order, on the
// route it asked with its filters, until the list ends; WithLimit(n)
// returns the first n, asking for no more than are left; an empty list is
// [], and a gateway that names the same next page again is an error.
func TestListsFollowPages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, max  int
		want    int
		queries []string
	}{
		{"every page", 250, 0, 250, []string{"user=ann", "user=ann&cursor=after-100", "user=ann&cursor=after-200"}},
		{"the first n", 250, 120, 120, []string{"user=ann&limit=120"}},
		{"n past a page", 2500, 1500, 1500, []string{"user=ann&limit=1000", "user=ann&cursor=after-1000&limit=500"}},
		{"n past the end", 3, 50, 3, []string{"user=ann&limit=50"}},
		{"nothing", 0, 0, 0, []string{"user=ann"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pager{n: tc.n}
			srv := httptest.NewServer(p)
			defer srv.Close()
			keys, err := client.New(srv.URL, "k", nil).WithLimit(tc.max).Keys(t.Context(), "ann")
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != tc.want || keys == nil {
				t.Fatalf("%d keys (nil %v); want %d", len(keys), keys == nil, tc.want)
			}
			for i, k := range keys {
				if k.ID != fmt.Sprintf("key_%04d", i) {
					t.Fatalf("key %d is %s: out of order", i, k.ID)
				}
			}
			if strings.Join(p.got, " ") != strings.Join(tc.queries, " ") {
				t.Errorf("queries %q; want %q", p.got, tc.queries)
			}
		})
	}
	p := &pager{n: 300, same: true}
	srv := httptest.NewServer(p)
	defer srv.Close()
	if _, err := client.New(srv.URL, "k", nil).Keys(t.Context(), ""); err == nil || !strings.Contains(err.Error(), "same next page") {
		t.Errorf("a gateway naming one page again: %v; want an error", err)
	}
}
