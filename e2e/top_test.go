package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd"
)

// ui drives a terminal: a private tmux server whose one pane runs a herd
// command, read with capture-pane and driven with send-keys.
type ui struct {
	t      *testing.T
	socket string
	// session is the tmux session of the pane ("top" when empty).
	session string
}

// newUI starts a private tmux server whose one pane, in session name of
// width x height, runs command (a shell line) with the env's herd variables.
func newUI(e *env, name string, width, height int, command string) *ui {
	e.t.Helper()
	u := &ui{t: e.t, socket: e.tmuxSock + "-ui", session: name}
	e.t.Cleanup(func() { exec.Command("tmux", "-L", u.socket, "kill-server").Run() })
	args := []string{"new-session", "-d", "-s", name, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height)}
	for _, kv := range e.environ() {
		if strings.HasPrefix(kv, "HERD_") || strings.HasPrefix(kv, "GORACE=") {
			args = append(args, "-e", kv)
		}
	}
	u.tmux(append(args, command)...)
	return u
}

func (u *ui) target() string {
	if u.session == "" {
		return "=top:"
	}
	return "=" + u.session + ":"
}

func (u *ui) tmux(args ...string) string {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "tmux", append([]string{"-L", u.socket}, args...)...).CombinedOutput()
	if err != nil {
		u.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (u *ui) screen() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "tmux", "-L", u.socket, "capture-pane", "-p", "-t", u.target()).Output()
	return string(out)
}

// keys sends tmux key names (Enter, Escape, Down) or, with literal, text.
func (u *ui) keys(literal bool, keys ...string) {
	u.t.Helper()
	args := []string{"send-keys", "-t", u.target()}
	if literal {
		args = append(args, "-l")
	}
	u.tmux(append(args, keys...)...)
}

