package server

import (
	"context"
	"net/http"
	"slices"
	"time"

	"herd/internal/api"
	"herd/internal/usage"
)

// handleUsage is `herd usage`: the ledger's report of every host's usage.
func (sv *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	if sv.o.Usage == nil {
		fail(w, badf("usage: this daemon keeps no usage ledger"))
		return
	}
	q := usage.Query{Role: r.URL.Query().Get("role"), Session: r.URL.Query().Get("session"), By: r.URL.Query().Get("by")}
	rep := api.UsageReport{PricesDated: usage.PricesDated, Lines: []api.UsageLine{}}
	if s := r.URL.Query().Get("since"); s != "" {
		since, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			fail(w, badf("usage: since: %v", err))
			return
		}
		q.Since, rep.Since = since, &since
	}
	if q.By != "" && !slices.Contains(usage.Groupings, q.By) {
		fail(w, badf("usage: cannot group by %q (want one of %v)", q.By, usage.Groupings))
		return
	}
	got, err := sv.o.Usage.Report(r.Context(), q)
	if err != nil {
		fail(w, err)
		return
	}
	rep.By, rep.Total = got.By, apiUsage(got.Total)
	for _, l := range got.Lines {
		rep.Lines = append(rep.Lines, api.UsageLine{Key: l.Key, Usage: apiUsage(l.Totals)})
	}
	reply(w, http.StatusOK, rep)
}

func apiUsage(t usage.Totals) api.Usage {
	return api.Usage{InputTokens: t.Input, OutputTokens: t.Output, CacheReadTokens: t.CacheRead, CacheWriteTokens: t.CacheWrite, CostUSD: t.CostUSD}
}

// markUsage sets each view's usage from the ledger's session totals; a
// ledger that cannot be read leaves them zero (logged by the ledger's
// caller): a listing never fails for it.
func (sv *Server) markUsage(ctx context.Context, views []api.SessionView) {
	if sv.o.Usage == nil {
		return
	}
	totals, err := sv.o.Usage.SessionTotals(ctx)
	if err != nil {
		return
	}
	for i := range views {
		if t, ok := totals[views[i].Name]; ok {
			views[i].Usage = apiUsage(t)
		}
	}
}
