package reaper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/runtime/tmux"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const idleAfter = time.Hour

var policy = Policy{IdleAfter: idleAfter, Orphans: true, Archived: true}

// line is one list-panes row in the format ListPanes asks tmux for.
func line(session string, pid, attached int, activity string) string {
	return fmt.Sprintf("%s\t%%%d\t%d\t0\t\t\t%d\t%s\t%d\t42", session, pid, pid, attached, activity, now.Add(-100*time.Hour).Unix())
}

// listing parses rows as tmux would have printed them.
func listing(t *testing.T, lines ...string) Listing {
	t.Helper()
	l, err := NewListing(tmux.Parse(tmux.ParsePanes([]byte(strings.Join(lines, "\n"))), nil, 0))
	if err != nil {
		t.Fatalf("listing: %v", err)
	}
	return l
}

func unix(d time.Duration) string { return fmt.Sprint(now.Add(-d).Unix()) }

func TestDecide(t *testing.T) {
	old := unix(2 * idleAfter)
	recent := unix(time.Minute)
	// running is a live, detached tmux session of a declared role whose
	// pane has shown nothing for two idle periods.
	running := func(l Listing) Facts {
		return Facts{
			Name: "w-0", Managed: true, State: herd.StateRunning, Activity: herd.ActivityIdle,
			Incarnation: "i1", RootPID: 100, Role: "w", RoleDeclared: true, Workdir: "/src",
			Tmux: true, Listing: l, StartedAt: now.Add(-3 * idleAfter),
		}
	}
	idleRow := func(t *testing.T) Listing { return listing(t, line("w-0", 100, 0, old)) }
	with := func(f Facts, fn func(*Facts)) Facts { fn(&f); return f }
	execSession := func(fn func(*Facts)) Facts {
		f := Facts{
			Name: "e-0", Managed: true, State: herd.StateRunning, Incarnation: "i2", RootPID: 200,
			Role: "e", RoleDeclared: true, Workdir: "/src", StartedAt: now.Add(-3 * idleAfter),
		}
		fn(&f)
		return f
	}
	storeErr := errors.New("database is locked")

	cases := []struct {
		name    string
		facts   Facts
		policy  Policy
		verdict Verdict
		reason  string
	}{
		// Namespace.
		{"name outside herd's namespace", Facts{Name: "scratch", Tmux: true, Listing: listing(t, line("scratch", 5, 0, old))}, policy, Ignore, WhyNamespace},
		{"name with a non-numeric index", Facts{Name: "my-notes", Tmux: true, Listing: listing(t, line("my-notes", 5, 0, old))}, policy, Ignore, WhyNamespace},
		{"upper-case name", Facts{Name: "Worker-0", Tmux: true, Listing: listing(t, line("Worker-0", 5, 0, old))}, policy, Ignore, WhyNamespace},
		{"foreign record", Facts{Name: "w-0", ForeignHost: "other", Tmux: true, Listing: idleRow(t)}, policy, Ignore, WhyForeign},

		// Unmanaged herd-named tmux sessions.
		{"unmanaged detached", Facts{Name: "w-7", Tmux: true, Listing: listing(t, line("w-7", 5, 0, recent))}, policy, Reap, herd.ReasonOrphan},
		{"unmanaged attached", Facts{Name: "w-7", Tmux: true, Listing: listing(t, line("w-7", 5, 1, old))}, policy, Keep, WhyAttached},
		{"unmanaged, orphans disabled", Facts{Name: "w-7", Tmux: true, Listing: listing(t, line("w-7", 5, 0, old))}, Policy{IdleAfter: idleAfter, Archived: true}, Keep, WhyDisabled},
		{"unmanaged with empty fields", Facts{Name: "w-7", Tmux: true, Listing: listing(t, "w-7\t%5\t5\t0\t\t\t\t\t\t")}, policy, Skip, WhyUnknown},
		{"unmanaged with non-numeric attached", Facts{Name: "w-7", Tmux: true, Listing: listing(t, "w-7\t%5\t5\t0\t\t\tyes\t"+old+"\t"+old+"\t42")}, policy, Skip, WhyUnknown},
		{"unmanaged, record unreadable", Facts{Name: "w-7", RecordErr: storeErr, Tmux: true, Listing: listing(t, line("w-7", 5, 0, old))}, policy, Skip, WhyUnknown},

		// Idle.
		{"idle detached", running(idleRow(t)), policy, Reap, herd.ReasonIdle},
		{"idle but attached", running(listing(t, line("w-0", 100, 1, old))), policy, Keep, WhyAttached},
		{"idle, archived and orphaned but attached", with(running(listing(t, line("w-0", 100, 2, old))), func(f *Facts) {
			f.Archived, f.RoleDeclared, f.WorkdirGone = true, false, true
		}), policy, Keep, WhyAttached},
		{"output moves window_activity", running(listing(t, line("w-0", 100, 0, recent))), policy, Keep, WhyActive},
		{"recent hook activity", with(running(idleRow(t)), func(f *Facts) { f.LastActivityAt = now.Add(-time.Minute) }), policy, Keep, WhyActive},
		{"just past idle_after", running(listing(t, line("w-0", 100, 0, unix(idleAfter+time.Second)))), policy, Reap, herd.ReasonIdle},
		{"within a second of idle_after (tmux has whole seconds)", running(listing(t, line("w-0", 100, 0, unix(idleAfter)))), policy, Keep, WhyActive},
		{"relaunched recently, old window", with(running(idleRow(t)), func(f *Facts) { f.StartedAt = now.Add(-time.Minute) }), policy, Keep, WhyActive},
		{"activity in the future (clock step)", running(listing(t, line("w-0", 100, 0, unix(-time.Hour)))), policy, Keep, WhyActive},
		{"stalled counts as idle", with(running(idleRow(t)), func(f *Facts) { f.State = herd.StateStalled }), policy, Reap, herd.ReasonIdle},
		{"idle reaping disabled", running(idleRow(t)), Policy{Orphans: true, Archived: true}, Keep, WhyDisabled},

		// Waiting for input.
		{"waiting, asked within idle_after", with(running(idleRow(t)), func(f *Facts) {
			f.Activity, f.LastActivityAt = herd.ActivityWaiting, now.Add(-idleAfter/2)
		}), policy, Keep, WhyActive},
		{"waiting, asked long ago", with(running(idleRow(t)), func(f *Facts) {
			f.Activity, f.LastActivityAt = herd.ActivityWaiting, now.Add(-2*idleAfter)
		}), policy, Reap, herd.ReasonIdle},
		{"waiting since an unknown time", with(running(idleRow(t)), func(f *Facts) { f.Activity = herd.ActivityWaiting }), policy, Skip, WhyUnknown},

		// Unknown rows and facts: fail closed.
		{"empty fields (Pane.Err)", running(listing(t, "w-0\t%1\t100\t0\t\t\t\t\t\t")), policy, Skip, WhyUnknown},
		{"non-numeric window_activity", running(listing(t, "w-0\t%1\t100\t0\t\t\t0\tyesterday\t"+old+"\t42")), policy, Skip, WhyUnknown},
		{"zero window_activity (1970 is not idle)", running(listing(t, "w-0\t%1\t100\t0\t\t\t0\t0\t"+old+"\t42")), policy, Skip, WhyUnknown},
		{"truncated row", running(listing(t, "w-0\t%1\t100")), policy, Skip, WhyUnknown},
		{"one garbled pane of two", running(listing(t, line("w-0", 100, 0, old), "w-0\t%2\t101\t0\t\t\t0\tx\t"+old+"\t42")), policy, Skip, WhyUnknown},
		{"archived but garbled", with(running(listing(t, "w-0\t%1\t100\t0\t\t\t\t\t\t")), func(f *Facts) { f.Archived = true }), policy, Skip, WhyUnknown},
		{"a row of no known session", running(listing(t, line("w-0", 100, 0, old), "\t%9\t9\t0\t\t\t0\t"+old+"\t"+old+"\t42")), policy, Skip, WhyUnknown},
		{"pane pid is not the incarnation's", running(listing(t, line("w-0", 101, 0, old))), policy, Skip, WhyUnknown},
		{"record unreadable", with(running(idleRow(t)), func(f *Facts) { f.RecordErr = storeErr }), policy, Skip, WhyUnknown},
		{"incarnation unreadable", with(running(idleRow(t)), func(f *Facts) { f.InfoErr = storeErr }), policy, Skip, WhyUnknown},
		{"role unreadable, not idle", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.RoleErr = storeErr }), policy, Skip, WhyUnknown},
		{"role unreadable but idle", with(running(idleRow(t)), func(f *Facts) { f.RoleErr = storeErr }), policy, Reap, herd.ReasonIdle},
		{"workdir unreadable, not idle", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.WorkdirErr = errors.New("permission denied") }), policy, Skip, WhyUnknown},
		{"state unknown", with(running(idleRow(t)), func(f *Facts) { f.State = herd.StateUnknown }), policy, Skip, WhyUnknown},
		{"pending", with(running(idleRow(t)), func(f *Facts) { f.State = herd.StatePending }), policy, Skip, WhyPending},
		{"no time known at all", with(running(listing(t)), func(f *Facts) {
			f.Tmux, f.StartedAt = false, time.Time{}
		}), policy, Skip, WhyUnknown},

		// Listing outcomes.
		{"absent from a good listing", running(listing(t)), policy, Skip, WhyAbsent},
		{"no server, live tmux session", running(Listing{Rows: map[string]Row{}, NoServer: true}), policy, Skip, WhyAbsent},
		{"tmux not installed", with(running(Listing{Unavailable: true}), func(f *Facts) { f.Archived = true }), policy, Skip, WhyNoTmux},
		{"no server, archived backoff session", with(running(Listing{Rows: map[string]Row{}, NoServer: true}), func(f *Facts) {
			f.State, f.Archived = herd.StateBackoff, true
		}), policy, Reap, herd.ReasonArchived},

		// Archived.
		{"archived, detached, recent output", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.Archived = true }), policy, Reap, herd.ReasonArchived},
		{"archived, reason disabled", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.Archived = true }), Policy{IdleAfter: idleAfter, Orphans: true}, Keep, WhyActive},
		{"archived failed session", with(running(listing(t)), func(f *Facts) { f.State, f.Archived = herd.StateFailed, true }), policy, Reap, herd.ReasonArchived},
		{"failed, nothing else", with(running(listing(t)), func(f *Facts) { f.State = herd.StateFailed }), policy, Keep, WhyNotLive},
		{"stopped", with(running(listing(t)), func(f *Facts) { f.State = herd.StateStopped }), policy, Ignore, WhyStopped},

		// Orphans.
		{"role no longer declared", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.RoleDeclared = false }), policy, Reap, herd.ReasonOrphan},
		{"workdir gone", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.WorkdirGone = true }), policy, Reap, herd.ReasonOrphan},
		{"workdir gone, orphans disabled", with(running(listing(t, line("w-0", 100, 0, recent))), func(f *Facts) { f.WorkdirGone = true }), Policy{IdleAfter: idleAfter, Archived: true}, Keep, WhyActive},

		// Exec sessions: never attached.
		{"exec idle since start", execSession(func(*Facts) {}), policy, Reap, herd.ReasonIdle},
		{"exec with recent output", execSession(func(f *Facts) { f.OutputAt = now.Add(-time.Second) }), policy, Keep, WhyActive},
		{"exec output unreadable", execSession(func(f *Facts) { f.OutputErr = errors.New("permission denied") }), policy, Skip, WhyUnknown},
		{"exec just started", execSession(func(f *Facts) { f.StartedAt = now.Add(-time.Minute) }), policy, Keep, WhyActive},
		{"exec archived with tmux absent", execSession(func(f *Facts) { f.Archived, f.Listing = true, Listing{Unavailable: true} }), policy, Reap, herd.ReasonArchived},
	}
	for _, c := range cases {
		got := Decide(c.facts, c.policy, now)
		if got.Verdict != c.verdict || got.Reason != c.reason {
			t.Errorf("[%s] expected %s/%s … got %s/%s (%s)", c.name, c.verdict, c.reason, got.Verdict, got.Reason, got.Detail)
		}
		if got.Detail == "" {
			t.Errorf("[%s] expected a detail … got none", c.name)
		}
	}
}

