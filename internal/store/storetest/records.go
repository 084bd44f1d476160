package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

func fullRole(name string) herd.Role {
	return herd.Role{
		Name:         name,
		Replicas:     3,
		Command:      []string{"claude", "--model", "x y"},
		Workdir:      "/src/app",
		Env:          map[string]string{"A": "1", "B": "two words"},
		Runtime:      herd.RuntimeTmux,
		Agent:        herd.AgentClaude,
		AgentProcess: "claude",
		Restart: herd.RestartPolicy{
			Policy:         herd.PolicyOnFailure,
			InitialBackoff: 10 * time.Second,
			MaxBackoff:     5 * time.Minute,
			ResetAfter:     10 * time.Minute,
			MaxRestarts:    4,
		},
		Worktree:        true,
		WorktreeBase:    "main",
		WorktreeSetup:   []string{"make", "deps"},
		WorktreeInclude: []string{".env", "config/*.local"},
		MemoryMax:       64 << 20,
		PidsMax:         512,
		RestartOnUpdate: true,
		Host:            "box-2",
		Hosts:           []string{"box-1", "box-2"},
		Spread:          true,
		Failover:        true,
		Account:         "team-a",
		DailyBudgetUSD:  12.5,
		BudgetHard:      true,
		Tasks:           true,
		Check:           []string{"go", "test", "./..."},
		CheckTimeout:    3 * time.Minute,
		Merge:           herd.MergeSquash,
		KeepBranch:      true,
		MaxReplicas:     9,
		ScaleDownAfter:  5 * time.Minute,
		UpdatedAt:       at(0),
	}
}

func roleUTC(t *testing.T, r herd.Role) { t.Helper(); checkUTC(t, "role "+r.Name, &r.UpdatedAt) }

func testRoleRoundTrip(t *testing.T, s store.Store) {
	full := fullRole("worker")
	// Zero values everywhere: nil slice and map, zero time.
	bare := herd.Role{Name: "bare"}
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutRole(full); err != nil {
			return err
		}
		return tx.PutRole(bare)
	})
	view(t, s, func(tx store.Tx) error {
		for _, want := range []herd.Role{full, bare} {
			got, err := tx.Role(want.Name)
			if err != nil {
				return err
			}
			diff(t, "role "+want.Name, want, got)
			roleUTC(t, got)
		}
		return nil
	})
}

func testRolesOrderedAndReplaced(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, n := range []string{"b", "c", "a"} {
			if err := tx.PutRole(fullRole(n)); err != nil {
				return err
			}
		}
		return nil
	})
	changed := herd.Role{Name: "b", Replicas: 7, Command: []string{}, UpdatedAt: at(5)}
	update(t, s, func(tx store.Tx) error { return tx.PutRole(changed) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Roles()
		if err != nil {
			return err
		}
		diff(t, "roles", []herd.Role{fullRole("a"), changed, fullRole("c")}, got)
		for _, r := range got {
			roleUTC(t, r)
		}
		return nil
	})
}

func testDeleteRole(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, r := range []string{"gone", "kept"} {
			if err := tx.PutRole(fullRole(r)); err != nil {
				return err
			}
		}
		for _, name := range []string{"gone-0", "gone-1", "kept-0"} {
			role := name[:len(name)-2]
			if err := tx.PutSession(minimalSession(name, role)); err != nil {
				return err
			}
		}
		if err := tx.PutIncarnation(openIncarnation("inc-gone", "gone-0", "h", at(0))); err != nil {
			return err
		}
		return tx.AppendEvent(&herd.Event{Time: at(0), Session: "gone-0", Kind: herd.EventSpawned})
	})
	update(t, s, func(tx store.Tx) error { return tx.DeleteRole("gone") })
	update(t, s, func(tx store.Tx) error { return tx.DeleteRole("never-existed") })
	view(t, s, func(tx store.Tx) error {
		if _, err := tx.Role("gone"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[deleted role] expected ErrNotFound, got %v", err)
		}
		if _, err := tx.Role("kept"); err != nil {
			t.Errorf("[other role] expected it kept, got %v", err)
		}
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		diff(t, "sessions after delete", []herd.Session{minimalSession("kept-0", "kept")}, sessions)
		if _, err := tx.Incarnation("inc-gone"); err != nil {
			t.Errorf("[incarnation of deleted role] expected it kept, got %v", err)
		}
		events, err := tx.Events(store.EventFilter{Session: "gone-0"})
		if err != nil {
			return err
		}
		if len(events) != 1 {
			t.Errorf("[events of deleted role] expected 1 kept, got %d", len(events))
		}
		return nil
	})
}

