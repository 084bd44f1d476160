package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"herd"
)

// TestWatchOnTerminal: `get sessions -w` on a real terminal (a tmux pane)
// redraws in place: one table on the screen under the clock, changes drawn
// over it, the scrollback never filling with copies, and a list taller than
// the window cut to fit with how many lines are not shown.
func TestWatchOnTerminal(t *testing.T) {
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "alpha", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("alpha-0", herd.StateRunning, 10*time.Second)

	u := newUI(e, "watch", 120, 20, bin+" get sessions -w")
	// history is the pane's scrollback and screen together.
	history := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, "tmux", "-L", u.socket, "capture-pane", "-p", "-S", "-", "-t", "=watch:").Output()
		return string(out)
	}
	headers := func(s string) int { return len(regexp.MustCompile(`(?m)^NAME +ROLE +STATE`).FindAllString(s, -1)) }

	e.waitFor("alpha-0 running on the screen", 10*time.Second, func() bool {
		r := row(u.screen(), "alpha-0")
		return len(r) > 2 && r[2] == "running"
	})
	e.must("stop", "alpha-0")
	e.waitFor("alpha-0 stopped drawn over it", 10*time.Second, func() bool {
		r := row(u.screen(), "alpha-0")
		return len(r) > 2 && r[2] == "stopped"
	})
	// More redraws (one a second) before looking at the scrollback.
	clock := func() string { return strings.SplitN(u.screen(), "\n", 2)[0] }
	for range 2 {
		before := clock()
		e.waitFor("a redraw", 10*time.Second, func() bool { return clock() != before })
	}
	s := u.screen()
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d\n`).MatchString(s) {
		t.Errorf("expected the clock on the first line, got:\n%s", s)
	}
	if n := headers(s); n != 1 {
		t.Errorf("expected one table on the screen, got %d:\n%s", n, s)
	}
	if n := headers(history()); n != 1 {
		t.Errorf("expected the scrollback free of older tables, got %d headers:\n%s", n, history())
	}

	// Taller than the window: cut to fit, and still in place.
	e.must("run", "many", "--runtime", "exec", "--", "sleep", "300")
	e.must("scale", "many", "--replicas", "25")
	e.waitFor("the list cut to the window", 20*time.Second, func() bool {
		return regexp.MustCompile(`\.\.\. \d+ more lines \(a taller window shows them\)`).MatchString(u.screen())
	})
	before := clock()
	e.waitFor("a redraw of the tall list", 10*time.Second, func() bool { return clock() != before })
	if n := headers(history()); n != 1 {
		t.Errorf("expected the scrollback free of older tables with a tall list, got %d headers:\n%s", n, history())
	}
	if lines := strings.Split(strings.TrimRight(u.screen(), "\n"), "\n"); len(lines) > 20 {
		t.Errorf("expected at most the window's 20 lines, got %d", len(lines))
	}
}
