package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
)

// simRole is a role of the simulated agent in a tmux pane that plays the
// hook script hooks, one hook per interval, and then waits for input.
func simRole(name string, replicas int, workdir, extra, hooks string, args ...string) string {
	argv := []string{bin, "sim", "--interval", "300ms", "--wait-input", "--hooks", hooks}
	argv = append(argv, args...)
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`
[[role]]
name = %q
replicas = %d
command = [%s]
workdir = %q
runtime = "tmux"
restart = { policy = "always" }
%s
`, name, replicas, strings.Join(q, ", "), workdir, extra)
}

// activityEvents returns session's activity events, oldest first.
func activityEvents(e *env, session string) []herd.Event {
	return e.events("--session", session, "--kind", herd.EventActivity)
}

// TestAccountRateLimitBlocksAccount: a rate limit one session of an
// account meets blocks the account's other sessions (not another
// account's) with its reset time and holds the account's launches; at
// the reset they continue one spacing apart — "continue" typed only where
// the turn ended on the limit, the others back to what they were doing —
// and the launch held goes ahead. No crash is counted, no backoff spent.
func TestAccountRateLimitBlocksAccount(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	const spacing = 2 * time.Second
	e := newEnv(t, fmt.Sprintf("[auto_continue]\nspacing = %q\njitter = \"0s\"\n", spacing))
	e.start()
	// Two sessions of account team (one idle, one in a turn) and one of
	// account solo, settled before the limit comes.
	e.must("apply", "-f", e.writeRoles("peers.toml",
		simRole("idler", 1, e.dir, `account = "team"`, "SessionStart,Stop")+
			simRole("busy", 1, e.dir, `account = "team"`, "SessionStart,UserPromptSubmit")+
			simRole("other", 1, e.dir, `account = "solo"`, "SessionStart,UserPromptSubmit")))
	for name, want := range map[string]herd.Activity{"idler-0": herd.ActivityIdle, "busy-0": herd.ActivityWorking, "other-0": herd.ActivityWorking} {
		e.waitFor(name+" "+string(want), 20*time.Second, func() bool {
			v, ok := e.session(name)
			return ok && v.Activity == want
		})
	}
	// The third session of team meets the limit (reset named 8 s ahead).
	e.must("apply", "-f", e.writeRoles("limited.toml",
		simRole("limited", 1, e.dir, `account = "team"`, "SessionStart,StopFailure:rate_limit", "--reset-in", "8s")))
	blocked := func(name string) bool { v, ok := e.session(name); return ok && v.Activity == herd.ActivityBlocked }
	e.waitFor("the account's three sessions blocked", 20*time.Second, func() bool {
		return blocked("limited-0") && blocked("idler-0") && blocked("busy-0")
	})
	blockedAt := time.Now()
	own := activityEvents(e, "limited-0")
	reset := own[len(own)-1].Data["reset_at"]
	for _, name := range []string{"idler-0", "busy-0"} {
		evs := activityEvents(e, name)
		ev := evs[len(evs)-1]
		if ev.Reason != "rate_limited" || ev.Data["source"] != "account" || ev.Data["limited_by"] != "limited-0" || ev.Data["reset_at"] != reset || ev.Data["account"] != "team" {
			t.Errorf("[%s] expected blocked by limited-0's limit until %v, got %+v", name, reset, ev)
		}
	}
	if v, _ := e.session("other-0"); v.Activity != herd.ActivityWorking {
		t.Errorf("[other account] expected other-0 left working, got %s", v.Activity)
	}
	// A launch on the blocked account waits for the reset.
	e.must("scale", "busy", "--replicas", "2")
	resetAt, err := time.Parse(time.RFC3339, fmt.Sprint(reset))
	if err != nil {
		t.Fatalf("reset_at %v: %v", reset, err)
	}
	e.waitFor("the held launch of busy-1 logged", 10*time.Second, func() bool {
		b, _ := os.ReadFile(e.logPath)
		return strings.Contains(string(b), "launch held") && strings.Contains(string(b), "busy-1")
	})
	if _, ok := e.session("busy-1"); ok && time.Now().Before(resetAt) {
		t.Errorf("[held] expected no busy-1 before the reset %s", resetAt)
	}

	turns := map[string]time.Time{}
	e.waitFor("the three sessions continued", 40*time.Second, func() bool {
		for _, name := range []string{"limited-0", "idler-0", "busy-0"} {
			for _, ev := range activityEvents(e, name) {
				if ev.Reason == "auto_continue" {
					turns[name] = ev.Time
				}
			}
		}
		return len(turns) == 3
	})
	// The session that met the limit first, then the others by name (each
	// is given its turn as it is blocked), one spacing apart: each turn is
	// due at reset + i*spacing, and its event is written once it is done
	// (for limited-0, once "continue" is typed: up to 2 s for the pane to
	// show it).
	order := []string{"limited-0", "busy-0", "idler-0"}
	for i, name := range order {
		due := resetAt.Add(time.Duration(i) * spacing)
		got := turns[name]
		t.Logf("turn %d: %s continued %s after the reset (due +%s)", i, name, got.Sub(resetAt).Round(time.Millisecond), due.Sub(resetAt))
		if got.Before(due) || got.After(due.Add(5*time.Second)) {
			t.Errorf("[turn %d] expected %s continued at %s, got %s", i, name, due, got)
		}
		if i > 0 {
			t.Logf("spacing %s -> %s: %s (configured %s)", order[i-1], name, got.Sub(turns[order[i-1]]).Round(time.Millisecond), spacing)
		}
	}
	t.Logf("blocked %s before the reset", resetAt.Sub(blockedAt).Round(time.Millisecond))
	for name, want := range map[string]herd.Activity{"idler-0": herd.ActivityIdle, "busy-0": herd.ActivityWorking} {
		if v, _ := e.session(name); v.Activity != want {
			t.Errorf("[%s] expected back to %s, got %s", name, want, v.Activity)
		}
	}
	e.waitFor("continue typed into limited-0", 20*time.Second, func() bool {
		return strings.Contains(e.try("logs", "limited-0"), "You said: continue")
	})
	for _, name := range []string{"idler-0", "busy-0"} {
		if strings.Contains(e.try("logs", name), "You said") {
			t.Errorf("[%s] expected nothing typed into a session whose own turn did not end on the limit", name)
		}
	}
	// The held launch goes ahead after the reset.
	v := e.waitState("busy-1", herd.StateRunning, 20*time.Second)
	if v.StartedAt == nil || v.StartedAt.Before(resetAt) {
		t.Errorf("[held launch] expected busy-1 started after the reset %s, got %v", resetAt, v.StartedAt)
	}
	for _, s := range e.sessions() {
		if s.Restarts != 0 || s.BackoffUntil != nil || s.Exit != nil {
			t.Errorf("[%s] expected no crash counted and no backoff, got restarts %d, backoff %v, exit %+v; its events:\n%s", s.Name, s.Restarts, s.BackoffUntil, s.Exit, e.try("events", "--session", s.Name))
		}
	}
	for _, ev := range activityEvents(e, "other-0") {
		if ev.Data["to"] == string(herd.ActivityBlocked) {
			t.Errorf("[other account] expected other-0 never blocked, got %+v", ev)
		}
	}
	var det api.SessionDetail
	if err := json.Unmarshal([]byte(e.must("describe", "session", "busy-0", "-o", "json")), &det); err != nil || det.Account != "team" {
		t.Errorf("[describe] expected account team, got %q (%v)", det.Account, err)
	}
	for _, s := range e.sessions() {
		want := map[string]string{"limited": "team", "busy": "team", "idler": "team", "other": "solo"}[s.Role]
		if s.Account != want {
			t.Errorf("[get sessions -o json] expected %s on account %q, got %q", s.Name, want, s.Account)
		}
	}
	if out := e.must("describe", "session", "other-0"); !strings.Contains(out, "Account:") || !strings.Contains(out, "solo") {
		t.Errorf("[describe] expected the account shown, got %q", out)
	}
}

