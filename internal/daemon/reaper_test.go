package daemon

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/reaper"
	"herd/internal/store"
)

func sleeper(name string, n int) herd.Role {
	return herd.Role{Name: name, Replicas: n, Command: []string{"sleep", "3600"}}
}

func TestReapIdleDetached(t *testing.T) {
	e := newReapEnv(t, nil)
	e.role(sleeper("idle", 1))
	e.waitVerdict("idle-0", "reap", herd.ReasonIdle)
	inc := e.session("idle-0").Incarnation

	rep := e.pass(reaper.PassOptions{})
	if rep.Reaped[herd.ReasonIdle] != 1 {
		t.Fatalf("expected 1 idle reap … got %+v", rep)
	}
	s := e.session("idle-0")
	if s.State != herd.StateStopped || s.Exit == nil || s.Exit.Reason != herd.ReasonIdle || s.Snapshot == nil {
		t.Errorf("expected stopped (idle) with a snapshot … got %s %+v %v", s.State, s.Exit, s.Snapshot)
	}
	if e.hasTmux("idle-0") {
		t.Errorf("expected the tmux session gone … it is still there")
	}
	evs := e.reapedEvents()["idle-0"]
	if len(evs) != 1 || evs[0].Reason != herd.ReasonIdle || evs[0].Incarnation != inc || evs[0].Data["idle_for"] == nil {
		t.Fatalf("expected one reaped event (idle, idle_for) of %s … got %+v", inc, evs)
	}
	if secs, _ := evs[0].Data["idle_seconds"].(float64); secs < 1 {
		t.Errorf("expected idle_seconds >= 1 … got %v", evs[0].Data["idle_seconds"])
	}
	if n := e.replicas("idle"); n != 0 {
		t.Errorf("expected the role's replicas dropped to 0 … got %d", n)
	}
	// The reconciler must not relaunch it.
	e.d.slots.Reconcile(e.ctx())
	if s := e.session("idle-0"); s.State != herd.StateStopped || s.Incarnation != inc {
		t.Errorf("expected no relaunch … got %s, incarnation %s", s.State, s.Incarnation)
	}
	// A second pass finds nothing to do.
	if rep := e.pass(reaper.PassOptions{}); len(rep.Reaped) != 0 || len(rep.Candidates) != 0 {
		t.Errorf("expected an empty second pass … got %+v", rep)
	}
}

func TestReapKeepsAttached(t *testing.T) {
	e := newReapEnv(t, nil)
	e.role(sleeper("att", 2))
	e.attach("att-0")
	e.waitVerdict("att-1", "reap", herd.ReasonIdle) // att-0 is just as idle

	rep := e.pass(reaper.PassOptions{})
	c, _ := reapFind(rep, "att-0")
	if c.Action != api.ReapActionKept || c.Reason != "attached" || !c.Attached {
		t.Errorf("expected att-0 kept as attached … got %+v", c)
	}
	if c, _ := reapFind(rep, "att-1"); c.Action != api.ReapActionReaped {
		t.Errorf("expected the detached twin reaped … got %+v", c)
	}
	if s := e.session("att-0"); s.State != herd.StateRunning || !e.hasTmux("att-0") {
		t.Errorf("expected att-0 running … got %s", s.State)
	}
	if evs := e.reapedEvents()["att-0"]; len(evs) != 0 {
		t.Errorf("expected no reaped event for att-0 … got %+v", evs)
	}
}

