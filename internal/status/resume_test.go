package status

import (
	"context"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

// TestResumeFailed: a refused resume of the incarnation's id is one
// resumed/resume_failed event and the id taken off the incarnation (the
// relaunch starts fresh); a refusal of another id, or a second report,
// changes nothing.
func TestResumeFailed(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	const id = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	err := m.Store().Update(ctx, func(tx store.Tx) error {
		inc, err := tx.Incarnation("inc-1")
		if err != nil {
			return err
		}
		inc.AgentSessionID = id
		return tx.PutIncarnation(inc)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonExitCode}}); err != nil {
		t.Fatal(err)
	}
	changes, cancel := m.Subscribe()
	defer cancel()
	for _, c := range []struct {
		name, id string
		want     bool
	}{
		{"another id", "other", false},
		{"the incarnation's id", id, true},
		{"again", id, false},
	} {
		got, err := m.ResumeFailed(ctx, "w-0", "inc-1", c.id, `exit code 42, "Invalid session identifier"`)
		if err != nil || got != c.want {
			t.Errorf("[%s] expected recorded=%v, got %v, %v", c.name, c.want, got, err)
		}
	}
	evs := events(t, m, herd.EventResumed)
	if len(evs) != 1 || evs[0].Reason != herd.ReasonResumeFailed || evs[0].Data["agent_session_id"] != id || evs[0].Incarnation != "inc-1" {
		t.Fatalf("expected one resumed event with reason resume_failed for %s, got %+v", id, evs)
	}
	var inc herd.Incarnation
	m.Store().View(ctx, func(tx store.Tx) (err error) { inc, err = tx.Incarnation("inc-1"); return err })
	if inc.AgentSessionID != "" || inc.Exit == nil {
		t.Errorf("expected the id taken off the ended incarnation, its exit kept, got %q, %v", inc.AgentSessionID, inc.Exit)
	}
	select {
	case ch := <-changes:
		if !ch.What.Has(ChangeIncarnation) || ch.Incarnation != "inc-1" {
			t.Errorf("expected the change published as an incarnation change, got %+v", ch)
		}
	case <-time.After(10 * time.Second):
		t.Error("expected the change published")
	}
}
