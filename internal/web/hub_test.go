package web

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/status"
)

// TestHubLocalChange: a change from the writer's subscription is read at
// once, not at the next poll.
func TestHubLocalChange(t *testing.T) {
	synctest.Test(t, testHubLocalChange)
}

func testHubLocalChange(t *testing.T) {
	back := &fakeBackend{sessions: []api.SessionView{{Name: "w-0", State: herd.StateRunning}}}
	h := newHub(back, time.Hour, slog.New(slog.DiscardHandler))
	local := make(chan status.Change, 1)
	h.local = func() (<-chan status.Change, func()) { return local, func() {} }
	sub, cancel := h.Subscribe()
	defer cancel()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx)
	}()
	defer func() { stop(); <-done }()

	// The first poll (at start) takes the baseline, and says so (the
	// browser reads again); the change after it is published on the
	// local change, an hour before the ticker.
	synctest.Wait()
	if c := <-sub; !c.Sessions {
		t.Fatalf("[baseline] expected a sessions change … got %+v", c)
	}
	back.mu.Lock()
	back.sessions[0].State = herd.StateStopped
	back.mu.Unlock()
	local <- status.Change{Session: "w-0", What: status.ChangeState}
	select {
	case c := <-sub:
		if !c.Sessions {
			t.Errorf("[local change] expected a sessions change … got %+v", c)
		}
	case <-time.After(time.Second):
		t.Fatal("[local change] expected the change published at once … nothing in a second")
	}
}
