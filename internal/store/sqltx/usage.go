package sqltx

import (
	"fmt"
	"strings"
	"time"

	"herd/internal/store"
)

var usageCols = []string{"incarnation", "source", "model", "hour", "session", "role", "host",
	"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd"}

var (
	usageSelect = "SELECT " + strings.Join(usageCols, ", ") + " FROM usage_ledger"
	usageAdd    = "INSERT INTO usage_ledger (" + strings.Join(usageCols, ", ") + ") VALUES (" + placeholders(len(usageCols)) + ")" +
		" ON CONFLICT (incarnation, source, model, hour) DO UPDATE SET" +
		" input_tokens = usage_ledger.input_tokens + excluded.input_tokens," +
		" output_tokens = usage_ledger.output_tokens + excluded.output_tokens," +
		" cache_read_tokens = usage_ledger.cache_read_tokens + excluded.cache_read_tokens," +
		" cache_write_tokens = usage_ledger.cache_write_tokens + excluded.cache_write_tokens," +
		" cost_usd = usage_ledger.cost_usd + excluded.cost_usd"
	cursorCols   = []string{"host", "path", "incarnation", `"offset"`, "ident", "state", "updated_at"}
	cursorSelect = "SELECT " + strings.Join(cursorCols, ", ") + " FROM usage_cursors"
	cursorUpsert = "INSERT INTO usage_cursors (" + strings.Join(cursorCols, ", ") + ") VALUES (" + placeholders(len(cursorCols)) + ")" +
		` ON CONFLICT (host, path) DO UPDATE SET incarnation = excluded.incarnation, "offset" = excluded."offset",` +
		" ident = excluded.ident, state = excluded.state, updated_at = excluded.updated_at"
)

// AddUsage adds r to the row of its incarnation, source, model and hour.
func (t *tx) AddUsage(r store.UsageRow) error {
	if r.Incarnation == "" || r.Source == "" || r.Model == "" {
		return fmt.Errorf("%s: add usage: incarnation, source and model are required, got %+v", t.name, r)
	}
	if r.InputTokens < 0 || r.OutputTokens < 0 || r.CacheReadTokens < 0 || r.CacheWriteTokens < 0 || r.CostUSD < 0 {
		return fmt.Errorf("%s: add usage of %s: negative counts or cost: %+v", t.name, r.Incarnation, r)
	}
	hour, err := nanos(r.Hour.Truncate(time.Hour))
	if err != nil {
		return fmt.Errorf("%s: add usage of %s: hour: %w", t.name, r.Incarnation, err)
	}
	if _, err := t.exec(usageAdd, r.Incarnation, r.Source, r.Model, hour, r.Session, r.Role, r.Host,
		r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens, r.CostUSD); err != nil {
		return fmt.Errorf("%s: add usage of %s: %w", t.name, r.Incarnation, err)
	}
	return nil
}

// Usage lists the rows f selects by hour, incarnation, source and model.
func (t *tx) Usage(f store.UsageFilter) ([]store.UsageRow, error) {
	var (
		where []string
		args  []any
	)
	if !f.Since.IsZero() {
		where, args = append(where, "hour >= ?"), append(args, clampNanos(f.Since.Truncate(time.Hour)))
	}
	for _, c := range []struct{ col, v string }{{"role", f.Role}, {"session", f.Session}, {"host", f.Host}} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	q := usageSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return collect(t, "usage", scanUsage, q+" ORDER BY hour, incarnation, source, model", args...)
}

func scanUsage(sc scanner) (store.UsageRow, error) {
	var (
		r    store.UsageRow
		hour int64
	)
	err := sc.Scan(&r.Incarnation, &r.Source, &r.Model, &hour, &r.Session, &r.Role, &r.Host,
		&r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &r.CostUSD)
	r.Hour = fromNanos(hour)
	return r, err
}

// UsageCursor returns the cursor of host's file at path.
func (t *tx) UsageCursor(host, path string) (store.UsageCursor, error) {
	var (
		c       store.UsageCursor
		updated int64
	)
	err := t.queryRow(cursorSelect+" WHERE host = ? AND path = ?", host, path).
		Scan(&c.Host, &c.Path, &c.Incarnation, &c.Offset, &c.Ident, &c.State, &updated)
	if err != nil {
		return c, t.notFound(err, "usage cursor", host+":"+path)
	}
	c.UpdatedAt = fromNanos(updated)
	return c, nil
}

// PutUsageCursor inserts or replaces the cursor of c.Host's file c.Path.
func (t *tx) PutUsageCursor(c store.UsageCursor) error {
	if c.Host == "" || c.Path == "" || c.Offset < 0 {
		return fmt.Errorf("%s: put usage cursor: host, path and an offset >= 0 are required, got %+v", t.name, c)
	}
	updated, err := nanos(c.UpdatedAt)
	if err != nil {
		return fmt.Errorf("%s: put usage cursor %s: updated_at: %w", t.name, c.Path, err)
	}
	if _, err := t.exec(cursorUpsert, c.Host, c.Path, c.Incarnation, c.Offset, c.Ident, c.State, updated); err != nil {
		return fmt.Errorf("%s: put usage cursor %s: %w", t.name, c.Path, err)
	}
	return nil
}
