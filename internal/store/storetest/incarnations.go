package storetest

// Incarnations: round trip, and the open ones per host.

import (
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

func openIncarnation(id, session, host string, started time.Time) herd.Incarnation {
	return herd.Incarnation{
		ID:          id,
		Session:     session,
		Host:        host,
		RuntimeKind: herd.RuntimeExec,
		Argv:        []string{"sh", "-c", "exec claude"},
		Workdir:     "/src/app",
		Template:    "command=0a1b2c3d4e5f workdir=1a2b3c4d5e6f env=2a3b4c5d6e7f",
		Identity: herd.Identity{
			BootID:    "0f4e6c3a-5a1b-4c2d-9e8f-7a6b5c4d3e2f",
			PID:       424242,
			StartTime: 1 << 40,
			Marker:    id,
		},
		Root: herd.Identity{
			BootID:    "0f4e6c3a-5a1b-4c2d-9e8f-7a6b5c4d3e2f",
			PID:       424240,
			StartTime: 1<<40 - 7,
			Marker:    id,
		},
		StartedAt:      started,
		AgentSessionID: "agent-" + id,
	}
}

func incarnationUTC(t *testing.T, inc herd.Incarnation) {
	t.Helper()
	var exitAt *time.Time
	if inc.Exit != nil {
		exitAt = &inc.Exit.At
	}
	checkUTC(t, "incarnation "+inc.ID, &inc.StartedAt, inc.EndedAt, exitAt)
}

func testIncarnationRoundTrip(t *testing.T, s store.Store) {
	running := openIncarnation("running", "w-0", "h", at(0))
	exited := openIncarnation("exited", "w-0", "h", at(1))
	exited.EndedAt = ptr(at(9))
	exited.Exit = &herd.Exit{Code: ptr(0), Reason: herd.ReasonExitCode, At: at(9)}
	killed := openIncarnation("killed", "w-1", "h", at(2))
	killed.EndedAt = ptr(at(8))
	killed.Exit = &herd.Exit{Signal: ptr(15), Reason: herd.ReasonStallKilled, At: at(7)}
	vanished := openIncarnation("vanished", "w-2", "h", at(3))
	vanished.EndedAt = ptr(at(4))
	bare := herd.Incarnation{ID: "bare"}
	cases := []herd.Incarnation{running, exited, killed, vanished, bare}

	update(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			if err := tx.PutIncarnation(c); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		for _, want := range cases {
			got, err := tx.Incarnation(want.ID)
			if err != nil {
				return err
			}
			diff(t, "incarnation "+want.ID, want, got)
			incarnationUTC(t, got)
		}
		return nil
	})

	// Ending an open incarnation replaces the row.
	running.EndedAt = ptr(at(20))
	running.Exit = &herd.Exit{Reason: herd.ReasonProcessGone, At: at(20)}
	update(t, s, func(tx store.Tx) error { return tx.PutIncarnation(running) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Incarnation("running")
		if err != nil {
			return err
		}
		diff(t, "ended incarnation", running, got)
		if got.Exit == nil || got.Exit.Code != nil || got.Exit.Signal != nil {
			t.Errorf("[exit without code or signal] expected both nil, got %+v", got.Exit)
		}
		return nil
	})
}

func testOpenIncarnations(t *testing.T, s store.Store) {
	late := openIncarnation("late", "w-0", "host-a", at(30))
	early := openIncarnation("early", "w-1", "host-b", at(10))
	ended := openIncarnation("ended", "w-2", "host-a", at(20))
	ended.EndedAt = ptr(at(25))
	endedNoExit := openIncarnation("ended-no-exit", "w-3", "host-a", at(5))
	endedNoExit.EndedAt = ptr(at(6))
	endedNoExit.Exit = nil
	update(t, s, func(tx store.Tx) error {
		for _, inc := range []herd.Incarnation{late, ended, early, endedNoExit} {
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.OpenIncarnations()
		if err != nil {
			return err
		}
		diff(t, "open incarnations", []herd.Incarnation{early, late}, got)
		for _, inc := range got {
			incarnationUTC(t, inc)
		}
		return nil
	})
}