// TestBudgetStopsAtIdle: a role's budget spent (the spend read from
// HERD_SPEND_FILE, the daemon's stand-in for the usage ledger) is told on
// [notify], stops a session in a turn only at its next idle moment, stops
// a budget_hard session at once, holds the roles' launches, and leaves a
// role with no budget alone; no crash is counted. With the spend under the
// budget again (a new day) the slot resumes.
func TestBudgetStopsAtIdle(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	hook := newHookServer(t, 0)
	e := newEnv(t, fmt.Sprintf("[notify]\nwebhook = %q\n", hook.URL))
	spend := filepath.Join(e.dir, "spend.json")
	e.extraEnv = append(e.extraEnv, "HERD_SPEND_FILE="+spend)
	writeSpend := func(v map[string]float64) {
		b, _ := json.Marshal(v)
		tmp := spend + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, spend); err != nil {
			t.Fatal(err)
		}
	}
	writeSpend(map[string]float64{})
	e.start()
	// soft works for about 25 s (62 hooks 400 ms apart), then is idle;
	// hard and free work on.
	turn := "SessionStart,UserPromptSubmit," + strings.Repeat("PreToolUse:Bash,PostToolUse:Bash,", 30) + "Stop"
	e.must("apply", "-f", e.writeRoles("roles.toml",
		simRole("soft", 1, e.dir, "daily_budget_usd = 1.5", turn, "--interval", "400ms")+
			simRole("hard", 1, e.dir, "daily_budget_usd = 1.5\nbudget_hard = true", "SessionStart,UserPromptSubmit")+
			simRole("free", 1, e.dir, "", "SessionStart,UserPromptSubmit")))
	working := func(name string) bool { v, ok := e.session(name); return ok && v.Activity == herd.ActivityWorking }
	e.waitFor("the three working", 20*time.Second, func() bool { return working("soft-0") && working("hard-0") && working("free-0") })
	spentAt := time.Now()
	writeSpend(map[string]float64{"soft": 2, "hard": 2, "free": 100})

	v := e.waitState("hard-0", herd.StateStopped, 20*time.Second)
	hardStopped := time.Now()
	if v.Exit == nil || v.Exit.Reason != herd.ReasonBudget {
		t.Errorf("[hard] expected stopped with reason budget, got %+v", v.Exit)
	}
	// The look that stopped hard-0 saw soft-0 in its turn: it runs on —
	// unless its turn has ended meanwhile (a slow start leaves less of
	// it); the stop after its Stop hook is checked below either way.
	turnEnded := func() bool {
		for _, ev := range e.events("--session", "soft-0", "--kind", herd.EventActivity) {
			if ev.Data["to"] == string(herd.ActivityIdle) && ev.Data["event"] == "Stop" {
				return true
			}
		}
		return false
	}
	if s, _ := e.session("soft-0"); s.State != herd.StateRunning && !turnEnded() {
		t.Errorf("[soft] expected soft-0 running on in its turn when hard-0 stopped, got %s %s", s.State, s.Activity)
	}
	stops := eventsOf(e.events("--session", "hard-0"), herd.EventStopped, herd.ReasonBudget)
	if len(stops) != 1 || stops[0].Data["activity"] != string(herd.ActivityWorking) || stops[0].Data["budget_hard"] != true {
		t.Errorf("[hard] expected one budget stop in the turn, got %+v", stops)
	}

	v = e.waitState("soft-0", herd.StateStopped, 60*time.Second) // the rest of its 25 s turn
	if v.Exit == nil || v.Exit.Reason != herd.ReasonBudget {
		t.Errorf("[soft] expected stopped with reason budget, got %+v", v.Exit)
	}
	evs := e.events("--session", "soft-0")
	var idleAt time.Time
	for _, ev := range evs {
		if ev.Kind == herd.EventActivity && ev.Data["to"] == string(herd.ActivityIdle) && ev.Data["event"] == "Stop" {
			idleAt = ev.Time
		}
	}
	stops = eventsOf(evs, herd.EventStopped, herd.ReasonBudget)
	if idleAt.IsZero() || len(stops) != 1 || stops[0].Time.Before(idleAt) || stops[0].Data["activity"] != string(herd.ActivityIdle) {
		t.Fatalf("[soft] expected one budget stop after its turn ended (idle at %s), got %+v", idleAt, stops)
	}
	t.Logf("spend written -> hard-0 stopped: %s; soft-0 idle -> stopped: %s", hardStopped.Sub(spentAt).Round(time.Millisecond), stops[0].Time.Sub(idleAt).Round(time.Millisecond))

	e.waitFor("the budget told on the webhook", 20*time.Second, func() bool {
		for _, r := range hook.requests() {
			if strings.Contains(r.body, `"reason":"budget"`) && strings.Contains(r.body, "role soft spent its daily budget") {
				return true
			}
		}
		return false
	})
	e.waitFor("the held launches logged", 10*time.Second, func() bool {
		b, _ := os.ReadFile(e.logPath)
		return strings.Contains(string(b), "launch held") && strings.Contains(string(b), "soft-0") && strings.Contains(string(b), "hard-0")
	})
	for _, name := range []string{"soft-0", "hard-0"} {
		if s, _ := e.session(name); s.State != herd.StateStopped || s.Restarts != 0 || s.BackoffUntil != nil {
			t.Errorf("[%s] expected stopped, no crash counted, no backoff, got %s restarts %d backoff %v; its events:\n%s", name, s.State, s.Restarts, s.BackoffUntil, e.try("events", "--session", name))
		}
	}
	if s, _ := e.session("free-0"); s.State != herd.StateRunning {
		t.Errorf("[free] expected a role with no budget left running, got %s", s.State)
	}

	if out := e.must("describe", "role", "hard"); !strings.Contains(out, "$1.50 a day") || !strings.Contains(out, "budget_hard") {
		t.Errorf("[describe role] expected the hard budget shown, got %q", out)
	}
	var det api.SessionDetail
	if err := json.Unmarshal([]byte(e.must("describe", "session", "soft-0", "-o", "json")), &det); err != nil || det.Budget == nil ||
		det.Budget.DailyBudgetUSD != 1.5 || det.Budget.BudgetHard {
		t.Errorf("[describe] expected soft-0's budget of 1.50, not hard, got %+v (%v)", det.Budget, err)
	}
	// A new day: the spend is under the budget again; the slots launch,
	// resuming (not a crash relaunch).
	writeSpend(map[string]float64{})
	e.waitState("soft-0", herd.StateRunning, 20*time.Second)
	if n := len(eventsOf(e.events("--session", "soft-0"), herd.EventResumed, "")); n != 1 {
		t.Errorf("[next day] expected soft-0 resumed once, got %d resumed events", n)
	}
}

