package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
		d, err := parseSince(s)
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

// parseSince reads a Go duration, or a number of days ("7d").
func parseSince(s string) (time.Duration, error) {
	var (
		d   time.Duration
		err error
	)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if days, err = strconv.Atoi(n); err == nil {
			d = time.Duration(days) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 90m, 24h or 14d")
	}
	if d <= 0 {
		return 0, fmt.Errorf("want how far back to look, more than 0")
	}
	return d, nil
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
