package usage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"herd/internal/store"
)

// Groupings of a report (`herd usage --by`).
const (
	BySession = "session"
	ByRole    = "role"
	ByAccount = "account"
	ByModel   = "model"
	ByDay     = "day"
	ByHost    = "host"
)

// Groupings lists the values --by accepts.
var Groupings = []string{BySession, ByRole, ByAccount, ByModel, ByDay, ByHost}

// DefaultAccount is the account of a role that names none.
const DefaultAccount = "default"

// Query selects and groups usage. Zero fields do not filter.
type Query struct {
	Role    string
	Session string
	// Since keeps the usage recorded in the hour holding Since and later.
	Since time.Time
	// By is a grouping (Groupings); "" is BySession.
	By string
}

// Line is one group of a report.
type Line struct {
	Key string `json:"key"`
	Totals
}

// Report is what `herd usage` shows: a line per group, largest cost
// first, and their total.
type Report struct {
	By    string `json:"by"`
	Lines []Line `json:"lines"`
	Total Totals `json:"total"`
}

// Report reads the usage q selects, of every host, grouped.
func (l *Ledger) Report(ctx context.Context, q Query) (Report, error) {
	by := q.By
	if by == "" {
		by = BySession
	}
	if !slices.Contains(Groupings, by) {
		return Report{}, fmt.Errorf("usage: cannot group by %q (want one of %v)", by, Groupings)
	}
	rows, err := l.rows(ctx, store.UsageFilter{Role: q.Role, Session: q.Session, Since: q.Since})
	if err != nil {
		return Report{}, err
	}
	groups := map[string]Totals{}
	rep := Report{By: by, Lines: []Line{}}
	for _, r := range rows {
		k := l.key(by, r)
		t := rowTotals(r)
		groups[k] = groups[k].Add(t)
		rep.Total = rep.Total.Add(t)
	}
	for k, t := range groups {
		rep.Lines = append(rep.Lines, Line{Key: k, Totals: t})
	}
	slices.SortFunc(rep.Lines, func(a, b Line) int {
		if by == ByDay {
			return cmp.Compare(a.Key, b.Key)
		}
		if c := cmp.Compare(b.CostUSD, a.CostUSD); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return rep, nil
}

func (l *Ledger) key(by string, r store.UsageRow) string {
	switch by {
	case ByRole:
		return r.Role
	case ByAccount:
		return l.account(r.Role)
	case ByModel:
		return r.Model
	case ByDay:
		return r.Hour.UTC().Format(time.DateOnly)
	case ByHost:
		return r.Host
	}
	return r.Session
}

func (l *Ledger) account(role string) string {
	if l.o.AccountOf != nil {
		if a := l.o.AccountOf(role); a != "" {
			return a
		}
	}
	return DefaultAccount
}

func rowTotals(r store.UsageRow) Totals {
	return Totals{Tokens: Tokens{r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens}, CostUSD: r.CostUSD}
}

// rows reads the rows f selects, each incarnation's from one source: its
// stream where it has one, else its transcript.
func (l *Ledger) rows(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error) {
	var rows []store.UsageRow
	err := l.o.Store.View(ctx, func(tx store.Tx) (err error) {
		rows, err = tx.Usage(f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("usage: read: %w", err)
	}
	return PreferStream(rows), nil
}

// PreferStream drops the transcript rows of every incarnation that has
// stream rows: an agent in stream mode records each turn in both.
func PreferStream(rows []store.UsageRow) []store.UsageRow {
	streamed := map[string]bool{}
	for _, r := range rows {
		if r.Source == SourceStream {
			streamed[r.Incarnation] = true
		}
	}
	if len(streamed) == 0 {
		return rows
	}
	out := rows[:0:0]
	for _, r := range rows {
		if r.Source == SourceStream || !streamed[r.Incarnation] {
			out = append(out, r)
		}
	}
	return out
}

// totalsTTL bounds how stale SessionTotals may be about other hosts'
// usage (this host's additions are seen at once).
const totalsTTL = 2 * time.Second

// SessionTotals returns every session's usage of all time, by name.
func (l *Ledger) SessionTotals(ctx context.Context) (map[string]Totals, error) {
	l.mu.Lock()
	if l.totals != nil && time.Since(l.totalsAt) < totalsTTL {
		t := l.totals
		l.mu.Unlock()
		return t, nil
	}
	l.mu.Unlock()
	rows, err := l.rows(ctx, store.UsageFilter{})
	if err != nil {
		return nil, err
	}
	out := map[string]Totals{}
	for _, r := range rows {
		out[r.Session] = out[r.Session].Add(rowTotals(r))
	}
	l.mu.Lock()
	l.totals, l.totalsAt = out, time.Now()
	l.mu.Unlock()
	return out, nil
}

// roleCostTimeout bounds RoleCostSince's read of the store.
const roleCostTimeout = 10 * time.Second

// RoleCostSince returns the cost in USD of role's agents since since,
// on every host of the fleet (the hour holding since counts whole); 0
// when the store cannot be read (logged).
func (l *Ledger) RoleCostSince(role string, since time.Time) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), roleCostTimeout)
	defer cancel()
	rows, err := l.rows(ctx, store.UsageFilter{Role: role, Since: since})
	if err != nil {
		l.o.Log.Warn("usage: role cost unreadable", "role", role, "err", err)
		return 0
	}
	var c float64
	for _, r := range rows {
		c += r.CostUSD
	}
	return c
}
