package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
)

// sessionEnd is what a verb script leaves of one session.
type sessionEnd struct {
	State herd.State
	// Fresh: its incarnation changed during the script.
	Fresh bool
	// Events counts its lifecycle events by kind/reason.
	Events map[string]int
}

// scriptEnd is what a verb script leaves of one role.
type scriptEnd struct {
	Replicas int
	Sessions map[string]sessionEnd
}

// fleetOf is the daemons a verb script runs through: one, or several on
// one PostgreSQL.
type fleetOf []*env

// view is the fleet's sessions of role, by name, as the first daemon
// sees them.
func (f fleetOf) view(role string) map[string]api.SessionView {
	out := map[string]api.SessionView{}
	for _, v := range f[0].sessions() {
		if v.Role == role {
			out[v.Name] = v
		}
	}
	return out
}

// issuer is the daemon a verb on session name is typed at: one of another
// host than the session's when there is one, so that every verb crosses
// hosts in a fleet.
func (f fleetOf) issuer(name string) *env {
	if len(f) == 1 {
		return f[0]
	}
	v, ok := f[0].session(name)
	if !ok {
		f[0].t.Fatalf("no session %s", name)
	}
	for _, e := range f {
		if h := e.hosts(); !h[v.Host].Self {
			return e
		}
	}
	return f[0]
}

// replicas is role's replica count.
func (f fleetOf) replicas(role string) int {
	var roles []api.RoleView
	if err := json.Unmarshal([]byte(f[0].must("get", "roles", "-o", "json")), &roles); err != nil {
		f[0].t.Fatal(err)
	}
	for _, r := range roles {
		if r.Name == role {
			return r.Replicas
		}
	}
	f[0].t.Fatalf("no role %s", role)
	return 0
}

// verbScript runs, on role's three running sessions, herd stop of
// <role>-1 and herd restart of <role>-0, each typed at a daemon of
// another host than the session's when f is a fleet, and returns what it
// leaves once the fleet has had time to (wrongly) react.
func verbScript(t *testing.T, f fleetOf, role string) scriptEnd {
	t.Helper()
	e := f[0]
	s0, s1 := role+"-0", role+"-1"
	e.waitFor(role+"'s three sessions running", 30*time.Second, func() bool {
		n := 0
		for _, v := range f.view(role) {
			if v.State == herd.StateRunning {
				n++
			}
		}
		return n == 3
	})
	before := f.view(role)

	if out := f.issuer(s1).must("stop", s1); !strings.Contains(out, "session "+s1+" stopped") {
		t.Errorf("expected %s stopped, got %q", s1, out)
	}
	e.waitState(s1, herd.StateStopped, 10*time.Second)
	if out := f.issuer(s0).must("restart", s0); !strings.Contains(out, "session "+s0+" restarted (incarnation ") {
		t.Errorf("expected %s restarted, got %q", s0, out)
	}
	e.waitFor(s0+" running a fresh incarnation", 10*time.Second, func() bool {
		v, ok := e.session(s0)
		return ok && v.State == herd.StateRunning && v.Incarnation != before[s0].Incarnation
	})
	// Give every reconciler and the placement leader many rounds (200ms
	// probe interval) to relaunch or stop what they should not: the state
	// must hold all along.
	settled := f.view(role)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		now := f.view(role)
		for name, v := range now {
			if w := settled[name]; v.State != w.State || v.Incarnation != w.Incarnation {
				t.Fatalf("expected the sessions to hold after the script, %s went %s/%s -> %s/%s", name, w.State, w.Incarnation, v.State, v.Incarnation)
			}
		}
	}

	out := scriptEnd{Replicas: f.replicas(role), Sessions: map[string]sessionEnd{}}
	for name, v := range settled {
		end := sessionEnd{State: v.State, Fresh: v.Incarnation != before[name].Incarnation, Events: map[string]int{}}
		for _, ev := range e.events("--session", name) {
			switch ev.Kind {
			case herd.EventSpawned, herd.EventStopped, herd.EventRestarted, herd.EventResumed, herd.EventKilled, herd.EventCrashed:
				end.Events[ev.Kind+"/"+ev.Reason]++
			}
		}
		out.Sessions[name] = end
	}
	return out
}

// wantScriptEnd is what verbScript must leave of role: the stopped
// session's replica gone and nothing launched or stopped in its place,
// the restarted one fresh, the third untouched.
func wantScriptEnd(role string) scriptEnd {
	spawned := herd.EventSpawned + "/"
	return scriptEnd{Replicas: 2, Sessions: map[string]sessionEnd{
		role + "-0": {State: herd.StateRunning, Fresh: true, Events: map[string]int{spawned: 1, "stopped/user": 1, "restarted/user": 1}},
		role + "-1": {State: herd.StateStopped, Events: map[string]int{spawned: 1, "stopped/user": 1}},
		role + "-2": {State: herd.StateRunning, Events: map[string]int{spawned: 1}},
	}}
}