// TestReapRecheck makes output and activity arrive between the listing and
// the kill: the re-check must keep those sessions.
func TestReapRecheck(t *testing.T) {
	e := newReapEnv(t, func(c *config.Config) { c.Reaper.IdleAfter = 3 * time.Second })
	e.role(herd.Role{Name: "out", Replicas: 1, Command: []string{"cat"}})
	e.role(sleeper("hook", 1))
	e.role(sleeper("ctl", 1))
	for _, n := range []string{"out-0", "hook-0", "ctl-0"} {
		e.waitVerdict(n, "reap", herd.ReasonIdle)
	}
	before, _ := e.pane("out-0")

	rep := e.pass(reaper.PassOptions{AfterList: func() {
		// Output: typed text echoed by the pane moves window_activity.
		if err := e.tm.SendText(e.ctx(), "out-0", "hello", true); err != nil {
			t.Errorf("send-keys: %v", err)
		}
		e.poll("output seen by tmux", func() bool {
			p, ok := e.pane("out-0")
			return ok && p.WindowActivity.After(before.WindowActivity)
		})
		// Activity: a hook reports the agent working.
		err := e.st.Update(e.ctx(), func(tx store.Tx) error {
			s, err := tx.Session("hook-0")
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			s.LastActivityAt = &now
			return tx.PutSession(s)
		})
		if err != nil {
			t.Errorf("record activity: %v", err)
		}
	}})

	for _, n := range []string{"out-0", "hook-0"} {
		c, _ := reapFind(rep, n)
		if c.Verdict != "reap" || c.Action != api.ReapActionSkipped || c.Error == "" {
			t.Errorf("[%s] expected decided reap, then skipped at the re-check … got %+v", n, c)
		}
		if s := e.session(n); s.State != herd.StateRunning || !e.hasTmux(n) {
			t.Errorf("[%s] expected still running … got %s", n, s.State)
		}
	}
	if c, _ := reapFind(rep, "ctl-0"); c.Action != api.ReapActionReaped {
		t.Errorf("[ctl-0] expected the untouched control reaped … got %+v", c)
	}
	if evs := e.reapedEvents(); len(evs["out-0"])+len(evs["hook-0"]) != 0 || len(evs["ctl-0"]) != 1 {
		t.Errorf("expected one reaped event, for ctl-0 … got %+v", evs)
	}
}

