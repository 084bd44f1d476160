package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"herd/internal/api"
	"herd/internal/guard"
	"herd/internal/hosts"
	"herd/internal/loop"
	"herd/internal/peer"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/targets"
	"herd/internal/verbs"
	"herd/internal/waitfor"
)

// injectFanOut bounds the injects of one broadcast carried out at once.
const injectFanOut = 8

// handleControl registers the verbs on many sessions: a broadcast inject
// and wait.
func (sv *Server) handleControl(mux *http.ServeMux) {
	sv.route(mux, "POST /v1/inject", access{"send", inHandler}, sv.handleInjectMany)
	sv.route(mux, "POST /v1/wait", access{"wait", inHandler}, sv.handleWait)
}

// handleInjectMany types text into every session the targets name, each
// through the one inject verb (forwarded there for another host's
// session), and reports each: delivered, or refused and why.
func (sv *Server) handleInjectMany(w http.ResponseWriter, r *http.Request) {
	var req api.InjectManyRequest
	if err := decodeBody(r, maxInjectBody, &req); err != nil {
		fail(w, badf("inject: bad request body: %v", err))
		return
	}
	if _, err := targets.Check(req.Targets); err != nil {
		fail(w, badf("inject: %v", err))
		return
	}
	if err := verbs.CheckText(req.Text, req.Multiline); err != nil {
		fail(w, err)
		return
	}
	views, err := sv.sessionViews(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	names, missing, err := targets.Resolve(views, req.Targets, nil)
	if err != nil {
		fail(w, badf("inject: %v", err))
		return
	}
	var refused []api.Delivery
	if p, c, confined := sv.caller(r); confined {
		allowed, no, why := permitViews(p, "send", views, names)
		if len(no) > 0 && len(allowed) == 0 {
			sv.refused(w, r, c, "send", no, why)
			return
		}
		if len(no) > 0 {
			sv.log().Warn("api: call from inside an agent refused", "caller", c.Who(), "route", r.Pattern, "targets", no, "why", why)
			call := api.MCPCall{Session: c.Session, Tool: "send", Targets: names, Refused: no, Why: why}
			if _, err := sv.recordCall(r.Context(), call, c, r.Pattern); err != nil {
				sv.log().Warn("api: refusal not recorded", "caller", c.Who(), "err", err)
			}
		}
		for _, n := range no {
			refused = append(refused, api.Delivery{Session: n, Error: "refused: " + why})
		}
		names = allowed
	}
	out := make([]api.Delivery, len(names))
	idx := make(map[string]int, len(names))
	for i, n := range names {
		idx[n] = i
	}
	var mu sync.Mutex
	loop.Each(injectFanOut, names, func(n string) {
		t0 := time.Now()
		res, err := sv.o.Verbs.Inject(r.Context(), verbs.InjectRequest{Name: n, Text: req.Text, Enter: req.Enter, NoClear: req.NoClear,
			Multiline: req.Multiline})
		d := api.Delivery{Session: n, Delivered: err == nil, Message: res.Message, TookMS: float64(time.Since(t0).Microseconds()) / 1000}
		if err != nil {
			d.Error = err.Error()
		}
		mu.Lock()
		out[idx[n]] = d
		mu.Unlock()
	})
	out = append(out, refused...)
	for _, n := range missing {
		out = append(out, api.Delivery{Session: n, Error: fmt.Sprintf("session %s not found", n)})
	}
	delivered := 0
	for _, d := range out {
		if d.Delivered {
			delivered++
		}
	}
	msg := fmt.Sprintf("%d bytes sent to %d of %d session(s) (%s)", len(req.Text), delivered, len(out), targets.Describe(req.Targets))
	reply(w, http.StatusOK, api.InjectManyResult{Message: msg, Deliveries: out})
}

// handleWait answers once the targets reached the goal or the timeout
// passed (a result either way); the caller going away ends it.
func (sv *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	var req api.WaitRequest
	if err := decodeBody(r, 1<<20, &req); err != nil {
		fail(w, badf("wait: bad request body: %v", err))
		return
	}
	goal, err := waitfor.ParseGoal(req.For)
	if err != nil {
		fail(w, badf("wait: %v", err))
		return
	}
	timeout := 30 * time.Second
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout < 0 || timeout > waitfor.MaxTimeout {
			fail(w, badf("wait: timeout %q: want a duration from 0s to %s", req.Timeout, waitfor.MaxTimeout))
			return
		}
	}
	if _, err := targets.Check(req.Targets); err != nil {
		fail(w, badf("wait: %v", err))
		return
	}
	if p, c, confined := sv.caller(r); confined && !sv.permitWait(w, r, p, c, req.Targets) {
		return
	}
	changes, cancel := sv.st.Subscribe()
	defer cancel()
	// This host's changes come from the writer; another host's from the
	// store's notification that it committed events (PostgreSQL), else at
	// the backstop.
	wake := &waitfor.Notified[status.Change]{C: changes, Hint: sv.events.wait, Backstop: waitBackstop}
	res, err := waitfor.Wait(r.Context(), waitfor.SourceFunc(sv.waitViews), wake, req.Targets, goal, timeout)
	switch {
	case errors.Is(err, waitfor.ErrMissing):
		reply(w, http.StatusNotFound, api.Error{Error: "wait: " + err.Error()})
	case err != nil && r.Context().Err() != nil:
		return // the caller is gone
	case err != nil:
		fail(w, err)
	default:
		reply(w, http.StatusOK, res)
	}
}

