package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
)

// listPage is what a list route's request asks for: one page of the list,
// read with filters. With a cursor the filters are the cursor's, those of
// the list's first page, so no later page can change them.
type listPage struct {
	list    string            // the list: its route's, and its path's values
	filters map[string]string // by query parameter; "" is not given
	req     paging.Request
}

// readPage reads the limit and cursor of a request for list, whose query
// filters are filters. A limit that is not a number from 1 to
// api.MaxLimit, a cursor that is not one this gateway sealed for this
// caller and this list, and a filter that differs from its cursor's are
// refused, naming the parameter.
func readPage(r *http.Request, list string, filters map[string]string) (listPage, error) {
	q := r.URL.Query()
	lp := listPage{list: list, filters: filters, req: paging.Request{Limit: api.DefaultLimit}}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxLimit {
			return listPage{}, fault.Field("limit", "%q is not a number from 1 to %d, the most a page holds (default %d)", s, api.MaxLimit, api.DefaultLimit)
		}
		lp.req.Limit = n
	}
	s := q.Get("cursor")
	if s == "" {
		return lp, nil
	}
	key, _ := bearer(r)
	c, err := paging.Open(key, s)
	if err != nil {
		return listPage{}, fault.Field("cursor", "%v; send the cursor of the last answer's Link header unchanged", err)
	}
	if c.List != list {
		return listPage{}, fault.Field("cursor", "belongs to another list than %s", list)
	}
	for name, v := range filters {
		if v != "" && v != c.Filters[name] {
			return listPage{}, fault.Field(name, "is %q, the cursor's list has %q: a cursor keeps the filters of its first page", v, c.Filters[name])
		}
	}
	lp.filters, lp.req.After = c.Filters, &c.After
	if lp.filters == nil {
		lp.filters = map[string]string{}
	}
	return lp, nil
}

// setNext tells the caller where the next page is, when next says one
// follows: a Link header (RFC 8288) with rel="next" whose target is the
// route's path with the sealed cursor and the page's limit. The cursor is
// sealed under the caller's key: only they can use it, on any replica.
func setNext(w http.ResponseWriter, r *http.Request, lp listPage, next *paging.Key) {
	if next == nil {
		return
	}
	key, _ := bearer(r)
	filters := map[string]string{}
	for k, v := range lp.filters {
		if v != "" {
			filters[k] = v
		}
	}
	q := url.Values{}
	q.Set("cursor", paging.Seal(key, paging.Cursor{List: lp.list, Filters: filters, After: *next}))
	q.Set("limit", strconv.Itoa(lp.req.Limit))
	w.Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, r.URL.EscapedPath(), q.Encode()))
}
