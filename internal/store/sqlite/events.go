package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"herd"
	"herd/internal/store"
)

const eventSelect = "SELECT id, at, host, session, incarnation, kind, reason, message, data FROM events"

// AppendEvent stores e and sets e.ID. Data is stored as JSON: numbers in it
// read back as float64.
func (t *tx) AppendEvent(e *herd.Event) error {
	if e == nil {
		return errors.New("sqlite: append event: nil event")
	}
	at, err := nanos(e.Time)
	if err != nil {
		return fmt.Errorf("sqlite: append event: %w", err)
	}
	data, err := encode(e.Data)
	if err != nil {
		return fmt.Errorf("sqlite: append event: data: %w", err)
	}
	var id int64
	err = t.tx.QueryRowContext(t.ctx,
		"INSERT INTO events (at, host, session, incarnation, kind, reason, message, data)"+
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
		at, e.Host, e.Session, e.Incarnation, e.Kind, e.Reason, e.Message, data).Scan(&id)
	if err != nil {
		return fmt.Errorf("sqlite: append event: %w", err)
	}
	e.ID = id
	return nil
}

// Events returns the events selected by f in ascending id order; with a
// Limit, the newest Limit of them.
func (t *tx) Events(f store.EventFilter) ([]herd.Event, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("sqlite: events: negative limit %d", f.Limit)
	}
	var (
		where []string
		args  []any
	)
	if f.Session != "" {
		where = append(where, "session = ?")
		args = append(args, f.Session)
	}
	if f.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, f.Kind)
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, clampNanos(f.Since))
	}
	if f.AfterID != 0 {
		where = append(where, "id > ?")
		args = append(args, f.AfterID)
	}
	q := eventSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit > 0 {
		// Newest first so the index stops after Limit rows; reversed below.
		q += " ORDER BY id DESC LIMIT ?"
		args = append(args, f.Limit)
	} else {
		q += " ORDER BY id"
	}
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	defer rows.Close()
	var out []herd.Event
	for rows.Next() {
		var (
			e    herd.Event
			at   int64
			data string
		)
		if err := rows.Scan(&e.ID, &at, &e.Host, &e.Session, &e.Incarnation, &e.Kind,
			&e.Reason, &e.Message, &data); err != nil {
			return nil, fmt.Errorf("sqlite: events: %w", err)
		}
		e.Time = fromNanos(at)
		if err := decode(data, &e.Data); err != nil {
			return nil, fmt.Errorf("sqlite: events: event %d data: %w", e.ID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	if f.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// DeleteEventsBefore deletes at most limit of the oldest events whose
// time is before before. The events_at index bounds the work to the rows
// deleted.
func (t *tx) DeleteEventsBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("sqlite: delete events: limit %d, want > 0", limit)
	}
	res, err := t.exec("DELETE FROM events WHERE id IN"+
		" (SELECT id FROM events WHERE at < ? ORDER BY at LIMIT ?)", clampNanos(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete events before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return affected(res, "delete events")
}

// DeleteEventsBeyond deletes at most limit of the oldest events with an id
// more than keep below the newest id, through two index lookups and the
// rows deleted: O(limit), whatever keep. Ids only grow and rows are only
// deleted oldest first, so the newest keep ids are the newest keep events;
// where events inside that range were deleted (by time, after a clock
// step) fewer than keep remain.
func (t *tx) DeleteEventsBeyond(keep, limit int) (int, error) {
	if limit <= 0 || keep < 0 {
		return 0, fmt.Errorf("sqlite: delete events: keep %d, limit %d, want keep >= 0 and limit > 0", keep, limit)
	}
	var hi sql.NullInt64
	if err := t.tx.QueryRowContext(t.ctx, "SELECT max(id) FROM events").Scan(&hi); err != nil {
		return 0, fmt.Errorf("sqlite: delete events: %w", err)
	}
	if !hi.Valid {
		return 0, nil
	}
	oldestKept := hi.Int64 - int64(keep) + 1
	res, err := t.exec("DELETE FROM events WHERE id IN"+
		" (SELECT id FROM events WHERE id < ? ORDER BY id LIMIT ?)", oldestKept, limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete events beyond %d: %w", keep, err)
	}
	return affected(res, "delete events")
}

// affected returns the rows a statement changed.
func affected(res sql.Result, what string) (int, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return int(n), nil
}

// KV returns the value of key and whether it exists.
func (t *tx) KV(key string) (string, bool, error) {
	var v string
	err := t.tx.QueryRowContext(t.ctx, "SELECT value FROM kv WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("sqlite: kv %q: %w", key, err)
	}
	return v, true, nil
}

// PutKV sets key to value.
func (t *tx) PutKV(key, value string) error {
	_, err := t.exec("INSERT INTO kv (key, value) VALUES (?, ?)"+
		" ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value)
	if err != nil {
		return fmt.Errorf("sqlite: put kv %q: %w", key, err)
	}
	return nil
}

// ClaimKV sets key to value only if key is absent and reports whether it did.
func (t *tx) ClaimKV(key, value string) (bool, error) {
	res, err := t.exec("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
		key, value)
	if err != nil {
		return false, fmt.Errorf("sqlite: claim kv %q: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: claim kv %q: %w", key, err)
	}
	return n == 1, nil
}

// DeleteKV removes key; deleting a missing key is not an error.
func (t *tx) DeleteKV(key string) error {
	if _, err := t.exec("DELETE FROM kv WHERE key = ?", key); err != nil {
		return fmt.Errorf("sqlite: delete kv %q: %w", key, err)
	}
	return nil
}