func TestDecideIdleFor(t *testing.T) {
	l := listing(t, line("w-0", 100, 0, unix(90*time.Minute+time.Second)))
	f := Facts{Name: "w-0", Managed: true, State: herd.StateRunning, RootPID: 100, Role: "w", RoleDeclared: true, Tmux: true, Listing: l}
	got := Decide(f, policy, now)
	if got.Verdict != Reap || got.IdleFor != 90*time.Minute {
		t.Errorf("expected reap after 1h30m … got %s after %s", got.Verdict, got.IdleFor)
	}
	if !got.Row.Same(Row{PaneID: "%100", PID: 100}) {
		t.Errorf("expected the decision to carry the row it was made on … got %+v", got.Row)
	}
}

func TestNewListing(t *testing.T) {
	noServer := &tmux.CallError{Args: []string{"list-panes"}, Stderr: "no server running on /tmp/x", Err: fmt.Errorf("%w (exit status 1)", tmux.ErrNoServer)}
	denied := &tmux.CallError{Args: []string{"list-panes"}, Stderr: "error connecting to /tmp/x (Permission denied)", Err: errors.New("exit status 1")}
	timeout := &tmux.CallError{Args: []string{"list-panes"}, Err: fmt.Errorf("%w (signal: killed)", context.DeadlineExceeded)}

	l, err := NewListing(tmux.Parse(nil, noServer, 0))
	if err != nil || !l.NoServer || len(l.Rows) != 0 {
		t.Errorf("[no server] expected an empty good listing … got %+v, %v", l, err)
	}
	for name, e := range map[string]error{"permission denied": denied, "timeout": timeout, "plain": errors.New("exec: tmux: not found")} {
		if _, err := NewListing(tmux.Parse([]tmux.Pane{{Session: "w-0"}}, e, 0)); !errors.Is(err, ErrListing) {
			t.Errorf("[%s] expected the round aborted (ErrListing) … got %v", name, err)
		}
	}
}