// TestExecRateLimitExitIsNoCrash: an exec agent whose run ends on a rate
// limit naming its reset (the result line of its stream) is no crash: it
// waits in backoff until the reset with its restart count untouched, then
// relaunches.
func TestExecRateLimitExitIsNoCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "[restart]\ninitial_backoff = \"100ms\"\n")
	e.start()
	e.must("run", "limited", "--runtime", "exec", "--", bin, "sim", "--interval", "200ms", "--exit-after", "1s", "--exit-code", "1", "--reset-in", "5s")
	var died time.Time
	e.waitFor("limited-0 waiting for the reset", 20*time.Second, func() bool {
		v, ok := e.session("limited-0")
		if ok && v.State == herd.StateBackoff {
			died = time.Now()
			return true
		}
		return false
	})
	v, _ := e.session("limited-0")
	if v.Restarts != 0 || v.BackoffUntil == nil || v.BackoffUntil.Sub(died) < 3*time.Second {
		t.Errorf("expected a wait of about 5 s with no crash counted, got restarts %d until %v (died %s)", v.Restarts, v.BackoffUntil, died)
	}
	evs := e.events("--session", "limited-0")
	if n := len(eventsOf(evs, herd.EventCrashed, "")); n != 0 {
		t.Errorf("expected no crashed event, got %d", n)
	}
	if b := eventsOf(evs, herd.EventBackoff, "rate_limited"); len(b) != 1 {
		t.Errorf("expected one backoff event with reason rate_limited, got %+v", eventsOf(evs, herd.EventBackoff, ""))
	}
	until := *v.BackoffUntil
	e.waitFor("limited-0 relaunched after the reset", 20*time.Second, func() bool {
		return len(eventsOf(e.events("--session", "limited-0"), herd.EventRestarted, "")) >= 1
	})
	if r := eventsOf(e.events("--session", "limited-0"), herd.EventRestarted, ""); r[0].Time.Before(until) {
		t.Errorf("expected the relaunch at the reset %s, got %s", until, r[0].Time)
	}
}

