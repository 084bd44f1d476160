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

// writeRoles writes a herd.toml of doc for apply.
func writeRoles(t *testing.T, doc string) string {
	t.Helper()
	path := t.TempDir() + "/roles.toml"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// placedRole is a role of exec agents (sleep) with placement keys.
func placedRole(name string, replicas int, keys string) string {
	return fmt.Sprintf("[[role]]\nname = %q\nreplicas = %d\ncommand = [\"sleep\", \"3600\"]\nruntime = \"exec\"\n%s\n", name, replicas, keys)
}

// hostsOf maps the sessions of role to their host, for the sessions in state.
func hostsOf(e *env, role string, state herd.State) map[string]string {
	out := map[string]string{}
	for _, v := range e.sessions() {
		if v.Role == role && v.State == state {
			out[v.Name] = v.Host
		}
	}
	return out
}

// leader is the host `get hosts` names the placement leader, or "".
func leader(e *env) string {
	for name, h := range e.hosts() {
		if h.Leader {
			return name
		}
	}
	return ""
}

// TestFleetPlacement: three daemons on one PostgreSQL. spread = true
// places one replica per host; hosts = ["b"] declared on a runs on b; the
// leader's daemon killed, another is elected and placement goes on (a
// scale-up is placed); a host killed with failover = false leaves its
// session unknown, not moved; with failover = true its slot moves to a
// live host after host_timeout and its lease (2s here) plus the margin,
// and the old host, back, ends its copy
// through the stop path (one stopped event, reason moved).
func TestFleetPlacement(t *testing.T) {
	dsn := startPG(t)
	envs := map[string]*env{}
	for _, h := range []string{"a", "b", "c"} {
		envs[h] = newFleetEnv(t, h, dsn, `lease = "2s"`)
		envs[h].start()
	}
	a, b := envs["a"], envs["b"]

	a.must("apply", "-f", writeRoles(t, placedRole("sp", 3, "spread = true")+placedRole("onb", 1, `hosts = ["b"]`)))
	a.waitFor("sp spread over a, b, c and onb on b", 30*time.Second, func() bool {
		sp := hostsOf(a, "sp", herd.StateRunning)
		seen := map[string]bool{}
		for _, h := range sp {
			seen[h] = true
		}
		return len(sp) == 3 && len(seen) == 3 && hostsOf(a, "onb", herd.StateRunning)["onb-0"] == "b"
	})
	roles := a.must("get", "roles")
	if !strings.Contains(roles, "a:1") || !strings.Contains(roles, "c:1") || !strings.Contains(roles, "PLACEMENT") || !strings.Contains(roles, "hosts=b") {
		t.Errorf("expected sp's sessions on every host and the placement in get roles, got:\n%s", roles)
	}
	if out := a.must("describe", "role", "sp"); !strings.Contains(out, "spread") {
		t.Errorf("expected describe role to show the placement, got:\n%s", out)
	}

	// The leader goes; another daemon leads and places a scale-up.
	var first string
	a.waitFor("a placement leader", 10*time.Second, func() bool { first = leader(a); return first != "" })
	envs[first].kill(syscall.SIGKILL)
	var rest []*env
	for _, h := range []string{"a", "b", "c"} {
		if h != first {
			rest = append(rest, envs[h])
		}
	}
	p := rest[0]
	p.waitFor("another leader elected", 20*time.Second, func() bool {
		l := leader(p)
		return l != "" && l != first
	})
	// Once the old leader's host is stale, new slots go to the live ones.
	p.waitFor("the old leader's host stale", 20*time.Second, func() bool { return p.hosts()[first].Daemon == "stale" })
	p.must("scale", "sp", "--replicas", "5")
	p.waitFor("sp-3 and sp-4 placed on live hosts", 30*time.Second, func() bool {
		sp := hostsOf(p, "sp", herd.StateRunning)
		return sp["sp-3"] != "" && sp["sp-3"] != first && sp["sp-4"] != "" && sp["sp-4"] != first
	})
	// Without failover, the dead leader's slot waits: unknown, not moved.
	var waiting string
	for name, h := range hostsOf(p, "sp", herd.StateUnknown) {
		if h == first {
			waiting = name
		}
	}
	if waiting == "" {
		t.Fatalf("expected %s's sp session unknown on its host, got %+v", first, p.sessions())
	}
	envs[first].start()
	p.waitFor("the old leader's session running again on its host", 20*time.Second, func() bool {
		return hostsOf(p, "sp", herd.StateRunning)[waiting] == first
	})

	// failover = true: b's slot moves to a live host after host_timeout.
	a.must("apply", "-f", writeRoles(t, placedRole("fo", 1, `hosts = ["b", "c"]`+"\nfailover = true")))
	a.waitFor("fo-0 running on b", 30*time.Second, func() bool { return hostsOf(a, "fo", herd.StateRunning)["fo-0"] == "b" })
	b.kill(syscall.SIGKILL)
	killed := time.Now()
	a.waitFor("fo-0 moved to c", 30*time.Second, func() bool { return hostsOf(a, "fo", herd.StateRunning)["fo-0"] == "c" })
	// b beat last at most one beat (1s) before it died: stale 2s to 3s after.
	if d := time.Since(killed); d < 2*time.Second {
		t.Errorf("expected the move only once b is stale (host timeout 3s, a beat every 1s), took %v", d)
	}
	if v, _ := a.session("onb-0"); v.Host != "b" || v.State != herd.StateUnknown {
		t.Errorf("expected onb-0 (no failover) unknown on b, got %s on %s", v.State, v.Host)
	}
	// b comes back: its copy of fo-0 is ended (moved), c's stays.
	copies := sessionPIDs(b, "fo-0")
	if len(copies) == 0 {
		t.Fatalf("expected b's copy of fo-0 alive while b's daemon is away")
	}
	b.start()
	a.waitFor("b's copy of fo-0 stopped as moved", 30*time.Second, func() bool {
		for _, ev := range a.events("--session", "fo-0", "--kind", herd.EventStopped) {
			if ev.Host == "b" && ev.Reason == herd.ReasonMoved {
				return true
			}
		}
		return false
	})
	if v, _ := a.session("fo-0"); v.Host != "c" || v.State != herd.StateRunning {
		t.Errorf("expected fo-0 running on c after b came back, got %s on %s", v.State, v.Host)
	}
	b.waitFor("b's copy of fo-0 gone", 10*time.Second, func() bool { return len(sessionPIDs(b, "fo-0")) == 0 })
	if n := len(sessionPIDs(envs["c"], "fo-0")); n != 1 {
		t.Errorf("expected c's fo-0 alive, got %d processes", n)
	}
	if n := count(a.events("--session", "fo-0", "--kind", herd.EventStopped), herd.EventStopped); n != 1 {
		t.Errorf("expected exactly one stopped event of fo-0, got %d", n)
	}

	// The leading daemon holds its pool, its listener and the lock within
	// 4 connections.
	if l := leader(a); l == "" {
		t.Errorf("expected a placement leader at the end")
	} else if n := connections(t, dsn, l); n > 4 || n == 0 {
		t.Errorf("expected the leader %s to hold 1..4 connections, got %d", l, n)
	}

	// Deleting a placed role from one host stops its sessions on every
	// host (each through its own daemon's stop path).
	started := time.Now()
	if msg := a.must("delete", "role", "sp"); !strings.Contains(msg, "role sp deleted") {
		t.Errorf("expected role sp deleted, got %q", msg)
	}
	t.Logf("delete role sp across three hosts: %v", time.Since(started))
	for _, e := range envs {
		if n := len(e.sessions()); n == 0 {
			continue
		}
		for _, v := range e.sessions() {
			if v.Role == "sp" {
				t.Errorf("expected no sp session left, got %+v", v)
			}
		}
		for _, pid := range e.agentPIDs() {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if bytes.Contains(b, []byte(herd.EnvSession+"=sp-")) {
				t.Errorf("expected every sp agent ended, pid %d lives", pid)
			}
		}
	}
}

// sessionPIDs lists e's agent processes of session name.
func sessionPIDs(e *env, name string) []int {
	var out []int
	want := []byte(herd.EnvSession + "=" + name + "\x00")
	for _, pid := range e.agentPIDs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(b, want) {
			out = append(out, pid)
		}
	}
	return out
}
