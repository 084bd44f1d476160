package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
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

// Cost is the cost as a table shows it: "$0.0004", "$1.25", "$1234".
func (u Usage) Cost() string {
	c := u.CostUSD
	switch {
	case c == 0:
		return "$0"
	case c < 0.01:
		return "$" + strconv.FormatFloat(c, 'f', 4, 64)
	case c < 1000:
		return "$" + strconv.FormatFloat(c, 'f', 2, 64)
	}
	return "$" + strconv.FormatFloat(c, 'f', 0, 64)
}

// Count is a token count as a table shows it: "950", "12.3k", "4.56M".
func Count(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	case n < 1_000_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M"
	}
	return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + "G"
}
