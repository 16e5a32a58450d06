package usage

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// By is what a report groups sandboxes by.
type By string

// The groupings of `berth sandbox usage --by`.
const (
	ByProject By = "project"
	ByUser    By = "user"
	ByClass   By = "class"
)

// ParseBy checks a grouping; empty means by project.
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case ByProject, ByUser, ByClass:
		return b, nil
	case "":
		return ByProject, nil
	}
	return "", fault.Field("by", "%q is not a grouping (project, user or class)", s)
}

// Query is what a report is asked for, as typed.
type Query struct {
	By    string
	Since string // a duration back from now such as "30d"; "" is DefaultWindow
	Org   string // an organisation id or name; "" is the caller's, or every one for an operator
	// Page is the page of rows to read, in the report's order (see
	// Row.Key): at most Page.Limit (0: every one) after Page.After. The
	// total and the series count every row.
	Page paging.Request
}

// Row is one group's usage. Every sandbox created in the report's window
// counts whole in it (SPEC S8): all its running time, even from before a
// suspend long ago, and none of a sandbox created before the window.
//
// Tokens and ModelCostUSD are what the gateway metered of those sandboxes'
// model calls (SPEC S8, S14); machine time is CoreSeconds.
type Row struct {
	Org     string // the organisation's id
	OrgName string
	ID      string // the project's or user's id, or the class's name
	Name    string
	// Sandboxes counts those created in the window, Live those of them
	// that are live now (SPEC S7's meaning: they hold a machine or volume).
	Sandboxes int
	Live      int
	// Running is the sum of their running segments, in seconds, and
	// CoreSeconds that time by each sandbox's cores.
	Running     float64
	CoreSeconds float64
	// Requests counts their model calls through the gateway, Tokens their
	// tokens and ModelCostUSD their cost at the models' prices.
	Requests     int
	Tokens       runner.Usage
	ModelCostUSD float64
}

// add counts one sandbox in r, its running time taken at now, and what
// the gateway metered of it.
func (r *Row) add(sb sandbox.Sandbox, now time.Time, m agentrun.Metered) {
	r.Requests += m.Requests
	r.Tokens.Input += m.Usage.Input
	r.Tokens.CacheRead += m.Usage.CacheRead
	r.Tokens.CacheWrite += m.Usage.CacheWrite
	r.Tokens.Output += m.Usage.Output
	r.Tokens.Reasoning += m.Usage.Reasoning
	r.ModelCostUSD += m.CostUSD
	r.Sandboxes++
	if sb.Live() {
		r.Live++
	}
	secs := sb.RunningTime(now).Seconds()
	r.Running += secs
	r.CoreSeconds += secs * sb.CPU.Cores()
}

// Report is usage over a window, one row per group.
type Report struct {
	By    By
	Org   string // the organisation reported on; "" is every organisation
	Since time.Time
	Until time.Time
	Rows  []Row
	// Next is the key of the last row when more follow.
	Next  *paging.Key
	Total Row
	// Series is the total over time: one point per Step from the Step
	// holding Since to the one holding Until, each counting the sandboxes
	// created in it, whole, as the rows do.
	Series []Point
	Step   time.Duration
}

// Point is the usage of the sandboxes created in one step of a report's
// window.
type Point struct {
	Start        time.Time
	Sandboxes    int
	CoreSeconds  float64
	ModelCostUSD float64
}

// stepFor is a series' step for a window: hours for two days or less,
// else days (UTC).
func stepFor(window time.Duration) time.Duration {
	if window <= 48*time.Hour {
		return time.Hour
	}
	return 24 * time.Hour
}

// series makes the empty points of a window, from the step holding since
// to the one holding until.
func series(since, until time.Time, step time.Duration) []Point {
	var out []Point
	for t := since.Truncate(step); !t.After(until); t = t.Add(step) {
		out = append(out, Point{Start: t})
	}
	return out
}

// Report sums the usage of the sandboxes created in the window, grouped as
// q asks. Administrators of the organisation and operators only.
func (s *Service) Report(ctx context.Context, p account.Principal, q Query) (Report, error) {
	r, err := s.report(ctx, p, q)
	if err != nil {
		return Report{}, fmt.Errorf("usage report: %w", err)
	}
	return r, nil
}

func (s *Service) report(ctx context.Context, p account.Principal, q Query) (Report, error) {
	sc, err := s.scopeOf(ctx, p, q.Org, "usage")
	if err != nil {
		return Report{}, err
	}
	by, err := ParseBy(q.By)
	if err != nil {
		return Report{}, err
	}
	d, err := window("since", q.Since, DefaultWindow, s.retention)
	if err != nil {
		return Report{}, err
	}
	now := s.now()
	rep := Report{By: by, Org: sc.org, Since: now.Add(-d), Until: now, Step: stepFor(d)}
	rep.Series = series(rep.Since, rep.Until, rep.Step)
	sbs, err := s.store.ListSandboxes(ctx, sandbox.Filter{Org: sc.org, Ended: true, CreatedSince: rep.Since})
	if err != nil {
		return Report{}, err
	}
	metered, err := s.store.MeteredBySandbox(ctx, sc.org, rep.Since)
	if err != nil {
		return Report{}, err
	}
	n := s.names(ctx, p)
	type key struct{ org, id string }
	rows := map[key]*Row{}
	for _, sb := range sbs {
		k := key{sb.Org, groupOf(by, sb)}
		r, ok := rows[k]
		if !ok {
			r = &Row{Org: sb.Org, OrgName: n.org(sb.Org), ID: k.id, Name: k.id}
			if by != ByClass {
				r.Name = n.in(sb.Org, k.id)
			}
			rows[k] = r
		}
		r.add(sb, now, metered[sb.ID])
		rep.Total.add(sb, now, metered[sb.ID])
		if i := int(sb.CreatedAt.Sub(rep.Series[0].Start) / rep.Step); i >= 0 && i < len(rep.Series) {
			pt := &rep.Series[i]
			pt.Sandboxes++
			pt.CoreSeconds += sb.RunningTime(now).Seconds() * sb.CPU.Cores()
			pt.ModelCostUSD += metered[sb.ID].CostUSD
		}
	}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	sortRows(rep.Rows)
	rep.Rows, rep.Next = paging.Slice(rep.Rows, q.Page, Row.Key, paging.ByName)
	return rep, nil
}

// Key is where r sits in a report's order (organisation, name, id) as one
// string: NUL, which no name holds, sorts before every other byte, so the
// strings sort as the rows do.
func (r Row) Key() paging.Key { return paging.Key{Name: r.OrgName + "\x00" + r.Name + "\x00" + r.ID} }

func groupOf(by By, sb sandbox.Sandbox) string {
	switch by {
	case ByUser:
		return sb.Owner
	case ByClass:
		return sb.Class
	}
	return sb.Project
}
