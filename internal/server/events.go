package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"herd"
	"herd/internal/frontdoor"
	"herd/internal/store"
)

// handleEvents answers the event log, filtered, long-polling with wait
// (a wake-up from the store shortens the wait).
func (sv *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.EventFilter{Session: q.Get("session"), Kind: q.Get("kind"), Host: q.Get("host"), Task: q.Get("task")}
	if f.Session != "" && !sv.permitRead(w, r, "describe_session", f.Session) {
		return
	}
	if f.Task != "" {
		if herd.TaskSeq(f.Task) == 0 {
			fail(w, badf("events: task %q is not a task id (t-<n>)", f.Task))
			return
		}
		ts := sv.tasks(w)
		if ts == nil || !sv.permitTask(w, r, ts, f.Task, "describe_task") {
			return
		}
	}
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
	if wait > 0 {
		frontdoor.Extend(w, time.Until(deadline)+apiLimits.Write)
	}
	for {
		n, err := sv.streamEvents(r.Context(), w, f)
		if err != nil {
			if n == 0 {
				fail(w, err)
			}
			// Else part of the array is sent: the reply ends cut short,
			// which the client reads as an error.
			return
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			reply(w, http.StatusOK, []herd.Event{})
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

// eventsPage is how many events one read of the store takes while an
// answer is streamed.
const eventsPage = 512

// streamEvents writes the events f selects to w as one JSON array, read
// from the store a page at a time, each page in a short read of its own:
// neither the rows nor the reply are ever held whole in memory, and no
// transaction stays open while a slow client reads. With f.Limit, the
// newest Limit events are sent (oldest first). Nothing is written when
// none match; n is how many were sent.
func (sv *Server) streamEvents(ctx context.Context, w http.ResponseWriter, f store.EventFilter) (n int, err error) {
	cursor := f.AfterID
	if f.Limit > 0 {
		err := sv.st.Store().View(ctx, func(tx store.Tx) (err error) {
			cursor, err = tx.NewestEventsAfter(f, f.Limit)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		page := eventsPage
		if f.Limit > 0 {
			page = min(page, f.Limit-n)
		}
		pf := f
		pf.Limit, pf.Page, pf.AfterID = 0, page, cursor
		var events []herd.Event
		err := sv.st.Store().View(ctx, func(tx store.Tx) (err error) {
			events, err = tx.Events(pf)
			return err
		})
		if err != nil {
			return n, errors.Join(err, bw.Flush())
		}
		for _, e := range events {
			b, err := json.Marshal(e)
			if err != nil {
				return n, errors.Join(fmt.Errorf("events: event %d: %w", e.ID, err), bw.Flush())
			}
			if n == 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				bw.WriteByte('[')
			} else {
				bw.WriteByte(',')
			}
			bw.Write(b)
			n++
			cursor = e.ID
		}
		if len(events) < page || (f.Limit > 0 && n >= f.Limit) {
			break
		}
	}
	if n == 0 {
		return 0, nil
	}
	bw.WriteString("]\n")
	return n, bw.Flush()
}
