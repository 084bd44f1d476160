package sqltx

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
		return fmt.Errorf("%s: append event: nil event", t.name)
	}
	at, err := nanos(e.Time)
	if err != nil {
		return fmt.Errorf("%s: append event: %w", t.name, err)
	}
	data, err := encode(e.Data)
	if err != nil {
		return fmt.Errorf("%s: append event: data: %w", t.name, err)
	}
	if t.d.BeforeAppend != "" && !t.appending {
		if _, err := t.exec(t.d.BeforeAppend); err != nil {
			return fmt.Errorf("%s: append event: %w", t.name, err)
		}
		t.appending = true
	}
	var id int64
	task, _ := e.Data["task"].(string)
	err = t.queryRow("INSERT INTO events (at, host, session, incarnation, kind, reason, message, data, task)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
		at, e.Host, e.Session, e.Incarnation, e.Kind, e.Reason, e.Message, data, task).Scan(&id)
	if err != nil {
		return fmt.Errorf("%s: append event: %w", t.name, err)
	}
	e.ID = id
	if t.d.OnAppend != "" && !t.notified {
		if _, err := t.exec(t.d.OnAppend); err != nil {
			return fmt.Errorf("%s: append event: %w", t.name, err)
		}
		t.notified = true
	}
	return nil
}

// eventWhere is the WHERE clause (with its arguments) of what f selects,
// "" when it selects every event.
func eventWhere(f store.EventFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	if f.Host != "" {
		where = append(where, "host = ?")
		args = append(args, f.Host)
	}
	if f.Session != "" {
		where = append(where, "session = ?")
		args = append(args, f.Session)
	}
	if f.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, f.Kind)
	}
	if f.Task != "" {
		// "task <> ''" lets the planner use the partial index
		// events_task_id: it cannot tell a bound value is not ''.
		where = append(where, "task = ? AND task <> ''")
		args = append(args, f.Task)
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, clampNanos(f.Since))
	}
	if f.AfterID != 0 {
		where = append(where, "id > ?")
		args = append(args, f.AfterID)
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// Events returns the events selected by f in ascending id order; with a
// Limit, the newest Limit of them; with a Page, the oldest Page of them.
func (t *tx) Events(f store.EventFilter) ([]herd.Event, error) {
	if f.Limit < 0 || f.Page < 0 {
		return nil, fmt.Errorf("%s: events: negative limit %d or page %d", t.name, f.Limit, f.Page)
	}
	where, args := eventWhere(f)
	q := eventSelect + where
	switch {
	case f.Limit > 0:
		// Newest first so the index stops after Limit rows; reversed below.
		q += " ORDER BY id DESC LIMIT ?"
		args = append(args, f.Limit)
	case f.Page > 0:
		q += " ORDER BY id LIMIT ?"
		args = append(args, f.Page)
	default:
		q += " ORDER BY id"
	}
	out, err := collect(t, "events", scanEvent, q, args...)
	if err != nil {
		return nil, err
	}
	if f.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// NewestEventsAfter returns the id just below the n newest events f
// selects (its Limit and Page aside), or f.AfterID when no more than n
// match: the cursor from which those n are read in pages.
func (t *tx) NewestEventsAfter(f store.EventFilter, n int) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%s: newest events: n %d, want > 0", t.name, n)
	}
	where, args := eventWhere(f)
	var id int64
	err := t.queryRow("SELECT id FROM events"+where+" ORDER BY id DESC LIMIT 1 OFFSET ?", append(args, n)...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return f.AfterID, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: newest events: %w", t.name, err)
	}
	return id, nil
}

// DeleteEventsBefore deletes at most limit of the oldest events whose
// time is before before. The events_at index bounds the work to the rows
// deleted.
func (t *tx) DeleteEventsBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%s: delete events: limit %d, want > 0", t.name, limit)
	}
	res, err := t.exec("DELETE FROM events WHERE id IN"+
		" (SELECT id FROM events WHERE at < ? ORDER BY at LIMIT ?)", clampNanos(before), limit)
	if err != nil {
		return 0, fmt.Errorf("%s: delete events before %s: %w", t.name, before.UTC().Format(time.RFC3339), err)
	}
	return t.affected(res, "delete events")
}

