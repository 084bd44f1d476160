package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"herd/internal/usage"
)

// UsageParams reads the query of GET /api/v1/usage, as `herd usage` reads
// its flags: by (a grouping), since (a duration such as 24h or 14d) and
// role. It returns the query of the daemon's GET /v1/usage.
func UsageParams(in url.Values, now time.Time) (url.Values, error) {
	out := url.Values{}
	for k := range in {
		if k != "by" && k != "since" && k != "role" {
			return nil, fmt.Errorf("usage: unknown parameter %q (want by, since or role)", k)
		}
	}
	if by := in.Get("by"); by != "" {
		if !slices.Contains(usage.Groupings, by) {
			return nil, fmt.Errorf("usage: by: cannot group by %q (want one of %v)", by, usage.Groupings)
		}
		out.Set("by", by)
	}
	if s := in.Get("since"); s != "" {
		d, err := usage.ParseSince(s)
		if err != nil {
			return nil, fmt.Errorf("usage: since %q: %v", s, err)
		}
		out.Set("since", now.Add(-d).UTC().Format(time.RFC3339Nano))
	}
	if role := in.Get("role"); role != "" {
		out.Set("role", role)
	}
	return out, nil
}

// handleUsage is `herd usage -o json`, read-only: the console's cost chart
// asks it for each role's cost per day.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	q, err := UsageParams(r.URL.Query(), time.Now())
	if err != nil {
		replyError(w, http.StatusBadRequest, err.Error())
		return
	}
	b, err := s.o.Backend.Usage(r.Context(), q)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
