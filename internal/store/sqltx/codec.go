package sqltx

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Times are stored as unix nanoseconds. The zero time.Time is stored as 0,
// so the instant 1970-01-01T00:00:00Z reads back as the zero time; nothing
// herd records happens at that instant.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// nanos converts t to its column value.
func nanos(t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("time %s out of range", t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// clampNanos converts t for use in a filter, clamping it into range.
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// fromNanos converts a column value back to a UTC time.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nullNanos converts an optional time; nil becomes NULL.
func nullNanos(t *time.Time) (any, error) {
	if t == nil {
		return nil, nil
	}
	return nanos(*t)
}

// fromNullNanos converts an optional time column; NULL becomes nil.
func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// encode marshals v as JSON text.
func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// encodeNullable marshals v as JSON text, or NULL when isNil.
func encodeNullable(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	return encode(v)
}

// decode unmarshals JSON text into v. JSON numbers in untyped values (event
// data) come back as float64.
func decode(s string, v any) error {
	return json.Unmarshal([]byte(s), v)
}

// boolInt is the column value of b.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// upsertSQL is an INSERT of cols into table that updates every other column
// when a row with the same key exists. The syntax is shared by SQLite and
// PostgreSQL.
func upsertSQL(table, key string, cols []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET ",
		table, strings.Join(cols, ", "), placeholders(len(cols)), key)
	first := true
	for _, c := range cols {
		if c == key {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s = excluded.%s", c, c)
	}
	return b.String()
}

// placeholders is n comma-separated bind parameters.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
