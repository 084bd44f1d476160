package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// launcherJS is a launcher shaped like Gemini CLI's (0.61): run as
// node …/gemini.js, it ignores SIGINT, SIGTERM and SIGHUP, starts itself
// again as a child with more memory (node --max-old-space-size=…
// gemini.js), relaunches the child when it exits 199, and exits with the
// child's code, 1 when a signal killed it, after LAUNCHER_DELAY_MS (a
// launcher loading a large bundle first). The child is the agent: it
// exits 199 when the file "relaunch" appears beside it.
const launcherJS = `
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
if (!process.env.GEMINI_CLI_NO_RELAUNCH) {
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => {});
  const run = () => new Promise((resolve) => {
    const child = spawn(process.execPath, ["--max-old-space-size=256", __filename, ...process.argv.slice(2)],
      { stdio: "inherit", env: { ...process.env, GEMINI_CLI_NO_RELAUNCH: "true" } });
    child.on("close", (code) => resolve(code ?? 1));
  });
  const delay = Number(process.env.LAUNCHER_DELAY_MS || 0);
  setTimeout(async () => { for (;;) { const code = await run(); if (code !== 199) process.exit(code); } }, delay);
} else {
  const flag = path.join(__dirname, "relaunch");
  console.log("agent " + process.pid + " ready");
  setInterval(() => {
    if (fs.existsSync(flag)) { fs.unlinkSync(flag); process.exit(199); }
  }, 20);
}
`