// DeleteEventsBeyond deletes at most limit of the oldest events with an id
// more than keep below the newest id, through two index lookups and the
// rows deleted: O(limit), whatever keep. Ids only grow and rows are only
// deleted oldest first, so the newest keep ids are the newest keep events;
// where events inside that range were deleted (by time, after a clock
// step) fewer than keep remain.
func (t *tx) DeleteEventsBeyond(keep, limit int) (int, error) {
	if limit <= 0 || keep < 0 {
		return 0, fmt.Errorf("%s: delete events: keep %d, limit %d, want keep >= 0 and limit > 0", t.name, keep, limit)
	}
	var hi sql.NullInt64
	if err := t.queryRow("SELECT max(id) FROM events").Scan(&hi); err != nil {
		return 0, fmt.Errorf("%s: delete events: %w", t.name, err)
	}
	if !hi.Valid {
		return 0, nil
	}
	oldestKept := hi.Int64 - int64(keep) + 1
	res, err := t.exec("DELETE FROM events WHERE id IN"+
		" (SELECT id FROM events WHERE id < ? ORDER BY id LIMIT ?)", oldestKept, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: delete events beyond %d: %w", t.name, keep, err)
	}
	return t.affected(res, "delete events")
}

// DeleteIncarnationsEndedBefore deletes at most limit of the oldest ended
// incarnations that ended before before and before the oldest event left,
// and are no session's current one. The table is bounded by it, so the
// scan (there is no index on ended_at) stays small.
func (t *tx) DeleteIncarnationsEndedBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%s: delete incarnations: limit %d, want > 0", t.name, limit)
	}
	cut := clampNanos(before)
	res, err := t.exec("DELETE FROM incarnations WHERE id IN"+
		" (SELECT id FROM incarnations WHERE ended_at IS NOT NULL AND ended_at < ?"+
		" AND ended_at < (SELECT COALESCE(MIN(at), ?) FROM events)"+
		" AND id NOT IN (SELECT incarnation FROM sessions)"+
		" ORDER BY ended_at LIMIT ?)", cut, cut, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: delete incarnations ended before %s: %w", t.name, before.UTC().Format(time.RFC3339), err)
	}
	return t.affected(res, "delete incarnations")
}

// affected returns the rows a statement changed.
func (t *tx) affected(res sql.Result, what string) (int, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", t.name, what, err)
	}
	return int(n), nil
}

func scanEvent(sc scanner) (herd.Event, error) {
	var (
		e    herd.Event
		at   int64
		data string
	)
	if err := sc.Scan(&e.ID, &at, &e.Host, &e.Session, &e.Incarnation, &e.Kind,
		&e.Reason, &e.Message, &data); err != nil {
		return e, err
	}
	e.Time = fromNanos(at)
	if err := decode(data, &e.Data); err != nil {
		return e, fmt.Errorf("event %d data: %w", e.ID, err)
	}
	return e, nil
}

// KV returns the value of key and whether it exists.
func (t *tx) KV(key string) (string, bool, error) {
	var v string
	err := t.queryRow("SELECT value FROM kv WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%s: kv %q: %w", t.name, key, err)
	}
	return v, true, nil
}

// PutKV sets key to value.
func (t *tx) PutKV(key, value string) error {
	_, err := t.exec("INSERT INTO kv (key, value) VALUES (?, ?)"+
		" ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value)
	if err != nil {
		return fmt.Errorf("%s: put kv %q: %w", t.name, key, err)
	}
	return nil
}

// ClaimKV sets key to value only if key is absent and reports whether it did.
func (t *tx) ClaimKV(key, value string) (bool, error) {
	res, err := t.exec("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
		key, value)
	if err != nil {
		return false, fmt.Errorf("%s: claim kv %q: %w", t.name, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: claim kv %q: %w", t.name, key, err)
	}
	return n == 1, nil
}

// DeleteKV removes key; deleting a missing key is not an error.
func (t *tx) DeleteKV(key string) error {
	if _, err := t.exec("DELETE FROM kv WHERE key = ?", key); err != nil {
		return fmt.Errorf("%s: delete kv %q: %w", t.name, key, err)
	}
	return nil
}
