package sqltx

import (
	"database/sql"
	"fmt"
	"strings"

	"herd"
	"herd/internal/store"
)

var sessionCols = []string{
	"name", "role", "slot", "host", "state", "incarnation", "runtime_kind",
	"runtime", "process", "activity", "restarts", "last_crash_at", "backoff_until",
	"exit", "started_at", "last_activity_at", "state_since", "archived", "snapshot",
}

var (
	sessionSelect = "SELECT " + strings.Join(sessionCols, ", ") + " FROM sessions"
	sessionUpsert = upsertSQL("sessions", "name", sessionCols)
)

// Session returns the session called name, or an error wrapping
// store.ErrNotFound.
func (t *tx) Session(name string) (herd.Session, error) {
	s, err := scanSession(t.queryRow(sessionSelect+" WHERE name = ?", name))
	if err != nil {
		return herd.Session{}, t.notFound(err, "session", name)
	}
	return s, nil
}

// Sessions lists every session by name.
func (t *tx) Sessions() ([]herd.Session, error) {
	return collect(t, "sessions", scanSession, sessionSelect+" ORDER BY name")
}

// SessionsOnHost lists the sessions of host by name.
func (t *tx) SessionsOnHost(host string) ([]herd.Session, error) {
	return collect(t, "sessions on "+host, scanSession,
		sessionSelect+" WHERE host = ? ORDER BY name", host)
}

// SessionsWithPIDs lists every session by name with the pid of its open
// incarnation, in one query (a left join).
func (t *tx) SessionsWithPIDs() ([]store.SessionPID, error) {
	cols := make([]string, len(sessionCols))
	for i, c := range sessionCols {
		cols[i] = "s." + c
	}
	return t.sessionsWithPIDs("sessions with pids", cols, "")
}

// SessionsWithPIDsNotOnHost lists the sessions of every host but host by
// name, with the pids of their open incarnations and without their
// snapshots (a NULL in the snapshot's place: no JSON to decode).
func (t *tx) SessionsWithPIDsNotOnHost(host string) ([]store.SessionPID, error) {
	cols := make([]string, len(sessionCols))
	for i, c := range sessionCols {
		cols[i] = "s." + c
		if c == "snapshot" {
			cols[i] = "CAST(NULL AS TEXT)"
		}
	}
	return t.sessionsWithPIDs("sessions with pids not on "+host, cols, " WHERE s.host <> ?", host)
}

// SessionNamesOnHost lists the names of host's sessions.
func (t *tx) SessionNamesOnHost(host string) ([]string, error) {
	return collect(t, "session names on "+host, func(sc scanner) (string, error) {
		var name string
		err := sc.Scan(&name)
		return name, err
	}, "SELECT name FROM sessions WHERE host = ?", host)
}

// sessionsWithPIDs selects cols of the sessions where says, with the pid
// of each one's open incarnation.
func (t *tx) sessionsWithPIDs(what string, cols []string, where string, args ...any) ([]store.SessionPID, error) {
	q := "SELECT " + strings.Join(cols, ", ") + ", COALESCE(NULLIF(i.pid, 0), i.root_pid, 0)" +
		" FROM sessions s LEFT JOIN incarnations i ON i.id = s.incarnation AND i.ended_at IS NULL" + where + " ORDER BY s.name"
	return collect(t, what, func(sc scanner) (store.SessionPID, error) {
		var sp store.SessionPID
		var err error
		sp.Session, err = scanSession(pidScanner{sc, &sp.PID})
		return sp, err
	}, q, args...)
}

// pidScanner scans one more column, a pid, after the session's.
type pidScanner struct {
	scanner
	pid *int
}

func (p pidScanner) Scan(dest ...any) error {
	return p.scanner.Scan(append(dest, p.pid)...)
}

func scanSession(sc scanner) (herd.Session, error) {
	var (
		s                                      herd.Session
		lastCrash, backoff, started, lastActiv sql.NullInt64
		exit, snapshot                         sql.NullString
		stateSince, archived                   int64
	)
	err := sc.Scan(&s.Name, &s.Role, &s.Index, &s.Host, &s.State, &s.Incarnation,
		&s.RuntimeKind, &s.Runtime, &s.Process, &s.Activity, &s.Restarts, &lastCrash,
		&backoff, &exit, &started, &lastActiv, &stateSince, &archived, &snapshot)
	if err != nil {
		return s, err
	}
	s.LastCrashAt = fromNullNanos(lastCrash)
	s.BackoffUntil = fromNullNanos(backoff)
	s.StartedAt = fromNullNanos(started)
	s.LastActivityAt = fromNullNanos(lastActiv)
	s.StateSince = fromNanos(stateSince)
	s.Archived = archived != 0
	if exit.Valid {
		s.Exit = new(herd.Exit)
		if err := decodeExit(exit.String, s.Exit); err != nil {
			return s, fmt.Errorf("session %q exit: %w", s.Name, err)
		}
		// JSON keeps the writer's zone; every time the store returns is UTC.
		s.Exit.At = s.Exit.At.UTC()
	}
	if snapshot.Valid {
		s.Snapshot = new(herd.Snapshot)
		if err := decode(snapshot.String, s.Snapshot); err != nil {
			return s, fmt.Errorf("session %q snapshot: %w", s.Name, err)
		}
	}
	return s, nil
}

// PutSession inserts or replaces s.
func (t *tx) PutSession(s herd.Session) error {
	if s.Name == "" {
		return fmt.Errorf("%s: put session: empty name", t.name)
	}
	fail := func(err error) error { return fmt.Errorf("%s: put session %q: %w", t.name, s.Name, err) }
	lastCrash, err := nullNanos(s.LastCrashAt)
	if err != nil {
		return fail(err)
	}
	backoff, err := nullNanos(s.BackoffUntil)
	if err != nil {
		return fail(err)
	}
	started, err := nullNanos(s.StartedAt)
	if err != nil {
		return fail(err)
	}
	lastActivity, err := nullNanos(s.LastActivityAt)
	if err != nil {
		return fail(err)
	}
	stateSince, err := nanos(s.StateSince)
	if err != nil {
		return fail(err)
	}
	exit, err := encodeNullable(s.Exit, s.Exit == nil)
	if err != nil {
		return fail(err)
	}
	snapshot, err := encodeNullable(s.Snapshot, s.Snapshot == nil)
	if err != nil {
		return fail(err)
	}
	_, err = t.exec(sessionUpsert, s.Name, s.Role, s.Index, s.Host, string(s.State),
		s.Incarnation, s.RuntimeKind, string(s.Runtime), string(s.Process),
		string(s.Activity), s.Restarts, lastCrash, backoff, exit, started, lastActivity,
		stateSince, boolInt(s.Archived), snapshot)
	if err != nil {
		return fail(err)
	}
	return nil
}

// DeleteSession removes the session called name; deleting a missing session
// is not an error.
func (t *tx) DeleteSession(name string) error {
	if _, err := t.exec("DELETE FROM sessions WHERE name = ?", name); err != nil {
		return fmt.Errorf("%s: delete session %q: %w", t.name, name, err)
	}
	return nil
}