// TestLauncherAgentIsTheRealProcess runs an agent under a launcher shaped
// like Gemini CLI's (a node launcher that ignores TERM and relaunches its
// child) under the daemon:
//
//   - the recorded agent is the child, not the launcher;
//   - the child's relaunch by its launcher (exit 199) is followed: its new
//     identity is recorded, no crash is counted;
//   - the child killed by SIGSEGV or SIGKILL is crashed with that signal,
//     not the launcher's "exited with code 1";
//   - herd signal NAME TERM reaches the child and ends it (the launcher
//     would have swallowed it).
func TestLauncherAgentIsTheRealProcess(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "gemini.js")
	if err := os.WriteFile(script, []byte(launcherJS), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, `
[restart]
initial_backoff = "100ms"
max_backoff = "1s"
max_restarts = 10
`)
	e.start()
	roles := filepath.Join(dir, "roles.toml")
	if err := os.WriteFile(roles, fmt.Appendf(nil, "[[role]]\nname = \"gm\"\ncommand = [%q, %q]\nworkdir = %q\n", node, script, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	const name = "gm-0"

	// The agent: the child, under the launcher.
	agent := e.waitAgent(name, 0)
	launcher := ppidOf(t, agent.PID)
	if !strings.Contains(cmdline(agent.PID), "--max-old-space-size=") || !strings.Contains(cmdline(launcher), "gemini.js") {
		t.Fatalf("[launch] expected the child recorded, got pid %d (%q) under %d (%q)", agent.PID, cmdline(agent.PID), launcher, cmdline(launcher))
	}
	e.events("--session", name) // the log reads

	// A relaunch by the launcher is followed, not a crash.
	if err := os.WriteFile(filepath.Join(dir, "relaunch"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	relaunched := e.waitAgent(name, agent.PID)
	if ppidOf(t, relaunched.PID) != launcher {
		t.Errorf("[relaunch] expected the new child of launcher %d, got pid %d under %d", launcher, relaunched.PID, ppidOf(t, relaunched.PID))
	}
	evs := e.events("--session", name)
	if n := count(evs, herd.EventCrashed) + count(evs, herd.EventExited) + count(evs, herd.EventRestarted); n != 0 || relaunched.Restarts != 0 {
		t.Errorf("[relaunch] expected no death counted, got %d crash/exit/restart events, restarts %d", n, relaunched.Restarts)
	}
	if !hasEvent(e, name, herd.EventAdopted, func(ev herd.Event) bool { return ev.Reason == "relaunched" }) {
		t.Errorf("[relaunch] expected an adopted event with reason relaunched, got %+v", evs)
	}

	// SIGSEGV and SIGKILL of the agent: crashed with that signal.
	prev := relaunched
	for i, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGKILL} {
		if err := syscall.Kill(prev.PID, sig); err != nil {
			t.Fatal(err)
		}
		crashed := e.eventsOf(name, herd.EventCrashed, i+1)[i]
		if got := crashSignal(crashed); got != int(sig) {
			t.Errorf("[%s] expected crashed by signal %d, got %+v", sig, sig, crashed)
		}
		prev = e.waitAgent(name, prev.PID)
	}

	// herd signal TERM ends the agent the launcher would have shielded.
	out := e.must("signal", name, "TERM")
	if !strings.Contains(out, "pid "+strconv.Itoa(prev.PID)) {
		t.Errorf("[signal] expected TERM sent to the agent, pid %d, got %q", prev.PID, out)
	}
	crashed := e.eventsOf(name, herd.EventCrashed, 3)[2]
	if got := crashSignal(crashed); got != int(syscall.SIGTERM) {
		t.Errorf("[signal] expected the agent ended by TERM, got %+v", crashed)
	}
	e.waitAgent(name, prev.PID)
	for _, ev := range e.events("--session", name) {
		t.Logf("%s %s %s: %s", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Reason, ev.Message)
	}
	e.must("stop", name)
	e.waitFor("the launcher and its agents gone", 20*time.Second, func() bool { return len(e.agentPIDs()) == 0 })
}

// waitAgent waits until session name runs with an agent other than pid
// not (0: any) and returns it.
func (e *env) waitAgent(name string, not int) api.SessionView {
	e.t.Helper()
	var v api.SessionView
	e.waitFor(fmt.Sprintf("%s running with an agent other than %d", name, not), 30*time.Second, func() bool {
		var ok bool
		v, ok = e.session(name)
		return ok && v.State == herd.StateRunning && v.PID != 0 && v.PID != not
	})
	return v
}

// crashSignal is the signal a crashed event names (0: none).
func crashSignal(ev herd.Event) int {
	if s, ok := ev.Data["signal"].(float64); ok {
		return int(s)
	}
	return 0
}

// ppidOf is the parent of pid, from /proc.
func ppidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// TestLauncherSlowChildIsFollowed: a launcher whose child takes longer
// than the launcher grace (15 s; Gemini CLI's took 8-13 s on a loaded
// machine) is taken for the agent meanwhile, and its child, once it
// appears, is the agent recorded, without a crash.
func TestLauncherSlowChildIsFollowed(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "gemini.js")
	if err := os.WriteFile(script, []byte(launcherJS), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fastRestart)
	e.start()
	roles := filepath.Join(dir, "roles.toml")
	if err := os.WriteFile(roles, fmt.Appendf(nil, "[[role]]\nname = \"gm\"\ncommand = [%q, %q]\nworkdir = %q\nenv = { LAUNCHER_DELAY_MS = \"17000\" }\n", node, script, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	const name = "gm-0"
	launcher := e.waitAgent(name, 0)
	if strings.Contains(cmdline(launcher.PID), "--max-old-space-size=") {
		t.Fatalf("[grace] expected the launcher taken for the agent, got its child %q", cmdline(launcher.PID))
	}
	child := e.waitAgent(name, launcher.PID)
	if ppidOf(t, child.PID) != launcher.PID || !strings.Contains(cmdline(child.PID), "--max-old-space-size=") {
		t.Errorf("[child] expected the launcher's child recorded, got pid %d %q", child.PID, cmdline(child.PID))
	}
	evs := e.events("--session", name)
	if n := count(evs, herd.EventCrashed) + count(evs, herd.EventExited); n != 0 || child.Restarts != 0 {
		t.Errorf("[child] expected no death counted, got %d crash/exit events, restarts %d", n, child.Restarts)
	}
	e.must("stop", name)
	e.waitFor("the launcher and its agent gone", 20*time.Second, func() bool { return len(e.agentPIDs()) == 0 })
}
