package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Usage is token use and its cost: the JSON `usage` of a session, and of
// each line of `herd usage`.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// UsageLine is one group of `herd usage`: a session, role, account,
// model, day or host, by the report's grouping.
type UsageLine struct {
	Key string `json:"key"`
	Usage
}

// UsageReport is `herd usage -o json`.
type UsageReport struct {
	// By is the grouping: session, role, account, model, day or host.
	By string `json:"by"`
	// Since is where the report starts (the hour holding it); null for
	// all the ledger holds.
	Since *time.Time  `json:"since"`
	Lines []UsageLine `json:"lines"`
	Total Usage       `json:"total"`
	// PricesDated is the date of the embedded price table the costs the
	// agents did not report themselves were figured with.
	PricesDated string `json:"prices_dated"`
}

// UsageQuery selects a usage report. Zero fields do not filter.
type UsageQuery struct {
	Role    string
	Session string
	Since   time.Time
	By      string
}

// Values encodes q as the query of GET /v1/usage.
func (q UsageQuery) Values() url.Values {
	v := url.Values{}
	if q.Role != "" {
		v.Set("role", q.Role)
	}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.By != "" {
		v.Set("by", q.By)
	}
	return v
}

// Usage asks the daemon for a usage report.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (UsageReport, error) {
	var rep UsageReport
	err := c.Do(ctx, http.MethodGet, "/v1/usage", q.Values(), nil, &rep)
	return rep, err
}
