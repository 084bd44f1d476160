package attention

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/store"
)

// TestAnnounceRetriesUntilDelivered: a role's budget is told on every
// channel; a channel that fails is tried again with the backoff, and each
// delivery is a notified event of the log.
func TestAnnounceRetriesUntilDelivered(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	fails := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		bodies = append(bodies, string(b))
	}))
	defer srv.Close()
	st := openStore(t)
	tr := newTracker(st, config.Notify{Webhook: srv.URL, Command: []string{"true"}})
	until := time.Date(2026, 5, 5, 0, 0, 0, 0, time.UTC)
	m := BudgetMessage("worker", "h", 5.5, 5, false, until, time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr.Announce(ctx, m)
	if ctx.Err() != nil {
		t.Fatal("expected Announce to return once delivered, it ran out of time")
	}
	mu.Lock()
	if len(bodies) != 1 {
		t.Fatalf("expected the webhook delivered once after one failure, got %v", bodies)
	}
	var ev herd.Event
	if err := json.Unmarshal([]byte(bodies[0]), &ev); err != nil || ev.Kind != herd.EventNotified || ev.Reason != "budget" || ev.Data["role"] != "worker" ||
		!strings.Contains(ev.Message, "$5.50 of its $5.00 budget") || !strings.Contains(ev.Message, "next idle moment") {
		t.Errorf("expected a notified budget event for worker, got %+v (%v)", ev, err)
	}
	mu.Unlock()
	var evs []herd.Event
	err := st.View(ctx, func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Kind: herd.EventNotified})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	channels := map[string]any{}
	for _, e := range evs {
		channels[e.Data["channel"].(string)] = e.Data["attempts"]
	}
	if len(evs) != 2 || channels["webhook"] != float64(2) || channels["command"] != float64(1) {
		t.Errorf("expected one notified event per channel (webhook on its second attempt), got %v", channels)
	}
	if hard := BudgetMessage("w", "h", 9, 5, true, until, time.Now()); !strings.Contains(hard.Body, "stopped now") {
		t.Errorf("[hard] expected the message to say the sessions stop now, got %q", hard.Body)
	}
}

// TestAnnounceWithoutChannels returns at once.
func TestAnnounceWithoutChannels(t *testing.T) {
	tr := newTracker(openStore(t), config.Notify{})
	done := make(chan struct{})
	go func() {
		tr.Announce(context.Background(), BudgetMessage("w", "h", 1, 1, false, time.Now(), time.Now()))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("expected Announce with no channel to return at once")
	}
}