// waitViews is what a wait looks at, read at every look: this host's
// sessions from the live set (memory), every other host's from the store
// in one query, each as the fleet sees it (a stale host's live sessions
// unknown). None of get sessions' markers: a wait judges state and
// activity only.
func (sv *Server) waitViews(ctx context.Context) ([]api.SessionView, error) {
	var (
		f      hosts.Fleet
		others []store.SessionPID
	)
	err := sv.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if f, err = sv.fleet(tx); err != nil {
			return err
		}
		others, err = tx.SessionsWithPIDsNotOnHost(sv.st.Host())
		return err
	})
	if err != nil {
		return nil, err
	}
	local, _, err := sv.st.Live(ctx)
	if err != nil {
		return nil, err
	}
	moved := make(map[string]bool, len(others))
	for _, o := range others {
		moved[o.Session.Name] = true
	}
	views := make([]api.SessionView, 0, len(local)+len(others))
	for _, s := range local {
		if !moved[s.Name] { // moved to another host since the set was read: the store's row
			views = append(views, baseView(s))
		}
	}
	for _, o := range others {
		s, _ := f.Mask(o.Session)
		views = append(views, baseView(s))
	}
	return views, nil
}

// waitBackstop is how often a wait looks without a change of this host's
// sessions or a store notification: the writer's subscription wakes it at
// once for this host's, the notification of committed events for other
// hosts' (their activity and state changes write events); without
// notifications (a lost listening connection) other hosts' rows are read
// again this often.
const waitBackstop = 250 * time.Millisecond

// permitWait decides a confined caller's wait on every session its
// targets name, and on their role.
func (sv *Server) permitWait(w http.ResponseWriter, r *http.Request, p guard.Policy, c peer.Caller, t api.Targets) bool {
	if t.Role != "" && !sv.permit(w, r, p, c, "wait", guard.Target{Role: t.Role}) {
		return false
	}
	views, err := sv.waitViews(r.Context())
	if err != nil {
		fail(w, err)
		return false
	}
	names, _, err := targets.Resolve(views, t, nil)
	if err != nil {
		fail(w, badf("wait: %v", err))
		return false
	}
	if _, no, why := permitViews(p, "wait", views, names); len(no) > 0 {
		sv.refused(w, r, c, "wait", no, why)
		return false
	}
	return true
}
