package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestRefusedResumeStartsFresh: a crash relaunch resumes the agent's
// conversation; an agent that refuses the id (Gemini CLI exits 42,
// "Invalid session identifier"; Codex prints "No saved session found",
// read from its dead pane, or its stderr when it runs as an exec child)
// is recorded as `resumed` with reason
// resume_failed, and the next launch starts fresh with the role's
// command: one refused resume, never a loop on the dead id toward failed.
func TestRefusedResumeStartsFresh(t *testing.T) {
	t.Parallel()
	fakes := t.TempDir()
	// Stand-ins named like the agents: each logs its arguments, refuses
	// any resume the way the real one does, and otherwise reports its
	// conversation through herd's hook and waits.
	agent := func(name, refuse string) string {
		return script(t, filepath.Join(fakes, name, name), fmt.Sprintf(`printf '%%s\n' "$*" >> "$ARGS_LOG"
case " $* " in
*" -r "*|*" resume "*) %s ;;
esac
n=$(wc -l < "$ARGS_LOG")
printf '{"session_id":"conv-%%s","hook_event_name":"SessionStart","cwd":"%%s"}' "$n" "$PWD" | %q hook --agent %s SessionStart
echo ready
exec sleep 3600`, refuse, bin, name))
	}
	for _, d := range []string{"gemini", "codex", "codex-exec"} {
		if err := os.MkdirAll(filepath.Join(fakes, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gemini := agent("gemini", `echo "Error resuming session: Invalid session identifier \"$2\"." >&2; exit 42`)
	codex := agent("codex", `echo "Error: No saved session found with ID $2. Run codex resume without an ID to choose from existing sessions."; exit 1`)
	// `codex exec resume <id>` says it on stderr (an exec agent's stderr
	// is a file of its own).
	codexExec := script(t, filepath.Join(fakes, "codex-exec", "codex"), strings.Replace(readScript(t, codex), "; exit 1", " >&2; exit 1", 1))
	e := newEnv(t, "[restart]\ninitial_backoff = \"200ms\"\nmax_restarts = 3\n")
	e.start()
	logs := map[string]string{"gm": filepath.Join(fakes, "gm.log"), "cx": filepath.Join(fakes, "cx.log"), "cxe": filepath.Join(fakes, "cxe.log")}
	e.must("apply", "-f", e.writeRoles("roles.toml", fmt.Sprintf(`[[role]]
name = "gm"
command = [%q, "-m", "gemini-2.5-flash"]
agent = "gemini"
env = { ARGS_LOG = %q }
[[role]]
name = "cx"
command = [%q, "-a", "on-request"]
agent = "codex"
env = { ARGS_LOG = %q }
[[role]]
name = "cxe"
command = [%q, "exec", "--json"]
agent = "codex"
runtime = "exec"
env = { ARGS_LOG = %q }
`, gemini, logs["gm"], codex, logs["cx"], codexExec, logs["cxe"])))

	codexHooks := regexp.MustCompile(`^-c features\.hooks=true .*?-c notify=\[[^\]]*\] `)
	lines := func(role string, n int) []string {
		var out []string
		e.waitFor(fmt.Sprintf("%s launched %d time(s)", role, n), 30*time.Second, func() bool {
			b, _ := os.ReadFile(logs[role])
			out = strings.Split(strings.TrimSpace(string(b)), "\n")
			return len(b) > 0 && len(out) >= n
		})
		// Each Codex launch also gets herd's hooks first (-c overrides
		// ending with notify, see TestZeroSetupHooks): set aside here.
		for i, l := range out {
			out[i] = codexHooks.ReplaceAllString(l, "")
		}
		return out
	}
	resumes := map[string]string{"gm": "-r conv-1 -m gemini-2.5-flash", "cx": "resume conv-1 -a on-request", "cxe": "exec resume conv-1 --json"}
	said := map[string]string{"gm": "Invalid session identifier", "cx": "No saved session found", "cxe": "No saved session found"}
	fresh := map[string]string{"gm": "-m gemini-2.5-flash", "cx": "-a on-request", "cxe": "exec --json"}
	for _, role := range []string{"gm", "cx", "cxe"} {
		name := role + "-0"
		lines(role, 1)
		// The conversation is known (its hook came) before the crash.
		e.waitFor(name+"'s conversation", 30*time.Second, func() bool {
			return len(e.events("--session", name, "--kind", herd.EventActivity)) > 0
		})
		v := e.waitState(name, herd.StateRunning, 30*time.Second)
		if err := syscall.Kill(v.PID, syscall.SIGSEGV); err != nil {
			t.Fatal(err)
		}
		// A fresh launch, the resume of conv-1 refused, then fresh again:
		// the refusal is read before the relaunch (from the agent's words
		// when its exit code is not known yet), never a second resume.
		got := lines(role, 3)
		if got[0] != fresh[role] || got[1] != resumes[role] || got[2] != fresh[role] {
			t.Errorf("[%s] expected a fresh launch, the resume of conv-1, then fresh again, got %q\nevents:\n%s", role, got, e.must("events", "--session", name))
		}
		var refused []herd.Event
		e.waitFor(name+" resume_failed", 30*time.Second, func() bool {
			refused = eventsOf(e.events("--session", name), herd.EventResumed, herd.ReasonResumeFailed)
			return len(refused) > 0
		})
		if len(refused) != 1 || refused[0].Data["agent_session_id"] != "conv-1" {
			t.Errorf("[%s] expected one resume_failed event for conv-1, got %+v", role, refused)
		} else if ev, _ := refused[0].Data["evidence"].(string); !strings.Contains(ev, said[role]) {
			t.Errorf("[%s] expected the evidence read from the dead pane (%q), got %q", role, said[role], ev)
		}
		e.waitState(name, herd.StateRunning, 30*time.Second)
		// No loop: the fresh launch runs on.
		if got := lines(role, 3); len(got) != 3 {
			t.Errorf("[%s] expected 3 launches, got %q", role, got)
		}
		if n := len(e.events("--session", name, "--kind", herd.EventFailed)); n != 0 {
			t.Errorf("[%s] expected no failed event, got %d", role, n)
		}
	}
}

// readScript returns the body of a script written by script, without its
// #! line.
func readScript(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSuffix(string(b), "\n"), "#!/bin/sh\n")
}
