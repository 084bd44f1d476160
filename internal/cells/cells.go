// Package cells formats the cells of session tables, the same in `herd get`, `herd top` and the demo.
package cells

import (
	"fmt"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
)

// State is the STATE cell: the state, "!" while an escalation or a
// notification is open, and markers after a comma (kubectl's
// "Ready,SchedulingDisabled").
func State(v api.SessionView) string {
	if v.Unmanaged {
		return "unmanaged"
	}
	s := string(v.State)
	if v.Attention() {
		s += "!"
	}
	if v.Archived {
		s += ",ARCHIVED"
	}
	if v.Outdated {
		s += ",OUTDATED"
	}
	return s
}

// Activity is the ACTIVITY cell: what the agent is doing, "-" when no
// agent runs (a dead agent has no activity, not an unknown one).
func Activity(v api.SessionView) string {
	if !v.State.Live() && !v.Unmanaged {
		return "-"
	}
	return Dash(string(v.Activity))
}

// Pane is the PANE axis: the tmux pane's liveness; an exec session has no
// pane.
func Pane(v api.SessionView) string {
	if v.RuntimeKind == herd.RuntimeExec {
		return "-"
	}
	return Dash(string(v.Runtime))
}

// Age is how long the current incarnation has run; false when the session
// is not live or never started.
func Age(v api.SessionView, now time.Time) (time.Duration, bool) {
	if v.StartedAt == nil || !v.State.Live() {
		return 0, false
	}
	return now.Sub(*v.StartedAt), true
}

// AgeText is the AGE cell.
func AgeText(v api.SessionView, now time.Time) string {
	if d, ok := Age(v, now); ok {
		return ShortDur(d)
	}
	return "-"
}

// Exit is what ended an incarnation: "signal 11", "code 127 (command not
// found)", or the reason with its message.
func Exit(e *herd.Exit) string {
	if e == nil {
		return "-"
	}
	var what string
	switch {
	case e.Signal != nil:
		what = fmt.Sprintf("signal %d", *e.Signal)
	case e.Code != nil:
		what = fmt.Sprintf("code %d", *e.Code)
		switch *e.Code {
		case 127:
			what += " (command not found)"
		case 126:
			what += " (not executable)"
		}
	default:
		what = e.Reason
		if e.Message != "" {
			what += ": " + Clip(e.Message, 60)
		}
	}
	if e.Reason != "" && e.Reason != herd.ReasonSignal && e.Reason != herd.ReasonExitCode && !strings.HasPrefix(what, e.Reason) {
		what += " (" + e.Reason + ")"
	}
	return what
}

// LastExit is the LAST-EXIT cell: Exit and how long ago.
func LastExit(e *herd.Exit, now time.Time) string {
	what := Exit(e)
	if e != nil && !e.At.IsZero() {
		what += " " + ShortDur(now.Sub(e.At)) + " ago"
	}
	return what
}

// Dash is s, or "-" when empty.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ShortDur formats a duration the way kubectl shows ages.
func ShortDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Clock is a point in time in local time: the clock alone when it is
// today, with its date otherwise.
func Clock(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05")
}

// Clip bounds s to n runes, marking a cut with "...".
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// Bytes is a size in K, M or G (RSS).
func Bytes(f float64) string {
	switch {
	case f >= 1<<30:
		return fmt.Sprintf("%.1fG", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%.1fM", f/(1<<20))
	}
	return fmt.Sprintf("%.0fK", f/(1<<10))
}

// Worktree is the WORKTREE cell: the branch, then dirty when it has
// uncommitted changes and +N for commits its base lacks; "-" for none.
func Worktree(w *api.Worktree) string {
	if w == nil {
		return "-"
	}
	s := w.Branch
	if w.Dirty {
		s += ",dirty"
	}
	switch {
	case w.Ahead > 0:
		s += fmt.Sprintf(",+%d", w.Ahead)
	case w.Ahead < 0:
		s += ",base-gone"
	}
	return s
}
