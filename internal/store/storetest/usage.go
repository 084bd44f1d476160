package storetest

import (
	"errors"
	"testing"
	"time"

	"herd/internal/store"
)

// testUsageAdds: usage added to the same incarnation, source, model and
// hour sums into one row (the hour truncated, returned in UTC); other
// keys make other rows; filters select by time (from the hour holding
// Since), role, session and host; negative or keyless rows are refused.
func testUsageAdds(t *testing.T, s store.Store) {
	h0 := time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC)
	row := func(inc, src, model string, hour time.Time, role, session, host string, in int64, cost float64) store.UsageRow {
		return store.UsageRow{Incarnation: inc, Source: src, Model: model, Hour: hour, Role: role, Session: session, Host: host,
			InputTokens: in, OutputTokens: 2 * in, CacheReadTokens: 3 * in, CacheWriteTokens: 4 * in, CostUSD: cost}
	}
	update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.AddUsage(row("i1", "transcript", "m", h0.Add(5*time.Minute).In(zone), "w", "w-0", "a", 10, 0.25)),
			tx.AddUsage(row("i1", "transcript", "m", h0.Add(59*time.Minute), "w", "w-0", "a", 1, 0.125)),
			tx.AddUsage(row("i1", "transcript", "n", h0, "w", "w-0", "a", 7, 1)),
			tx.AddUsage(row("i1", "stream", "m", h0, "w", "w-0", "a", 5, 0.5)),
			tx.AddUsage(row("i2", "transcript", "m", h0.Add(2*time.Hour), "v", "v-0", "b", 100, 2)),
		)
	})
	sum := row("i1", "transcript", "m", h0, "w", "w-0", "a", 11, 0.375)
	view(t, s, func(tx store.Tx) error {
		all, err := tx.Usage(store.UsageFilter{})
		if err != nil {
			return err
		}
		diff(t, "all usage", []store.UsageRow{
			row("i1", "stream", "m", h0, "w", "w-0", "a", 5, 0.5), sum,
			row("i1", "transcript", "n", h0, "w", "w-0", "a", 7, 1),
			row("i2", "transcript", "m", h0.Add(2*time.Hour), "v", "v-0", "b", 100, 2),
		}, all)
		for i := range all {
			checkUTC(t, "usage hour", &all[i].Hour)
		}
		for _, tc := range []struct {
			name string
			f    store.UsageFilter
			n    int
		}{
			{"since within the first hour keeps it", store.UsageFilter{Since: h0.Add(30 * time.Minute)}, 4},
			{"since the next hour", store.UsageFilter{Since: h0.Add(time.Hour)}, 1},
			{"role", store.UsageFilter{Role: "w"}, 3},
			{"session", store.UsageFilter{Session: "v-0"}, 1},
			{"host", store.UsageFilter{Host: "b"}, 1},
			{"role and host that do not meet", store.UsageFilter{Role: "w", Host: "b"}, 0},
		} {
			got, err := tx.Usage(tc.f)
			if err != nil {
				return err
			}
			if len(got) != tc.n {
				t.Errorf("[%s] expected %d rows, got %d: %+v", tc.name, tc.n, len(got), got)
			}
		}
		return nil
	})
	for _, bad := range []store.UsageRow{
		{Source: "s", Model: "m", Hour: h0},
		{Incarnation: "i", Model: "m", Hour: h0},
		{Incarnation: "i", Source: "s", Hour: h0},
		{Incarnation: "i", Source: "s", Model: "m", Hour: h0, InputTokens: -1},
		{Incarnation: "i", Source: "s", Model: "m", Hour: h0, CostUSD: -0.5},
	} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.AddUsage(bad) }); err == nil {
			t.Errorf("expected an error adding %+v", bad)
		}
	}
}

// testUsageCursors: a cursor round-trips per host and path, a second put
// replaces it, and a missing one is ErrNotFound.
func testUsageCursors(t *testing.T, s store.Store) {
	c := store.UsageCursor{Host: "a", Path: "/x/t.jsonl", Incarnation: "i1", Offset: 123, Ident: "1:2", State: `{"model":"m"}`, UpdatedAt: at(1)}
	other := c
	other.Host, other.Offset = "b", 7
	update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutUsageCursor(c), tx.PutUsageCursor(other)) })
	c.Offset, c.Incarnation, c.UpdatedAt = 456, "i2", at(2)
	update(t, s, func(tx store.Tx) error { return tx.PutUsageCursor(c) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.UsageCursor("a", "/x/t.jsonl")
		if err != nil {
			return err
		}
		diff(t, "cursor", c, got)
		checkUTC(t, "cursor", &got.UpdatedAt)
		gotB, err := tx.UsageCursor("b", "/x/t.jsonl")
		if err != nil {
			return err
		}
		diff(t, "other host's cursor", other, gotB)
		if _, err := tx.UsageCursor("a", "/y"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expected ErrNotFound for a missing cursor, got %v", err)
		}
		return nil
	})
	for _, bad := range []store.UsageCursor{{Path: "/p"}, {Host: "a"}, {Host: "a", Path: "/p", Offset: -1}} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.PutUsageCursor(bad) }); err == nil {
			t.Errorf("expected an error putting %+v", bad)
		}
	}
}
