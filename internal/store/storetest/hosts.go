package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

// fullHost is a host with every field set.
func fullHost(name string) herd.Host {
	return herd.Host{
		Name:        name,
		BootID:      "0f4e6c3a-5a1b-4c2d-9e8f-7a6b5c4d3e2f",
		Version:     "v1.2.3",
		StartedAt:   at(-600),
		HeartbeatAt: at(0),
	}
}

func testHostRoundTrip(t *testing.T, s store.Store) {
	cases := []struct {
		name string
		h    herd.Host
	}{
		{"full", fullHost("build-box")},
		{"zero times", herd.Host{Name: "fresh"}},
		{"odd name", herd.Host{Name: "ws.example.org:2 ünï", BootID: "b", HeartbeatAt: at(3)}},
	}
	update(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			if err := tx.PutHost(c.h); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			got, err := tx.Host(c.h.Name)
			if err != nil {
				t.Errorf("[%s] unexpected error %v", c.name, err)
				continue
			}
			diff(t, c.name, c.h, got)
			checkUTC(t, c.name, &got.StartedAt, &got.HeartbeatAt)
		}
		return nil
	})
}

func testHostsOrderedAndReplaced(t *testing.T, s store.Store) {
	a, b, c := fullHost("a"), fullHost("b"), fullHost("c")
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutHost(c), tx.PutHost(a), tx.PutHost(b))
	})
	// A heartbeat and a restart (new boot, new version) replace the row.
	b.HeartbeatAt = at(30)
	c.BootID, c.Version, c.StartedAt, c.HeartbeatAt = "boot-2", "v1.2.4", at(40), at(41)
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutHost(b), tx.PutHost(c), tx.DeleteHost("a"), tx.DeleteHost("never-existed"))
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Hosts()
		if err != nil {
			return err
		}
		diff(t, "hosts", []herd.Host{b, c}, got)
		if _, err := tx.Host("a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[deleted host] expected ErrNotFound, got %v", err)
		}
		return nil
	})
}

func testSessionsOnHost(t *testing.T, s store.Store) {
	mk := func(name, host string) herd.Session {
		se := minimalSession(name, "w")
		se.Host = host
		return se
	}
	sessions := []herd.Session{mk("w-2", "a"), mk("w-0", "b"), mk("w-1", "a"), mk("w-3", "")}
	update(t, s, func(tx store.Tx) error {
		for _, se := range sessions {
			if err := tx.PutSession(se); err != nil {
				return err
			}
		}
		return nil
	})
	cases := []struct {
		host string
		want []herd.Session
	}{
		{"a", []herd.Session{sessions[2], sessions[0]}},
		{"b", []herd.Session{sessions[1]}},
		{"c", nil},
	}
	view(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			got, err := tx.SessionsOnHost(c.host)
			if err != nil {
				t.Errorf("[host %s] unexpected error %v", c.host, err)
				continue
			}
			diff(t, "sessions on "+c.host, c.want, got)
		}
		return nil
	})
}

func testOpenIncarnationsOnHost(t *testing.T, s store.Store) {
	late := openIncarnation("late", "w-0", "host-a", at(30))
	early := openIncarnation("early", "w-1", "host-a", at(10))
	other := openIncarnation("other", "w-2", "host-b", at(5))
	ended := openIncarnation("ended", "w-3", "host-a", at(20))
	ended.EndedAt = ptr(at(25))
	update(t, s, func(tx store.Tx) error {
		for _, inc := range []herd.Incarnation{late, other, ended, early} {
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
		}
		return nil
	})
	cases := []struct {
		host string
		want []herd.Incarnation
	}{
		{"host-a", []herd.Incarnation{early, late}},
		{"host-b", []herd.Incarnation{other}},
		{"host-c", nil},
	}
	view(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			got, err := tx.OpenIncarnationsOnHost(c.host)
			if err != nil {
				t.Errorf("[%s] unexpected error %v", c.host, err)
				continue
			}
			diff(t, "open incarnations on "+c.host, c.want, got)
		}
		return nil
	})
}