func fullSession(name, role string) herd.Session {
	return herd.Session{
		Name:           name,
		Role:           role,
		Index:          2,
		Host:           "host-a",
		State:          herd.StateBackoff,
		Incarnation:    "inc-7",
		RuntimeKind:    herd.RuntimeTmux,
		Runtime:        herd.Alive,
		Process:        herd.Dead,
		Activity:       herd.ActivityWaiting,
		Restarts:       3,
		LastCrashAt:    ptr(at(10)),
		BackoffUntil:   ptr(at(50)),
		Exit:           &herd.Exit{Code: ptr(1), Reason: herd.ReasonExitCode, At: at(10)},
		StartedAt:      ptr(at(-3600)),
		LastActivityAt: ptr(at(5)),
		StateSince:     at(10),
		Archived:       true,
		Snapshot: &herd.Snapshot{
			Argv:           []string{"claude", "--resume", "abc"},
			Workdir:        "/src/app",
			EnvNames:       []string{"A", "B"},
			Agent:          herd.AgentClaude,
			AgentSessionID: "abc",
			RuntimeKind:    herd.RuntimeTmux,
		},
	}
}

// minimalSession has every optional field unset.
func minimalSession(name, role string) herd.Session {
	return herd.Session{Name: name, Role: role, State: herd.StatePending, StateSince: at(0)}
}

func sessionUTC(t *testing.T, s herd.Session) {
	t.Helper()
	var exitAt *time.Time
	if s.Exit != nil {
		exitAt = &s.Exit.At
	}
	checkUTC(t, "session "+s.Name, s.LastCrashAt, s.BackoffUntil, s.StartedAt,
		s.LastActivityAt, &s.StateSince, exitAt)
}

func testSessionRoundTrip(t *testing.T, s store.Store) {
	signaled := minimalSession("sig-0", "sig")
	signaled.State = herd.StateCrashed
	signaled.Exit = &herd.Exit{Signal: ptr(9), Reason: herd.ReasonSignal, At: at(3)}
	stopped := minimalSession("stop-0", "stop")
	stopped.State = herd.StateStopped
	stopped.Snapshot = &herd.Snapshot{Argv: []string{"codex"}, RuntimeKind: herd.RuntimeExec}
	cases := []herd.Session{
		fullSession("full-0", "full"),
		minimalSession("min-0", "min"),
		signaled,
		stopped,
	}
	update(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			if err := tx.PutSession(c); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		for _, want := range cases {
			got, err := tx.Session(want.Name)
			if err != nil {
				return err
			}
			diff(t, "session "+want.Name, want, got)
			sessionUTC(t, got)
		}
		minimal, err := tx.Session("min-0")
		if err != nil {
			return err
		}
		if minimal.LastCrashAt != nil || minimal.BackoffUntil != nil || minimal.Exit != nil ||
			minimal.StartedAt != nil || minimal.LastActivityAt != nil || minimal.Snapshot != nil {
			t.Errorf("[minimal session] expected nil pointers to stay nil, got %+v", minimal)
		}
		sig, err := tx.Session("sig-0")
		if err != nil {
			return err
		}
		if sig.Exit == nil || sig.Exit.Code != nil || sig.Exit.Signal == nil || *sig.Exit.Signal != 9 {
			t.Errorf("[signal exit] expected code nil and signal 9, got %+v", sig.Exit)
		}
		return nil
	})
}

func testSessionsOrderedAndReplaced(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, n := range []string{"w-2", "w-0", "w-1"} {
			if err := tx.PutSession(fullSession(n, "w")); err != nil {
				return err
			}
		}
		return nil
	})
	// Replacing must clear what the new value leaves unset.
	relaunched := minimalSession("w-1", "w")
	relaunched.State = herd.StateRunning
	relaunched.Restarts = 4
	update(t, s, func(tx store.Tx) error { return tx.PutSession(relaunched) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Sessions()
		if err != nil {
			return err
		}
		diff(t, "sessions", []herd.Session{fullSession("w-0", "w"), relaunched, fullSession("w-2", "w")}, got)
		for _, s := range got {
			sessionUTC(t, s)
		}
		return nil
	})
}

