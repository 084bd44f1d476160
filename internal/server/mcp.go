package server

import (
	"fmt"
	"net/http"
	"strings"

	"herd"
	"herd/internal/api"
	"herd/internal/store"
)

// handleMCP registers what herd's MCP servers ask of the daemon besides
// the verbs: the [mcp] table, and the record of each call.
func (sv *Server) handleMCP(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/mcp", sv.handleMCPPolicy)
	mux.HandleFunc("POST /v1/mcp/calls", sv.handleMCPCall)
}

func (sv *Server) handleMCPPolicy(w http.ResponseWriter, r *http.Request) {
	p := api.MCPPolicy{Roles: []string{}, Verbs: []string{}}
	c := sv.o.Config
	if sv.o.Live != nil {
		c = sv.o.Live.Load()
	}
	if c != nil {
		p.Roles = append(p.Roles, c.MCP.Roles...)
		p.Verbs = append(p.Verbs, c.MCP.Verbs...)
	}
	reply(w, http.StatusOK, p)
}

// ReasonMCPRefused is the reason of an mcp_call event the guard rails
// refused.
const ReasonMCPRefused = "mcp_refused"

// handleMCPCall records one tool call as an mcp_call event of the calling
// session.
func (sv *Server) handleMCPCall(w http.ResponseWriter, r *http.Request) {
	var c api.MCPCall
	if err := decodeBody(r, 1<<20, &c); err != nil {
		fail(w, badf("mcp call: bad request body: %v", err))
		return
	}
	if c.Tool == "" {
		fail(w, badf("mcp call: no tool named"))
		return
	}
	caller := c.Session
	if caller == "" {
		caller = "a client outside herd's agents"
	}
	reason, msg := "mcp", fmt.Sprintf("%s called %s", caller, c.Tool)
	if len(c.Targets) > 0 {
		msg += " on " + strings.Join(clipNames(c.Targets), ", ")
	}
	switch {
	case len(c.Refused) > 0:
		reason = ReasonMCPRefused
		msg += ": refused: " + c.Why
	case c.Error != "":
		msg += ": failed: " + c.Error
	}
	data := map[string]any{"tool": c.Tool, "targets": c.Targets}
	if len(c.Refused) > 0 {
		data["refused"] = c.Refused
	}
	if c.Error != "" {
		data["error"] = c.Error
	}
	ev := &herd.Event{Session: c.Session, Kind: herd.EventMCPCall, Reason: reason, Message: msg, Data: data}
	s := herd.Session{Name: c.Session}
	if c.Session != "" {
		if row, err := sv.o.Status.Session(r.Context(), c.Session); err == nil {
			s = row
		}
	}
	ev = sv.st.Event(s, s.Incarnation, ev.Kind, ev.Reason, ev.Message, ev.Data)
	err := sv.st.Store().Update(r.Context(), func(tx store.Tx) error { return tx.AppendEvent(ev) })
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: msg})
}

// clipNames keeps an event's message short: the first names, then a count.
func clipNames(names []string) []string {
	const keep = 8
	if len(names) <= keep {
		return names
	}
	return append(append([]string(nil), names[:keep]...), fmt.Sprintf("and %d more", len(names)-keep))
}