// TestVerbsSameOnEveryHost: the same verb script (stop, restart) leaves
// the same end state on one host as across a two-host fleet on PostgreSQL
// with every verb typed at the host that does not run the session: for a
// role declared on one host, and for a role spread over both.
func TestVerbsSameOnEveryHost(t *testing.T) {
	const exec = `command = ["sleep", "3600"]` + "\nruntime = \"exec\"\n"
	t.Run("one host", func(t *testing.T) {
		e := newEnv(t, "")
		e.start()
		e.must("run", "w", "--runtime", "exec", "--replicas", "3", "--", "sleep", "3600")
		e.must("apply", "-f", writeRoles(t, placedRole("sp", 3, "spread = true")))
		for _, role := range []string{"w", "sp"} {
			if diff := cmp.Diff(wantScriptEnd(role), verbScript(t, fleetOf{e}, role)); diff != "" {
				t.Errorf("[one host, %s] end state (-want +got):\n%s", role, diff)
			}
		}
	})
	t.Run("fleet", func(t *testing.T) {
		dsn := startPG(t)
		a, b := newFleetEnv(t, "a", dsn), newFleetEnv(t, "b", dsn)
		a.start()
		b.start()
		a.waitFor("both hosts up", 10*time.Second, func() bool {
			h := a.hosts()
			return h["a"].Daemon == "up" && h["b"].Daemon == "up"
		})
		// w is b's: every verb is typed at a. sp is spread over a and b.
		b.must("run", "w", "--runtime", "exec", "--replicas", "3", "--", "sleep", "3600")
		a.must("apply", "-f", writeRoles(t, fmt.Sprintf("[[role]]\nname = \"sp\"\nreplicas = 3\nspread = true\n%s", exec)))
		f := fleetOf{a, b}
		for _, role := range []string{"w", "sp"} {
			got := verbScript(t, f, role)
			if diff := cmp.Diff(wantScriptEnd(role), got); diff != "" {
				t.Errorf("[fleet, %s] end state (-want +got):\n%s", role, diff)
			}
		}
		if hs := hostsOf(a, "sp", herd.StateRunning); len(hs) != 2 {
			t.Errorf("expected two sp sessions running, got %v", hs)
		}
		otherVerbsCrossHosts(t, a, b)
	})
}

// otherVerbsCrossHosts: signal, reset, restart role/NAME, rollout restart
// and delete role typed at a for role w of b are carried out by b, as
// stop and restart are; rollout restart of the placed role sp typed at b
// replaces its live sessions wherever they run.
func otherVerbsCrossHosts(t *testing.T, a, b *env) {
	w2 := a.waitState("w-2", herd.StateRunning, 10*time.Second)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"signal", "w-2", "CONT"}, "SIGCONT sent to session w-2 (pid "},
		{[]string{"reset", "w-2"}, "session w-2: crash count reset (on host b)"},
		{[]string{"rollout", "restart", "w", "--all", "--min-ready", "0s"}, "role w: rolled out (2 session(s) replaced) (on host b)"},
		{[]string{"restart", "role/w"}, "role w: 2 session(s) restarted"},
	} {
		if out := a.must(c.args...); !strings.Contains(out, c.want) || !strings.Contains(out, "on host b") && c.args[0] != "restart" {
			t.Errorf("[%s] expected %q from host b, got %q", strings.Join(c.args, " "), c.want, out)
		}
	}
	a.waitFor("w-2 running a fresh incarnation", 10*time.Second, func() bool {
		v, ok := a.session("w-2")
		return ok && v.State == herd.StateRunning && v.Incarnation != w2.Incarnation && v.Host == "b"
	})
	evs := a.events("--session", "w-2", "--kind", herd.EventRestarted)
	if len(eventsOf(evs, herd.EventRestarted, herd.EventRollout)) != 1 || len(eventsOf(evs, herd.EventRestarted, herd.ReasonUser)) != 1 {
		t.Errorf("expected w-2 restarted once by the rollout and once by restart role/w, got %+v", evs)
	}
	for _, ev := range evs {
		if ev.Host != "b" {
			t.Errorf("expected every restart written by b, got %+v", ev)
		}
	}
	// A placed role is rolled out by each host running its sessions, the
	// one it is typed at first (spread puts sp-0 and sp-2 on a, sp-1,
	// stopped, on b).
	if out := b.must("rollout", "restart", "sp", "--all", "--min-ready", "0s"); !strings.Contains(out, "role sp: rolled out (2 session(s) replaced)") {
		t.Errorf("expected sp's sessions on a replaced through b, got %q", out)
	}
	if out := a.must("delete", "role", "w"); !strings.Contains(out, "role w deleted (2 session(s) stopped) (on host b)") {
		t.Errorf("expected b to delete its role, got %q", out)
	}
	if _, ok := b.session("w-2"); ok {
		t.Errorf("expected w's sessions forgotten")
	}
}