func testSessionsWithPIDs(t *testing.T, s store.Store) {
	open := openIncarnation("open", "w-0", "a", at(10))
	rootOnly := openIncarnation("root", "w-1", "a", at(11))
	rootOnly.Identity = herd.Identity{}
	ended := openIncarnation("ended", "w-2", "a", at(12))
	ended.EndedAt = ptr(at(13))
	mk := func(name, inc string) herd.Session {
		se := minimalSession(name, "w")
		se.Incarnation = inc
		return se
	}
	sessions := []herd.Session{mk("w-2", "ended"), mk("w-0", "open"), mk("w-3", ""), mk("w-1", "root")}
	update(t, s, func(tx store.Tx) error {
		for _, inc := range []herd.Incarnation{open, rootOnly, ended} {
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
		}
		for _, se := range sessions {
			if err := tx.PutSession(se); err != nil {
				return err
			}
		}
		return nil
	})
	want := []store.SessionPID{
		{Session: sessions[1], PID: open.Identity.PID},
		{Session: sessions[3], PID: rootOnly.Root.PID},
		{Session: sessions[0]},
		{Session: sessions[2]},
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.SessionsWithPIDs()
		if err != nil {
			t.Errorf("unexpected error %v", err)
			return nil
		}
		diff(t, "sessions with pids", want, got)
		return nil
	})

	// Another host's rows, without their snapshots (the rows above
	// are of host "").
	other := mk("v-0", "elsewhere")
	other.Host, other.Snapshot = "b", &herd.Snapshot{Argv: []string{"agent"}, Agent: "claude"}
	otherInc := openIncarnation("elsewhere", "v-0", "b", at(14))
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutIncarnation(otherInc); err != nil {
			return err
		}
		return tx.PutSession(other)
	})
	bare := other
	bare.Snapshot = nil
	view(t, s, func(tx store.Tx) error {
		for _, c := range []struct {
			host string
			want []store.SessionPID
		}{
			{"", []store.SessionPID{{Session: bare, PID: otherInc.Identity.PID}}},
			{"b", []store.SessionPID{want[0], want[1], want[2], want[3]}},
			{"a", []store.SessionPID{{Session: bare, PID: otherInc.Identity.PID}, want[0], want[1], want[2], want[3]}},
		} {
			got, err := tx.SessionsWithPIDsNotOnHost(c.host)
			if err != nil {
				t.Errorf("[not on %s] unexpected error %v", c.host, err)
				continue
			}
			diff(t, "sessions with pids not on "+c.host, c.want, got)
		}
		for host, want := range map[string][]string{"": {"w-0", "w-1", "w-2", "w-3"}, "b": {"v-0"}, "c": nil} {
			got, err := tx.SessionNamesOnHost(host)
			if err != nil {
				t.Errorf("[names on %s] unexpected error %v", host, err)
				continue
			}
			slices.Sort(got)
			diff(t, "session names on "+host, want, got)
		}
		return nil
	})
}

// testLease: a lease is set by SetLease alone (a heartbeat's PutHost
// keeps it), read with the host, and refused for a host not recorded;
// Now is a clock near this one (the database's, on PostgreSQL).
func testLease(t *testing.T, s store.Store) {
	h := fullHost("leased")
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutHost(h); err != nil {
			return err
		}
		return tx.SetLease(h.Name, at(20))
	})
	// A heartbeat rewrites the row: the lease stays.
	h.HeartbeatAt = at(5)
	update(t, s, func(tx store.Tx) error { return tx.PutHost(h) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Host(h.Name)
		if err != nil {
			return err
		}
		want := h
		want.LeaseUntil = at(20)
		diff(t, "lease kept by a heartbeat", want, got)
		checkUTC(t, "lease", &got.LeaseUntil)
		all, err := tx.Hosts()
		if err != nil {
			return err
		}
		if len(all) != 1 || !all[0].LeaseUntil.Equal(at(20)) {
			t.Errorf("[hosts] expected the lease in the listing, got %+v", all)
		}
		return nil
	})
	err := s.Update(ctx(t), func(tx store.Tx) error { return tx.SetLease("nosuch", at(1)) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("[lease of a host not recorded] expected ErrNotFound, got %v", err)
	}
	before := time.Now()
	var now time.Time
	view(t, s, func(tx store.Tx) error {
		var err error
		now, err = tx.Now()
		return err
	})
	// The database runs on this machine in the tests: its clock is this
	// one's, give or take a transaction.
	if d := now.Sub(before); d < -time.Second || d > 5*time.Second {
		t.Errorf("[now] expected the database's clock near %v, got %v", before, now)
	}
	if now.Location() != time.UTC {
		t.Errorf("[now] expected UTC, got %v", now.Location())
	}
}
