package gateway

import (
	"math"
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/usage"
)

func (s *Server) usageReport(w http.ResponseWriter, r *http.Request, p account.Principal) {
	q := r.URL.Query()
	replyPage(s, w, r, "usage", map[string]string{"by": q.Get("by"), "since": q.Get("since"), "org": q.Get("org")}, func(lp listPage) (api.UsageReport, *paging.Key, error) {
		f := lp.filters
		rep, err := s.usage.Report(r.Context(), p, usage.Query{By: f["by"], Since: f["since"], Org: f["org"], Page: lp.req})
		// The total counts every row, of every page.
		return api.UsageReport{By: string(rep.By), Organisation: rep.Org, Since: rep.Since, Until: rep.Until,
			Rows: each(rep.Rows, s.apiUsageRow), Total: s.apiUsageRow(rep.Total)}, rep.Next, err
	})
}

// apiUsageRow converts a row: whole seconds of running time, core-seconds
// to the millisecond, and the machine's cost and the whole when the
// deployment prices machine time.
func (s *Server) apiUsageRow(r usage.Row) api.UsageRow {
	out := api.UsageRow{Organisation: r.Org, OrganisationName: r.OrgName, ID: r.ID, Name: r.Name,
		Sandboxes: r.Sandboxes, Live: r.Live, RunningSeconds: int64(r.Running),
		CoreSeconds: math.Round(r.CoreSeconds*1000) / 1000,
		Requests:    r.Requests, Tokens: apiTokens(r.Tokens), ModelCostUSD: r.ModelCostUSD}
	if s.coreHour.Priced() {
		machine := s.coreHour.Cost(out.CoreSeconds) // as the row says them
		total := math.Round((machine+r.ModelCostUSD)*1e6) / 1e6
		out.MachineCostUSD, out.CostUSD = &machine, &total
	}
	return out
}

func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, p account.Principal) {
	q := r.URL.Query()
	replyPage(s, w, r, "audit", map[string]string{"sandbox": q.Get("sandbox"), "since": q.Get("since"), "org": q.Get("org")}, func(lp listPage) (api.AuditLog, *paging.Key, error) {
		f := lp.filters
		entries, next, err := s.usage.Audit(r.Context(), p, usage.AuditQuery{Sandbox: f["sandbox"], Since: f["since"], Org: f["org"], Page: lp.req})
		return api.AuditLog{Events: each(entries, apiAuditEvent)}, next, err
	})
}

func apiAuditEvent(e usage.Entry) api.AuditEvent {
	return api.AuditEvent{ID: e.ID, At: e.At, Organisation: e.Org, Actor: e.Actor, ActorName: e.ActorName,
		Sandbox: e.Sandbox, Action: e.Action, Target: e.Target, Outcome: e.Outcome, Detail: e.Detail}
}