// TestBudgetFromLedger: with no spend given by hand, the budgets read the
// usage ledger: an agent launched as Claude Code whose transcript records
// more than its role's daily budget (a million opus input tokens: $5
// against $1) is stopped with reason budget (budget_hard: at once, an
// exec agent shows no turns), its launch is held, and a role of the same
// agents under no budget runs on.
func TestBudgetFromLedger(t *testing.T) {
	t.Parallel()
	fakes, work, cfgDir := t.TempDir(), t.TempDir(), t.TempDir()
	line := filepath.Join(t.TempDir(), "line")
	if err := os.WriteFile(line, []byte(claudeLine("msg_1", "claude-opus-4-8", 1_000_000, 10, 0, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cfgDir, "projects", agents.ClaudeProjectDir(work))
	script(t, filepath.Join(fakes, "claude"), fmt.Sprintf(`id=
while [ $# -gt 0 ]; do [ "$1" = --session-id ] && id=$2; shift; done
mkdir -p %[1]q
cat %[2]q >> %[1]q/"$id".jsonl
exec sleep 300`, dir, line))
	role := func(name, extra string) string {
		return fmt.Sprintf(`
[[role]]
name = %q
command = [%q]
workdir = %q
runtime = "exec"
env = { CLAUDE_CONFIG_DIR = %q }
%s
`, name, filepath.Join(fakes, "claude"), work, cfgDir, extra)
	}
	e := newEnv(t, fastRestart+role("spender", "daily_budget_usd = 1.0\nbudget_hard = true")+role("free", ""))
	e.extraEnv = append(e.extraEnv, "HERD_USAGE_INTERVAL=100ms")
	e.start()
	v := e.waitState("spender-0", herd.StateStopped, 30*time.Second)
	if v.Exit == nil || v.Exit.Reason != herd.ReasonBudget {
		t.Fatalf("expected spender-0 stopped with reason budget, got %+v", v.Exit)
	}
	if v.Usage.CostUSD < 5 {
		t.Errorf("expected the ledger's cost (over $5) on spender-0, got %+v", v.Usage)
	}
	e.waitFor("the held launch logged", 10*time.Second, func() bool {
		b, _ := os.ReadFile(e.logPath)
		return strings.Contains(string(b), "launch held") && strings.Contains(string(b), "spender-0")
	})
	if s, _ := e.session("spender-0"); s.State != herd.StateStopped || s.Restarts != 0 {
		t.Errorf("expected spender-0 stopped and held, no crash counted, got %s restarts %d", s.State, s.Restarts)
	}
	if s, _ := e.session("free-0"); s.State != herd.StateRunning {
		t.Errorf("expected free-0 (no budget, the same spend) running, got %s", s.State)
	}
}
