package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/runtime/tmux"
	"herd/internal/runtime/tmux/tmuxfault"
)

// garblingTmux writes a tmux that runs the real one, except that while the
// file mode exists its listings (list-panes, list-sessions) answer as the
// file says: "empty" (nothing, exit 0), "garbage" (a line of noise),
// "trunc" (every line cut short); and "hang" makes every command but
// new-session hang while the file exists. With the exec transport it
// refuses control mode, so every call goes through it; with control, the
// daemon's control connection goes through the fault proxy, which the
// test sets to the same fault (controlFault).
func garblingTmux(t *testing.T, transport string) (f faultyTmux, mode string) {
	t.Helper()
	mode = filepath.Join(t.TempDir(), "mode")
	f = newFaultyTmux(t, transport, func(real string) string {
		return fmt.Sprintf(`if [ "$(cat %[2]q 2>/dev/null)" = hang ]; then
  case " $* " in
    *" new-session "*) ;;
    *) while [ -f %[2]q ]; do sleep 0.05; done ;;
  esac
fi
for a in "$@"; do
  case "$a" in
    list-panes|list-sessions)
      if [ -f %[2]q ]; then
        case "$(cat %[2]q)" in
          empty) exit 0 ;;
          garbage) printf 'x\001\t%%%%zz\tnot a pane\n'; exit 0 ;;
          trunc) %[1]q "$@" | cut -c1-9; exit 0 ;;
        esac
      fi ;;
  esac
done`, real, mode)
	})
	return f, mode
}

// controlFault is the proxy's fault for a garblingTmux mode.
var controlFault = map[string]string{
	"empty": tmuxfault.Empty, "garbage": tmuxfault.Garble, "trunc": tmuxfault.Truncate, "hang": tmuxfault.Hang,
}

// tmuxSessions lists the tmux sessions on e's private server, asking the
// real tmux.
func (e *env) tmuxSessions() []string {
	out, err := exec.Command("tmux", "-L", e.tmuxSock, "list-sessions", "-F", "#{session_name}").Output()
	if err != nil {
		return nil // no server: no session
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if n != tmux.ControlSession { // the daemon's control connection's
			names = append(names, n)
		}
	}
	return names
}

// TestDeleteRoleUnderGarbledListings: regression — after `delete role`
// while tmux's listings were garbled or empty, the role's tmux sessions
// stayed until the reaper's next pass (30 minutes later), and nothing
// said so. Now the stop path removes each session on tmux's own check of
// the pane pid, whatever the listing says, and what it could not remove
// is retried and reported: once the listings recover, nothing of the
// role is left within a few seconds.
func TestDeleteRoleUnderGarbledListings(t *testing.T) {
	t.Parallel()
	for _, tc := range [][2]string{
		{"exec", "empty"}, {"exec", "garbage"}, {"exec", "trunc"}, {"exec", "hang"},
		{"control", "empty"}, {"control", "garbage"}, {"control", "trunc"}, {"control", "hang"},
	} {
		transport, mode := tc[0], tc[1]
		t.Run(transport+"/"+mode, func(t *testing.T) {
			f, modeFile := garblingTmux(t, transport)
			e := newEnv(t, fmt.Sprintf("binary = %q\n", f.bin)+fastRestart)
			e.start()
			e.must("run", "gone", "--", "sleep", "300")
			e.must("scale", "gone", "--replicas", "3")
			for i := range 3 {
				e.waitState(herd.SessionName("gone", i), herd.StateRunning, 10*time.Second)
			}
			// Counted from /proc: a process in the middle of its exec shows
			// no environment for a moment, so the count is polled.
			n, deadline := 0, time.Now().Add(5*time.Second)
			for n = len(e.agentPIDs()); n != 3 && time.Now().Before(deadline); n = len(e.agentPIDs()) {
				time.Sleep(50 * time.Millisecond)
			}
			if n != 3 {
				t.Fatalf("expected 3 agents … got %d", n)
			}
			if f.control {
				e.waitFor("the control connection", 10*time.Second, func() bool { return len(e.controlClients()) > 0 })
			}
			if err := os.WriteFile(modeFile, []byte(mode), 0o600); err != nil {
				t.Fatal(err)
			}
			f.fault(t, controlFault[mode])
			out, stderr, code := e.herd("delete", "role", "gone")
			t.Logf("delete under %s listings: exit %d: %s%s", mode, code, out, stderr)
			time.Sleep(500 * time.Millisecond) // a few listings still garbled
			os.Remove(modeFile)
			f.fault(t, "")
			f.mustHaveInjected(t, controlFault[mode])
			recovered := time.Now()
			e.waitFor("the role's tmux sessions and processes gone", 10*time.Second, func() bool {
				return len(e.tmuxSessions()) == 0 && len(e.agentPIDs()) == 0
			})
			t.Logf("nothing left %s after the listings recovered", time.Since(recovered).Round(time.Millisecond))
			if took := time.Since(recovered); took > 5*time.Second {
				t.Errorf("expected nothing left within 5s of the listings recovering … took %s", took)
			}
			if code != 0 {
				// A delete refused while nothing could be verified is
				// fine, as long as a retry finishes it.
				e.must("delete", "role", "gone")
			}
			if _, ok := e.session("gone-0"); ok {
				t.Errorf("expected the role's sessions forgotten")
			}
			if mode != "hang" {
				return
			}
			// tmux answered nothing during the stops: each left session
			// was reported, then removed by a retry.
			e.waitFor("three leftovers reported removed", 5*time.Second, func() bool {
				return count(e.events("--kind", herd.EventLeftover), herd.EventLeftover) == 6
			})
			for _, ev := range e.events("--kind", herd.EventLeftover) {
				t.Logf("%s %s %s: %s", ev.Session, ev.Kind, ev.Reason, ev.Message)
			}
		})
	}
}