func TestNewListingMergesPanes(t *testing.T) {
	l := listing(t,
		line("w-0", 1, 0, unix(time.Hour)),
		line("w-0", 2, 0, unix(time.Minute)),
		line("w-1", 3, 1, unix(time.Hour)),
		"w-2\t%4\t4\t0\t\t\t0\tnope\t1\t42",
		line("w-2", 5, 0, unix(time.Hour)),
	)
	if r := l.Rows["w-0"]; r.PID != 1 || r.PaneID != "%1" || !r.Activity.Equal(now.Add(-time.Minute)) || r.Err != nil {
		t.Errorf("[two panes] expected first pane's identity and the latest activity … got %+v", r)
	}
	if r := l.Rows["w-1"]; r.Attached != 1 {
		t.Errorf("[attached] expected 1 client … got %+v", r)
	}
	if r := l.Rows["w-2"]; r.Err == nil {
		t.Errorf("[garbled first pane] expected the session unknown … got %+v", r)
	}
	if l.Unattributed != nil || l.NoServer {
		t.Errorf("expected a clean listing … got %+v", l)
	}
	if l := listing(t, "\t%9\t9\t0\t\t\t0\t1\t1\t42"); l.Unattributed == nil {
		t.Errorf("[empty session name] expected an unattributed row … got %+v", l)
	}
}

func TestInNamespace(t *testing.T) {
	cases := map[string]bool{
		"worker-0": true, "a-b-12": true, "w-": false, "-1": false, "w": false,
		"worker-x": false, "Worker-0": false, "w-0a": false, "": false, "w-0-": false,
	}
	for name, want := range cases {
		if got := InNamespace(name); got != want {
			t.Errorf("[%q] expected %v … got %v", name, want, got)
		}
	}
}
