package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// envOf returns the value of key in the environment of pid ("" when it
// cannot be read: gone, or mid-exec).
func envOf(pid int, key string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(key+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// TestLaunchWaveDaemonKilled: a reconcile round launches many sessions side
// by side; a daemon killed (SIGKILL) in the middle of the wave leaves no
// agent unrecorded and none twice: once a new daemon has finished the
// wave, every slot has exactly one agent, the one its record names, one
// tmux session each, one spawned event per incarnation, and no launching
// session was ever reported as unmanaged.
func TestLaunchWaveDaemonKilled(t *testing.T) {
	hasTmux(t)
	const n = 40
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "wave", "--replicas", fmt.Sprint(n), "--", "sleep", "300")
	e.waitFor("the wave under way", 30*time.Second, func() bool {
		return len(e.events("--kind", herd.EventSpawned)) >= 5
	})
	before := len(e.events("--kind", herd.EventSpawned))
	e.kill(syscall.SIGKILL)
	t.Logf("killed after %d of %d spawned, with %d tmux sessions", before, n, len(e.tmuxSessions()))
	e.start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		running, states := 0, map[string][]string{}
		for _, v := range e.sessions() {
			states[string(v.State)] = append(states[string(v.State)], v.Name)
			if v.Role == "wave" && v.State == herd.StateRunning && v.PID > 0 {
				running++
			}
		}
		if running == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected every wave session running within 60s … got %v", states)
		}
		time.Sleep(100 * time.Millisecond)
	}

	recorded := map[string]string{} // session -> incarnation
	for _, v := range e.sessions() {
		recorded[v.Name] = v.Incarnation
	}
	var agents map[string][]string // session -> incarnations of live agents
	e.waitFor("one agent per session", 10*time.Second, func() bool {
		agents = map[string][]string{}
		for _, pid := range e.agentPIDs() {
			if s := envOf(pid, herd.EnvSession); s != "" {
				agents[s] = append(agents[s], envOf(pid, herd.EnvIncarnation))
			}
		}
		if len(agents) != n {
			return false
		}
		for _, incs := range agents {
			if len(incs) != 1 {
				return false
			}
		}
		return true
	})
	for name, incs := range agents {
		if incs[0] != recorded[name] {
			t.Errorf("[%s] expected its live agent to be the recorded incarnation %s … got %v", name, recorded[name], incs)
		}
	}
	if got := e.tmuxSessions(); len(got) != n {
		t.Errorf("expected %d tmux sessions … got %d: %s", n, len(got), strings.Join(got, " "))
	}
	spawned := map[string]int{}
	for _, ev := range e.events("--kind", herd.EventSpawned) {
		spawned[ev.Incarnation]++
	}
	for inc, c := range spawned {
		if c != 1 {
			t.Errorf("[%s] expected one spawned event per incarnation … got %d", inc, c)
		}
	}
	for _, ev := range e.events("--kind", herd.EventProbeUnknown) {
		if ev.Reason == "unmanaged" {
			t.Errorf("expected no unmanaged report of a launching session … got one for %s: %s", ev.Session, ev.Message)
		}
	}
}
