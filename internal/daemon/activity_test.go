package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/spool"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// wdEnv is a daemon that is not running: tests call its parts directly,
// with explicit times, on a session that has no process.
type wdEnv struct {
	d   *Daemon
	st  store.Store
	dir string
	t0  time.Time
}

const wdSession = "w-0"

func newWDEnv(t *testing.T) *wdEnv {
	t.Helper()
	return newWDEnvLog(t, io.Discard)
}

// newWDEnvLog is newWDEnv with the daemon logging to w.
func newWDEnvLog(t *testing.T, w io.Writer) *wdEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := testConfig()
	cfg.Daemon.Host = "wd-test"
	cfg.Watchdog.StallAfter = time.Minute
	cfg.Watchdog.StallRepeat = time.Minute
	logger := slog.New(slog.NewTextHandler(w, nil))
	d, err := New(Options{StateDir: dir, Config: cfg, Store: st, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	// The timeline lies in the past, so reports keep their own times.
	e := &wdEnv{d: d, st: st, dir: dir, t0: time.Now().Add(-3 * time.Hour).UTC()}
	e.launch(t, "inc-1")
	return e
}

// launch records a running exec incarnation without a process.
func (e *wdEnv) launch(t *testing.T, inc string) {
	t.Helper()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		s := herd.Session{Name: wdSession, Role: "w", Host: e.d.host, State: herd.StateRunning, Incarnation: inc,
			RuntimeKind: herd.RuntimeExec, Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityUnknown,
			StartedAt: &e.t0, StateSince: e.t0}
		if err := tx.PutSession(s); err != nil {
			return err
		}
		return tx.PutIncarnation(herd.Incarnation{ID: inc, Session: wdSession, Host: e.d.host,
			RuntimeKind: herd.RuntimeExec, Argv: []string{"agent"}, StartedAt: e.t0})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *wdEnv) at(d time.Duration) time.Time { return e.t0.Add(d) }

func (e *wdEnv) report(t *testing.T, inc string, at time.Duration, payload string) string {
	t.Helper()
	return e.reportFrom(t, inc, at, payload, false)
}

// reportFrom is report, from the spool when spooled.
func (e *wdEnv) reportFrom(t *testing.T, inc string, at time.Duration, payload string, spooled bool) string {
	t.Helper()
	msg, err := e.d.watchdog.ApplyReport(context.Background(), api.ActivityReport{
		Session: wdSession, Incarnation: inc, Payload: []byte(payload), At: e.at(at)}, spooled)
	if err != nil {
		t.Fatalf("[report %s] expected no error, got %v", payload, err)
	}
	return msg
}

func (e *wdEnv) session(t *testing.T) (s herd.Session, inc herd.Incarnation) {
	t.Helper()
	err := e.st.View(context.Background(), func(tx store.Tx) (err error) {
		if s, err = tx.Session(wdSession); err != nil {
			return err
		}
		inc, err = tx.Incarnation(s.Incarnation)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, inc
}

func (e *wdEnv) events(t *testing.T, kind string) []herd.Event {
	t.Helper()
	var out []herd.Event
	err := e.st.View(context.Background(), func(tx store.Tx) (err error) {
		out, err = tx.Events(store.EventFilter{Session: wdSession, Kind: kind})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hook(event string, extra ...string) string {
	fields := []string{`"session_id":"agent-42"`, `"hook_event_name":"` + event + `"`}
	return "{" + strings.Join(append(fields, extra...), ",") + "}"
}

// TestActivityThroughDaemon drives hook reports and watchdog ticks through
// the daemon: the activity axis follows the hooks, waiting is sticky (no
// notification nor time clears it, and it is not a stall), events are
// written on transitions only, and silence while working is a stall.
func TestActivityThroughDaemon(t *testing.T) {
	e := newWDEnv(t)
	ctx := context.Background()
	type step struct {
		name     string
		do       func()
		activity herd.Activity
		state    herd.State
		// activityEvents is the number of activity events written so far.
		activityEvents int
	}
	steps := []step{
		{"session start", func() { e.report(t, "inc-1", time.Second, hook("SessionStart")) }, herd.ActivityIdle, herd.StateRunning, 1},
		{"tool starts", func() { e.report(t, "inc-1", 2*time.Second, hook("PreToolUse", `"tool_name":"Bash"`)) }, herd.ActivityWorking, herd.StateRunning, 2},
		{"a long tool is no stall at 2m", func() { e.d.watchdog.Tick(ctx, e.at(2*time.Minute)) }, herd.ActivityWorking, herd.StateRunning, 2},
		{"permission request", func() {
			e.report(t, "inc-1", 2*time.Minute+10*time.Second, hook("PermissionRequest", `"tool_name":"Bash"`))
		}, herd.ActivityWaiting, herd.StateRunning, 3},
		{"waiting does not expire nor stall", func() { e.d.watchdog.Tick(ctx, e.at(time.Hour)) }, herd.ActivityWaiting, herd.StateRunning, 3},
		{"other notifications keep waiting", func() {
			e.report(t, "inc-1", time.Hour, hook("Notification", `"notification_type":"auth_success"`, `"message":"signed in"`))
		}, herd.ActivityWaiting, herd.StateRunning, 3},
		{"the tool ran", func() { e.report(t, "inc-1", time.Hour+time.Minute, hook("PostToolUse", `"tool_name":"Bash"`)) }, herd.ActivityWorking, herd.StateRunning, 4},
		{"silent while working: stalled", func() { e.d.watchdog.Tick(ctx, e.at(time.Hour+2*time.Minute+30*time.Second)) }, herd.ActivityWorking, herd.StateStalled, 4},
		{"stalled still: a warning", func() { e.d.watchdog.Tick(ctx, e.at(time.Hour+3*time.Minute+30*time.Second)) }, herd.ActivityWorking, herd.StateStalled, 4},
		{"turn over", func() { e.report(t, "inc-1", time.Hour+4*time.Minute, hook("Stop")) }, herd.ActivityIdle, herd.StateStalled, 5},
		{"a spooled report from before the turn over, ingested late, changes nothing", func() {
			e.reportFrom(t, "inc-1", time.Hour+3*time.Minute+50*time.Second, hook("PreToolUse", `"tool_name":"Bash"`), true)
		}, herd.ActivityIdle, herd.StateStalled, 5},
		{"idle unstalls", func() { e.d.watchdog.Tick(ctx, e.at(time.Hour+4*time.Minute+time.Second)) }, herd.ActivityIdle, herd.StateRunning, 5},
		{"the idle reminder keeps idle (never waiting)", func() {
			e.report(t, "inc-1", time.Hour+4*time.Minute+2*time.Second, hook("Notification", `"notification_type":"idle_prompt"`, `"message":"Claude is waiting for your input"`))
		}, herd.ActivityIdle, herd.StateRunning, 5},
		{"stale incarnation is ignored", func() {
			if msg := e.report(t, "inc-0", time.Hour+5*time.Minute, hook("PreToolUse")); !strings.Contains(msg, "ignored") {
				t.Errorf("[stale] expected the report to be ignored, got %q", msg)
			}
		}, herd.ActivityIdle, herd.StateRunning, 5},
		{"session end", func() { e.report(t, "inc-1", time.Hour+6*time.Minute, hook("SessionEnd")) }, herd.ActivityIdle, herd.StateRunning, 6},
	}
	for _, st := range steps {
		st.do()
		s, inc := e.session(t)
		if s.Activity != st.activity || s.State != st.state {
			t.Fatalf("[%s] expected %s/%s, got %s/%s", st.name, st.state, st.activity, s.State, s.Activity)
		}
		if n := len(e.events(t, herd.EventActivity)); n != st.activityEvents {
			t.Fatalf("[%s] expected %d activity events, got %d", st.name, st.activityEvents, n)
		}
		if inc.AgentSessionID != "agent-42" {
			t.Fatalf("[%s] expected the agent session id recorded, got %q", st.name, inc.AgentSessionID)
		}
	}
	s, _ := e.session(t)
	if want := e.at(time.Hour + 6*time.Minute); s.LastActivityAt == nil || !s.LastActivityAt.Equal(want) {
		t.Errorf("[last activity] expected %v, got %v", want, s.LastActivityAt)
	}
	stalled, warnings, unstalled := e.events(t, herd.EventStalled), e.events(t, herd.EventStallWarning), e.events(t, herd.EventUnstalled)
	if len(stalled) != 1 || len(warnings) != 1 || len(unstalled) != 1 {
		t.Fatalf("[stall events] expected 1 stalled, 1 warning, 1 unstalled, got %d, %d, %d", len(stalled), len(warnings), len(unstalled))
	}
	if _, ok := stalled[0].Data["diagnostics_error"]; !ok {
		t.Errorf("[stalled] expected a diagnostics error (no process), got %v", stalled[0].Data)
	}
	if warnings[0].Data["count"] != float64(1) {
		t.Errorf("[warning] expected count 1, got %v", warnings[0].Data["count"])
	}
	sum := e.d.watchdog.Summary("inc-1")
	if sum["hook_events"] != 9 || sum["stall_warnings"] != 1 || sum["last_event_type"] != "SessionEnd" || sum["agent_session_id"] != "agent-42" {
		t.Errorf("[summary] expected 9 hooks (the late one counted), 1 warning, last SessionEnd, agent-42, got %v", sum)
	}
}

func TestActivityHandlerRejectsGarbage(t *testing.T) {
	e := newWDEnv(t)
	cases := []struct {
		name string
		body string
		code int
	}{
		{"not json", "garbage", http.StatusBadRequest},
		{"garbage payload", `{"session":"w-0","incarnation":"inc-1","payload":"` + b64("not json") + `"}`, http.StatusBadRequest},
		{"no event name", `{"session":"w-0","incarnation":"inc-1","payload":"` + b64(`{"session_id":"x"}`) + `"}`, http.StatusBadRequest},
		{"no session", `{"incarnation":"inc-1","event":"Stop","payload":"` + b64(`{}`) + `"}`, http.StatusBadRequest},
		{"event from the argument", `{"session":"w-0","incarnation":"inc-1","event":"Stop","payload":"` + b64(`{}`) + `"}`, http.StatusOK},
		{"unknown session", `{"session":"x-0","incarnation":"inc-1","event":"Stop","payload":"` + b64(`{}`) + `"}`, http.StatusOK},
	}
	h := e.d.server.Handler()
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/activity", strings.NewReader(c.body)))
		if rec.Code != c.code {
			t.Errorf("[%s] expected %d, got %d: %s", c.name, c.code, rec.Code, rec.Body.String())
		}
	}
	if s, _ := e.session(t); s.Activity != herd.ActivityIdle {
		t.Errorf("[after] expected idle from the one good report, got %s", s.Activity)
	}
}

func b64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

// TestSpoolIngest spools reports as `herd hook` does with no daemon, then
// ingests them: applied in order, bad lines skipped, the file removed, and
// a writer after the takeover starts a fresh file.
func TestSpoolIngest(t *testing.T) {
	e := newWDEnv(t)
	for i, p := range []string{hook("SessionStart"), hook("PreToolUse", `"tool_name":"Read"`), hook("PermissionRequest")} {
		rep := api.ActivityReport{Session: wdSession, Incarnation: "inc-1", Payload: []byte(p), At: e.at(time.Duration(i+1) * time.Second)}
		if err := spool.Append(spool.Dir(e.dir), rep); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(spool.Dir(e.dir), wdSession+".jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "not a report")
	f.Close()
	if err := spool.Append(spool.Dir(e.dir), api.ActivityReport{Session: "../evil", Incarnation: "x"}); err == nil {
		t.Error("[bad name] expected an error, got none")
	}

	e.d.watchdog.IngestAll(context.Background())
	s, _ := e.session(t)
	if s.Activity != herd.ActivityWaiting {
		t.Errorf("[ingested] expected waiting, got %s", s.Activity)
	}
	if want := e.at(3 * time.Second); s.LastActivityAt == nil || !s.LastActivityAt.Equal(want) {
		t.Errorf("[ingested] expected last activity %v, got %v", want, s.LastActivityAt)
	}
	left, _ := os.ReadDir(spool.Dir(e.dir))
	if len(left) != 0 {
		t.Errorf("[ingested] expected an empty spool dir, got %d file(s)", len(left))
	}
	if n := len(e.events(t, herd.EventActivity)); n != 3 {
		t.Errorf("[ingested] expected 3 activity events (-> idle, -> working, -> waiting), got %d", n)
	}
}

// TestEventsBadQuery: regression — a negative or garbled limit or after
// answered 500 (the store refused it); it is the client's error.
func TestEventsBadQuery(t *testing.T) {
	e := newWDEnv(t)
	h := e.d.server.Handler()
	for _, q := range []string{"limit=-1", "limit=x", "after=-3", "after=1e3"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/events?"+q, nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("[%s] expected 400 … got %d %s", q, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/events?limit=2&after=0", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("[good] expected 200 … got %d %s", rec.Code, rec.Body)
	}
}

// TestHookReportSpooledAfterDelivery: regression — a hook whose answer came
// after its time budget spooled the report the daemon had applied already,
// and the copy was counted a second time. The copy is dropped; another
// report of the same moment is not.
func TestHookReportSpooledAfterDelivery(t *testing.T) {
	e := newWDEnv(t)
	e.report(t, "inc-1", time.Second, hook("PreToolUse", `"tool_name":"Bash"`))
	if msg := e.reportFrom(t, "inc-1", time.Second, hook("PreToolUse", `"tool_name":"Bash"`), true); !strings.Contains(msg, "applied already") {
		t.Errorf("[spooled copy] expected it dropped … got %q", msg)
	}
	if n := e.d.watchdog.Summary("inc-1")["hook_events"]; n != 1 {
		t.Errorf("[spooled copy] expected one hook counted … got %v", n)
	}
	e.reportFrom(t, "inc-1", 2*time.Second, hook("Stop"), true)
	if n := e.d.watchdog.Summary("inc-1")["hook_events"]; n != 2 {
		t.Errorf("[another report] expected two hooks counted … got %v", n)
	}
}

// TestActivityToolClearedAtTurnEnd: a tool named in one turn is not
// carried into the next turn's activity events (the issue saw `idle ->
// working (UserPromptSubmit Bash)`), whether the turn ended with a hook
// or was interrupted with none; the summary keeps the last tool used.
func TestActivityToolClearedAtTurnEnd(t *testing.T) {
	e := newWDEnv(t)
	e.report(t, "inc-1", time.Second, hook("SessionStart"))
	e.report(t, "inc-1", 2*time.Second, hook("UserPromptSubmit"))
	e.report(t, "inc-1", 3*time.Second, hook("PreToolUse", `"tool_name":"Bash"`))
	e.report(t, "inc-1", 4*time.Second, hook("PermissionRequest", `"tool_name":"Bash"`))
	e.report(t, "inc-1", 5*time.Second, hook("PostToolUse", `"tool_name":"Bash"`))
	e.report(t, "inc-1", 6*time.Second, hook("Stop"))
	e.report(t, "inc-1", 7*time.Second, hook("UserPromptSubmit"))
	e.report(t, "inc-1", 8*time.Second, hook("PreToolUse", `"tool_name":"Read"`))
	e.report(t, "inc-1", 9*time.Second, hook("PermissionRequest", `"tool_name":"Read"`))
	// Interrupted: no Stop; the next prompt starts a turn of its own.
	e.report(t, "inc-1", 10*time.Second, hook("UserPromptSubmit"))
	var got []string
	for _, ev := range e.events(t, herd.EventActivity) {
		got = append(got, ev.Message)
	}
	want := []string{
		"unknown -> idle (SessionStart)",
		"idle -> working (UserPromptSubmit)",
		"working -> waiting (PermissionRequest Bash)",
		"waiting -> working (PostToolUse Bash)",
		"working -> idle (Stop)",
		"idle -> working (UserPromptSubmit)",
		"working -> waiting (PermissionRequest Read)",
		"waiting -> working (UserPromptSubmit)",
	}
	if len(got) != len(want) {
		t.Fatalf("expected activity events %q, got %q", want, got)
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("[event %d] expected a message ending %q, got %q", i, want[i], got[i])
		}
	}
	if sum := e.d.watchdog.Summary("inc-1"); sum["last_tool"] != "Read" {
		t.Errorf("[summary] expected last_tool Read, got %v", sum["last_tool"])
	}
}
