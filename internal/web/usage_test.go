package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"herd/internal/api"
)

func TestUsageParams(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "", want: ""},
		{in: "by=day&role=w&since=14d", want: "by=day&role=w&since=2026-11-12T18%3A30%3A00Z"},
		{in: "since=90m", want: "since=2026-11-26T17%3A00%3A00Z"},
		{in: "by=role", want: "by=role"},
		{in: "by=week", wantErr: `cannot group by "week"`},
		{in: "since=soon", wantErr: "want a duration"},
		{in: "since=-1h", wantErr: "more than 0"},
		{in: "since=0d", wantErr: "more than 0"},
		{in: "session=w-0&colour=red", wantErr: "unknown parameter"},
	} {
		in, _ := url.ParseQuery(tc.in)
		got, err := UsageParams(in, now)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("[%s] expected an error with %q … got %v", tc.in, tc.wantErr, err)
			}
			continue
		}
		if err != nil || got.Encode() != tc.want {
			t.Errorf("[%s] expected %q … got %q, %v", tc.in, tc.want, got.Encode(), err)
		}
	}
}

// TestUsageAPI: /api/v1/usage needs a login, refuses bad parameters with
// 400 and says why, and answers the daemon's report.
func TestUsageAPI(t *testing.T) {
	c := newTestConsole(t)
	bearer := map[string]string{"Authorization": "Bearer the-token"}

	if got := c.call(t, &http.Client{}, "GET", "/api/v1/usage?by=day", nil, nil, nil); got != http.StatusUnauthorized {
		t.Errorf("[no login] expected 401 … got %d", got)
	}
	if got := c.call(t, &http.Client{}, "GET", "/api/v1/usage?by=day", map[string]string{"Authorization": "Bearer wrong"}, nil, nil); got != http.StatusUnauthorized {
		t.Errorf("[wrong token] expected 401 … got %d", got)
	}

	for _, bad := range []string{"by=week", "since=soon", "nope=1"} {
		var e api.Error
		if got := c.call(t, &http.Client{}, "GET", "/api/v1/usage?"+bad, bearer, nil, &e); got != http.StatusBadRequest || !strings.HasPrefix(e.Error, "usage: ") {
			t.Errorf("[%s] expected 400 with a message … got %d %q", bad, got, e.Error)
		}
	}

	var rep api.UsageReport
	if got := c.call(t, &http.Client{}, "GET", "/api/v1/usage?by=day&role=w&since=14d", bearer, nil, &rep); got != http.StatusOK {
		t.Fatalf("[usage] expected 200 … got %d", got)
	}
	if rep.By != "day" || len(rep.Lines) != 1 || rep.Lines[0].Key != "2026-11-26" || rep.Lines[0].InputTokens != 10 || rep.Total.CostUSD != 0.5 {
		t.Errorf("[usage] expected the daemon's report … got %+v", rep)
	}
	c.back.mu.Lock()
	q := c.back.usageQ
	c.back.mu.Unlock()
	since, err := time.Parse(time.RFC3339Nano, q.Get("since"))
	if q.Get("by") != "day" || q.Get("role") != "w" || err != nil || time.Since(since) < 14*24*time.Hour-time.Minute || time.Since(since) > 14*24*time.Hour+time.Minute {
		t.Errorf("[usage] expected the daemon asked by=day role=w since 14 days ago … got %v", q)
	}
}