// row returns the fields of the screen line for session name.
func row(screen, name string) []string {
	for _, line := range strings.Split(screen, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// TestTopInRealTerminal runs `herd top` in a real terminal against a real
// daemon: the table with diagnostics, sorting, filtering, logs, inject, attach and
// detach, stop, resume, restart and quit, all by keys.
func TestTopInRealTerminal(t *testing.T) {
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	typed := filepath.Join(t.TempDir(), "typed")
	e.must("run", "tm", "--", "sh", "-c", "echo marker-tm; stty raw -echo; cat > "+typed)
	e.must("run", "ex", "--runtime", "exec", "--", "sh", "-c", "echo marker-ex; exec sleep 300")
	e.waitState("tm-0", herd.StateRunning, 10*time.Second)
	e.waitState("ex-0", herd.StateRunning, 10*time.Second)

	u := newUI(e, "top", 120, 30, bin+" top")

	e.waitFor("top to show both sessions", 10*time.Second, func() bool {
		s := u.screen()
		return strings.Contains(s, "herd top") && row(s, "tm-0") != nil && row(s, "ex-0") != nil
	})
	// NAME STATE ACTIVITY CPU% RSS TCP AGE RESTARTS LAST-EXIT
	e.waitFor("diagnostics (RSS) for both", 15*time.Second, func() bool {
		s := u.screen()
		for _, name := range []string{"tm-0", "ex-0"} {
			r := row(s, name)
			if len(r) < 9 || r[1] != "running" || !strings.ContainsAny(r[4][len(r[4])-1:], "KMG") {
				return false
			}
		}
		return true
	})
	t.Logf("herd top:\n%s", u.screen())

	// "s" cycles the sort column, "S" reverses; eight presses come back
	// to names.
	u.keys(true, "s")
	e.waitFor("the sort by state", 5*time.Second, func() bool { return strings.Contains(u.screen(), "sort state") })
	u.keys(true, "S")
	e.waitFor("the sort reversed", 5*time.Second, func() bool { return strings.Contains(u.screen(), "sort state (reversed)") })
	u.keys(true, "S", "sssssss")
	e.waitFor("the sort by name again", 5*time.Second, func() bool {
		s := u.screen()
		return strings.Contains(s, "sort name") && !strings.Contains(s, "reversed")
	})

	// "/" filters as it is typed.
	u.keys(true, "/ex")
	u.keys(false, "Enter")
	e.waitFor("the filter to leave ex-0 alone", 5*time.Second, func() bool {
		s := u.screen()
		return row(s, "ex-0") != nil && row(s, "tm-0") == nil && strings.Contains(s, "filter ex")
	})

	// Enter on an exec session shows its output.
	u.keys(false, "Enter")
	e.waitFor("the logs of ex-0", 10*time.Second, func() bool {
		s := u.screen()
		return strings.Contains(s, "logs of ex-0") && strings.Contains(s, "marker-ex")
	})
	u.keys(false, "Escape")
	e.waitFor("the table again", 5*time.Second, func() bool { return row(u.screen(), "ex-0") != nil })
	u.keys(false, "Escape")
	e.waitFor("the filter cleared", 5*time.Second, func() bool { return row(u.screen(), "tm-0") != nil })

	// Move to tm-0 (rows are by name: ex-0, tm-0) and inject.
	u.keys(false, "Down")
	u.keys(true, "i")
	e.waitFor("the inject prompt", 5*time.Second, func() bool { return strings.Contains(u.screen(), "inject into tm-0:") })
	u.keys(true, "hello from top")
	u.keys(false, "Enter")
	e.waitFor("the text typed into tm-0", 10*time.Second, func() bool {
		b, _ := os.ReadFile(typed)
		return string(b) == "hello from top\r"
	})

	// Enter attaches to the tmux session; detaching comes back to top.
	u.keys(false, "Enter")
	e.waitFor("the agent's pane", 10*time.Second, func() bool {
		s := u.screen()
		return strings.Contains(s, "marker-tm") && !strings.Contains(s, "herd top")
	})
	if out, err := exec.Command("tmux", "-L", e.tmuxSock, "detach-client", "-s", "=tm-0").CombinedOutput(); err != nil {
		t.Fatalf("detach: %v %s", err, out)
	}
	e.waitFor("top back after the detach", 10*time.Second, func() bool {
		s := u.screen()
		return strings.Contains(s, "herd top") && strings.Contains(s, "detached from tm-0")
	})

	// x asks, y stops; r resumes.
	u.keys(true, "x")
	e.waitFor("the stop prompt", 5*time.Second, func() bool { return strings.Contains(u.screen(), "stop tm-0? (y/n)") })
	u.keys(true, "y")
	e.waitState("tm-0", herd.StateStopped, 15*time.Second)
	e.waitFor("top to show tm-0 stopped", 5*time.Second, func() bool {
		r := row(u.screen(), "tm-0")
		return len(r) > 1 && r[1] == "stopped"
	})
	u.keys(true, "r")
	e.waitState("tm-0", herd.StateRunning, 15*time.Second)

	// R asks, y restarts through the restart API: a fresh incarnation.
	before, _ := e.session("tm-0")
	u.keys(true, "R")
	e.waitFor("the restart prompt", 5*time.Second, func() bool { return strings.Contains(u.screen(), "restart tm-0? (y/n)") })
	u.keys(true, "y")
	e.waitFor("tm-0 restarted by top", 20*time.Second, func() bool {
		v, _ := e.session("tm-0")
		return v.State == herd.StateRunning && v.Incarnation != before.Incarnation
	})
	e.waitFor("top to say so", 10*time.Second, func() bool { return strings.Contains(u.screen(), "session tm-0 restarted (incarnation") })
	if n := len(eventsOf(e.events("--session", "tm-0"), herd.EventRestarted, herd.ReasonUser)); n != 1 {
		t.Errorf("expected one restarted event by the user, got %d", n)
	}

	u.keys(true, "q")
	e.waitFor("top to quit", 10*time.Second, func() bool {
		return exec.Command("tmux", "-L", u.socket, "has-session", "-t", "=top").Run() != nil
	})
}