func testDeleteSession(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutSession(minimalSession("a-0", "a")); err != nil {
			return err
		}
		return tx.PutSession(minimalSession("a-1", "a"))
	})
	update(t, s, func(tx store.Tx) error {
		if err := tx.DeleteSession("a-0"); err != nil {
			return err
		}
		return tx.DeleteSession("never-existed")
	})
	view(t, s, func(tx store.Tx) error {
		if _, err := tx.Session("a-0"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[deleted session] expected ErrNotFound, got %v", err)
		}
		got, err := tx.Sessions()
		if err != nil {
			return err
		}
		diff(t, "sessions", []herd.Session{minimalSession("a-1", "a")}, got)
		return nil
	})
}

func testNotFound(t *testing.T, s store.Store) {
	view(t, s, func(tx store.Tx) error {
		if _, err := tx.Role("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[role] expected ErrNotFound, got %v", err)
		}
		if _, err := tx.Session("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[session] expected ErrNotFound, got %v", err)
		}
		if _, err := tx.Incarnation("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[incarnation] expected ErrNotFound, got %v", err)
		}
		if _, err := tx.Host("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[host] expected ErrNotFound, got %v", err)
		}
		hosts, err := tx.Hosts()
		if err != nil || len(hosts) != 0 {
			t.Errorf("[hosts of empty store] expected none, got %v, %v", hosts, err)
		}
		roles, err := tx.Roles()
		if err != nil || len(roles) != 0 {
			t.Errorf("[roles of empty store] expected none, got %v, %v", roles, err)
		}
		sessions, err := tx.Sessions()
		if err != nil || len(sessions) != 0 {
			t.Errorf("[sessions of empty store] expected none, got %v, %v", sessions, err)
		}
		open, err := tx.OpenIncarnations()
		if err != nil || len(open) != 0 {
			t.Errorf("[open incarnations of empty store] expected none, got %v, %v", open, err)
		}
		events, err := tx.Events(store.EventFilter{})
		if err != nil || len(events) != 0 {
			t.Errorf("[events of empty store] expected none, got %v, %v", events, err)
		}
		return nil
	})
}

func testEmptyKeysRejected(t *testing.T, s store.Store) {
	cases := []struct {
		name string
		put  func(tx store.Tx) error
	}{
		{"role", func(tx store.Tx) error { return tx.PutRole(herd.Role{Replicas: 1}) }},
		{"session", func(tx store.Tx) error { return tx.PutSession(herd.Session{Role: "r"}) }},
		{"incarnation", func(tx store.Tx) error { return tx.PutIncarnation(herd.Incarnation{Session: "s"}) }},
		{"host", func(tx store.Tx) error { return tx.PutHost(herd.Host{BootID: "b"}) }},
	}
	for _, c := range cases {
		err := s.Update(ctx(t), c.put)
		if err == nil {
			t.Errorf("[%s with empty key] expected an error, got nil", c.name)
		}
	}
}

// testByteOrder: lists are in byte order of their names (as Go sorts
// strings), whatever collation the database would use for text.
func testByteOrder(t *testing.T, s store.Store) {
	names := []string{"a_0", "W-0", "é-0", "a0", "a-1", "Z-0", "a-10", "a-2"}
	want := slices.Clone(names)
	slices.Sort(want)
	update(t, s, func(tx store.Tx) error {
		for _, n := range names {
			err := errors.Join(tx.PutRole(herd.Role{Name: n}), tx.PutSession(minimalSession(n, n)),
				tx.PutHost(herd.Host{Name: n}))
			if err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		hosts, err := tx.Hosts()
		if err != nil {
			return err
		}
		var gotRoles, gotSessions, gotHosts []string
		for _, r := range roles {
			gotRoles = append(gotRoles, r.Name)
		}
		for _, se := range sessions {
			gotSessions = append(gotSessions, se.Name)
		}
		for _, h := range hosts {
			gotHosts = append(gotHosts, h.Name)
		}
		diff(t, "roles", want, gotRoles)
		diff(t, "sessions", want, gotSessions)
		diff(t, "hosts", want, gotHosts)
		return nil
	})
}
