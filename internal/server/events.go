package server

import (
	"herd"
	"herd/internal/store"
	"net/http"
	"strconv"
	"time"
)

// handleEvents answers the event log, filtered, long-polling with wait
// (a wake-up from the store shortens the wait).
func (sv *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.EventFilter{Session: q.Get("session"), Kind: q.Get("kind"), Host: q.Get("host")}
	if v := q.Get("since"); v != "" {
		dur, err := time.ParseDuration(v)
		if err != nil {
			fail(w, badf("events: --since: %v", err))
			return
		}
		f.Since = time.Now().Add(-dur)
	}
	if v := q.Get("after"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			fail(w, badf("events: after: %q is not an event id", v))
			return
		}
		f.AfterID = id
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fail(w, badf("events: limit: %q is not a count >= 0", v))
			return
		}
		f.Limit = n
	}
	// wait long-polls: with no new event, the reply waits up to this long.
	wait, _ := time.ParseDuration(q.Get("wait"))
	deadline := time.Now().Add(min(wait, time.Minute))
	for {
		var events []herd.Event
		err := sv.st.Store().View(r.Context(), func(tx store.Tx) (err error) {
			events, err = tx.Events(f)
			return err
		})
		if err != nil {
			fail(w, err)
			return
		}
		if len(events) > 0 || time.Now().After(deadline) {
			if events == nil {
				events = []herd.Event{}
			}
			reply(w, http.StatusOK, events)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-sv.events.wait():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