func TestReapOrphans(t *testing.T) {
	e := newReapEnv(t, func(c *config.Config) { c.Reaper.IdleAfter = time.Hour })
	work := t.TempDir() + "/work"
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	e.role(herd.Role{Name: "gone", Replicas: 1, Command: []string{"sleep", "3600"}, Workdir: work})
	e.role(sleeper("stay", 1))
	// Herd-named tmux sessions with no record, and one outside the namespace.
	for _, n := range []string{"ghost-3", "notes"} {
		if _, err := e.tm.NewSession(e.ctx(), n, t.TempDir(), nil, []string{"sleep", "3600"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(work); err != nil {
		t.Fatal(err)
	}

	rep := e.pass(reaper.PassOptions{})
	if rep.Reaped[herd.ReasonOrphan] != 2 || len(rep.Reaped) != 1 {
		t.Fatalf("expected 2 orphans reaped … got %+v", rep)
	}
	if s := e.session("gone-0"); s.State != herd.StateStopped || s.Exit.Reason != herd.ReasonOrphan {
		t.Errorf("expected gone-0 stopped as orphan … got %s %+v", s.State, s.Exit)
	}
	if n := e.replicas("gone"); n != 0 {
		t.Errorf("expected gone's replicas dropped … got %d", n)
	}
	if e.hasTmux("ghost-3") || e.hasTmux("gone-0") {
		t.Errorf("expected ghost-3 and gone-0 killed")
	}
	if !e.hasTmux("notes") || !e.hasTmux("stay-0") {
		t.Errorf("expected notes (not herd's) and stay-0 untouched")
	}
	if _, listed := reapFind(rep, "notes"); listed {
		t.Errorf("expected a name outside the namespace not even a candidate")
	}
	evs := e.reapedEvents()
	if len(evs["ghost-3"]) != 1 || evs["ghost-3"][0].Reason != herd.ReasonOrphan || evs["ghost-3"][0].Data["unmanaged"] != true {
		t.Errorf("expected one orphan event for ghost-3 … got %+v", evs["ghost-3"])
	}
	if len(evs["gone-0"]) != 1 || len(evs) != 2 {
		t.Errorf("expected reaped events for ghost-3 and gone-0 only … got %+v", evs)
	}
}

func TestReapKeepsGarbledRow(t *testing.T) {
	e := newReapEnv(t, nil)
	e.role(sleeper("garb", 1))
	e.role(sleeper("ok", 1))
	e.waitVerdict("garb-0", "reap", herd.ReasonIdle)
	e.waitVerdict("ok-0", "reap", herd.ReasonIdle)
	e.garble("^garb-")

	rep := e.pass(reaper.PassOptions{})
	c, _ := reapFind(rep, "garb-0")
	if c.Verdict != "skip" || c.Reason != "unknown" || c.Action != api.ReapActionSkipped {
		t.Errorf("expected garb-0 skipped as unknown … got %+v", c)
	}
	if c, _ := reapFind(rep, "ok-0"); c.Action != api.ReapActionReaped {
		t.Errorf("expected ok-0 reaped in the same pass … got %+v", c)
	}
	if !e.hasTmux("garb-0") || e.session("garb-0").State == herd.StateStopped {
		t.Errorf("expected garb-0 alive")
	}
	if evs := e.reapedEvents()["garb-0"]; len(evs) != 0 {
		t.Errorf("expected no reaped event for garb-0 … got %+v", evs)
	}
}

func TestReapFailedListingKillsNothing(t *testing.T) {
	e := newReapEnv(t, nil)
	e.role(sleeper("w", 2))
	e.waitVerdict("w-1", "reap", herd.ReasonIdle)
	e.failListings(true)

	if rep, err := e.d.reaper.Pass(e.ctx(), reaper.PassOptions{}); err == nil {
		t.Fatalf("expected the pass aborted … got %+v", rep)
	}
	// Through the API too: a clear error, nothing done.
	err := e.api.Do(e.ctx(), http.MethodPost, "/v1/reap", nil, nil, nil)
	if err == nil {
		t.Fatalf("expected POST /v1/reap to fail")
	}
	t.Logf("reply: %v", err)
	for _, n := range []string{"w-0", "w-1"} {
		if s := e.session(n); s.State == herd.StateStopped || !e.hasTmux(n) {
			t.Errorf("[%s] expected alive … got %s", n, s.State)
		}
	}
	if evs := e.reapedEvents(); len(evs) != 0 {
		t.Errorf("expected no reaped event … got %+v", evs)
	}
	// Listing back: once the prober has read the sessions again (the failed
	// listings made them unknown, which is never reaped), the next pass reaps.
	e.failListings(false)
	e.poll("both sessions readable again", func() bool {
		return e.session("w-0").State == herd.StateRunning && e.session("w-1").State == herd.StateRunning
	})
	if rep := e.pass(reaper.PassOptions{}); rep.Reaped[herd.ReasonIdle] != 2 {
		t.Errorf("expected both reaped once the listing works … got %+v", rep)
	}
}

func TestReapDryRunChangesNothing(t *testing.T) {
	e := newReapEnv(t, nil)
	e.role(sleeper("w", 2))
	e.waitVerdict("w-0", "reap", herd.ReasonIdle)
	e.waitVerdict("w-1", "reap", herd.ReasonIdle)
	if err := e.api.Do(e.ctx(), http.MethodPost, "/v1/sessions/w-1/archive", nil, nil, nil); err != nil {
		t.Fatal(err)
	}

	for _, how := range []string{"body", "query"} {
		var rep api.ReapReport
		var err error
		if how == "body" {
			err = e.api.Do(e.ctx(), http.MethodPost, "/v1/reap", nil, api.ReapRequest{DryRun: true}, &rep)
		} else {
			err = e.api.Do(e.ctx(), http.MethodPost, "/v1/reap", url.Values{"dry_run": {"1"}}, nil, &rep)
		}
		if err != nil {
			t.Fatalf("[%s] %v", how, err)
		}
		if !rep.DryRun || rep.Reaped[herd.ReasonIdle] != 1 || rep.Reaped[herd.ReasonArchived] != 1 {
			t.Errorf("[%s] expected would-reap idle 1, archived 1 … got %+v", how, rep)
		}
		for _, c := range rep.Candidates {
			if c.Action != api.ReapActionWouldReap {
				t.Errorf("[%s] expected %s would_reap … got %+v", how, c.Session, c)
			}
		}
	}
	for _, n := range []string{"w-0", "w-1"} {
		if s := e.session(n); s.State != herd.StateRunning || !e.hasTmux(n) {
			t.Errorf("[%s] expected running … got %s", n, s.State)
		}
	}
	if evs := e.reapedEvents(); len(evs) != 0 {
		t.Errorf("expected no event … got %+v", evs)
	}
	if n := e.replicas("w"); n != 2 {
		t.Errorf("expected replicas unchanged … got %d", n)
	}
}

// TestReapExecWithoutTmuxServer: no tmux server at all means no tmux
// sessions; exec sessions are still judged (attached is false for them).
func TestReapExecWithoutTmuxServer(t *testing.T) {
	e := newReapEnv(t, func(c *config.Config) { c.Reaper.IdleAfter = time.Hour })
	e.role(herd.Role{Name: "ex", Replicas: 2, Runtime: herd.RuntimeExec, Command: []string{"sleep", "3600"}})
	if err := e.api.Do(e.ctx(), http.MethodPost, "/v1/sessions/ex-0/archive", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.pane("anything"); ok {
		t.Fatal("expected no tmux server")
	}
	rep := e.pass(reaper.PassOptions{})
	if rep.Reaped[herd.ReasonArchived] != 1 || rep.Kept != 1 || len(rep.Notes) == 0 {
		t.Fatalf("expected ex-0 reaped (archived), ex-1 kept, a note on tmux … got %+v", rep)
	}
	if s := e.session("ex-0"); s.State != herd.StateStopped {
		t.Errorf("expected ex-0 stopped … got %s", s.State)
	}
	if s := e.session("ex-1"); s.State != herd.StateRunning {
		t.Errorf("expected ex-1 running … got %s", s.State)
	}
}

// TestReapNoTmuxBinary: tmux absent makes the tmux part a no-op; exec
// sessions are still reaped.
func TestReapNoTmuxBinary(t *testing.T) {
	e := newReapEnv(t, func(c *config.Config) { c.Tmux.Binary = "/nonexistent/tmux" })
	e.role(herd.Role{Name: "ex", Replicas: 1, Runtime: herd.RuntimeExec, Command: []string{"sleep", "3600"}})
	e.waitVerdict("ex-0", "reap", herd.ReasonIdle)
	rep := e.pass(reaper.PassOptions{})
	if rep.Reaped[herd.ReasonIdle] != 1 || len(rep.Notes) == 0 {
		t.Errorf("expected ex-0 reaped and a note that tmux is missing … got %+v", rep)
	}
}

// TestReaperLoop: the loop's first pass comes shortly after start.
func TestReaperLoop(t *testing.T) {
	e := newReapEnv(t, func(c *config.Config) { c.Reaper.Interval = 300 * time.Millisecond })
	e.role(sleeper("lp", 1))
	e.poll("the loop to reap lp-0", func() bool { return len(e.reapedEvents()["lp-0"]) == 1 })
	if s := e.session("lp-0"); s.State != herd.StateStopped || s.Exit.Reason != herd.ReasonIdle {
		t.Errorf("expected stopped (idle) … got %s %+v", s.State, s.Exit)
	}
}

// TestReapLastLookKeepsAttached: the reaper's last look, under the
// session's lock just before the first signal, keeps a session someone
// attached to after the re-check's listing.
func TestReapLastLookKeepsAttached(t *testing.T) {
	e := newReapEnv(t, nil)
	e.role(sleeper("late", 1))
	e.waitVerdict("late-0", "reap", herd.ReasonIdle)
	l, err := e.d.reaper.Listing(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	row, ok := l.Rows["late-0"]
	if !ok {
		t.Fatal("late-0 missing from the listing")
	}
	if err := e.d.reaper.StillDetached(e.ctx(), "late-0", row); err != nil {
		t.Fatalf("detached: expected the last look to pass, got %v", err)
	}
	e.attach("late-0")
	if err := e.d.reaper.StillDetached(e.ctx(), "late-0", row); err == nil || !strings.Contains(err.Error(), "attached") {
		t.Errorf("attached: expected the last look to refuse, got %v", err)
	}
	moved := row
	moved.PID++
	if err := e.d.reaper.StillDetached(e.ctx(), "late-0", moved); err == nil {
		t.Errorf("another pane: expected the last look to refuse")
	}
}
