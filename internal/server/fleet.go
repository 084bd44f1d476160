package server

import (
	"net/http"
	"sync"
	"time"

	"herd/internal/api"
	"herd/internal/hosts"
	"herd/internal/placement"
	"herd/internal/store"
)

// fleet reads the hosts in tx, to judge their sessions.
func (sv *Server) fleet(tx store.Tx) (hosts.Fleet, error) {
	hs, err := tx.Hosts()
	if err != nil {
		return hosts.Fleet{}, err
	}
	return hosts.NewFleet(sv.st.Host(), sv.o.Config.Fleet.HostTimeout, time.Now(), hs), nil
}

// wakeup is a broadcast: every waiter's channel closes at the next wake.
type wakeup struct {
	mu sync.Mutex    // guards ch
	ch chan struct{} // closed and replaced by wake
}

// wait returns a channel closed at the next wake.
func (w *wakeup) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// wake releases every current waiter.
func (w *wakeup) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// WakeEvents tells the event log's long polls and the waits that events
// were committed (a store notification): they read at once rather than at
// their next poll. A hint only: they catch up by event id, and look again
// at their backstop, either way.
func (sv *Server) WakeEvents() { sv.events.wake() }

// handleHosts lists the fleet's daemons: `herd get hosts`.
func (sv *Server) handleHosts(w http.ResponseWriter, r *http.Request) {
	var rows []hosts.Row
	var leader string
	err := sv.st.Store().View(r.Context(), func(tx store.Tx) error {
		f, err := sv.fleet(tx)
		if err != nil {
			return err
		}
		if leader, _, err = tx.KV(placement.KVLeader); err != nil {
			return err
		}
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		rows = f.Rows(sessions)
		return nil
	})
	if err != nil {
		fail(w, err)
		return
	}
	out := make([]api.HostView, 0, len(rows))
	for _, row := range rows {
		h := row.Host
		v := api.HostView{Name: h.Name, Daemon: row.Daemon, Sessions: row.Sessions, BootID: h.BootID,
			Version: h.Version, Self: h.Name == sv.st.Host(), Leader: h.Name == leader && row.Daemon == hosts.Up}
		if row.Recorded {
			v.HeartbeatAt, v.StartedAt = &h.HeartbeatAt, &h.StartedAt
		}
		out = append(out, v)
	}
	reply(w, http.StatusOK, out)
}
