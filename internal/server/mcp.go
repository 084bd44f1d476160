package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/peer"
	"herd/internal/store"
)

// handleMCP registers what herd's MCP servers ask of the daemon besides
// the verbs: the [mcp] table, and the record of each call.
func (sv *Server) handleMCP(mux *http.ServeMux) {
	sv.route(mux, "GET /v1/mcp", open, sv.handleMCPPolicy)
	sv.route(mux, "POST /v1/mcp/calls", access{"", inHandler}, sv.handleMCPCall)
}

func (sv *Server) handleMCPPolicy(w http.ResponseWriter, r *http.Request) {
	p := api.MCPPolicy{Roles: []string{}, Verbs: []string{}}
	if c := sv.config(); c != nil {
		p.Roles = append(p.Roles, c.MCP.Roles...)
		p.Verbs = append(p.Verbs, c.MCP.Verbs...)
	}
	reply(w, http.StatusOK, p)
}

// config is the daemon's config as last reloaded.
func (sv *Server) config() *config.Config {
	if sv.o.Live != nil {
		return sv.o.Live.Load()
	}
	return sv.o.Config
}

// ReasonMCPRefused is the reason of an mcp_call event the guard rails
// refused.
const ReasonMCPRefused = "mcp_refused"

// handleMCPCall records one tool call as an mcp_call event of the calling
// session. A call from inside an agent's tree is recorded as that agent's,
// whatever session the body names: the daemon knows who calls.
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
	var who peer.Caller
	if _, pc, confined := sv.caller(r); confined {
		who, c.Session = pc, pc.Session
	}
	msg, err := sv.recordCall(r.Context(), c, who, "")
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: msg})
}

// recordCall appends c as an mcp_call event of its session (reason
// mcp_refused when it was refused) and returns its message. who is the
// caller as the socket told it (zero: not told), route the socket's route
// that refused it ("": herd mcp's own record).
func (sv *Server) recordCall(ctx context.Context, c api.MCPCall, who peer.Caller, route string) (string, error) {
	caller := c.Session
	switch {
	case caller == "" && who.Unplaced != "":
		caller = "an agent herd cannot place (" + who.Unplaced + ")"
	case caller == "":
		caller = "a client outside herd's agents"
	}
	reason, msg := "mcp", fmt.Sprintf("%s called %s", caller, c.Tool)
	if len(c.Targets) > 0 {
		msg += " on " + strings.Join(clipNames(c.Targets), ", ")
	}
	refused := len(c.Refused) > 0 || (route != "" && c.Why != "")
	switch {
	case refused:
		reason = ReasonMCPRefused
		msg += ": refused: " + c.Why
	case c.Error != "":
		msg += ": failed: " + c.Error
	}
	// The actor (data.by) is the calling session, else the MCP client.
	by := c.Session
	if by == "" {
		by = "mcp"
	}
	data := map[string]any{"tool": c.Tool, "targets": c.Targets, "by": by}
	if len(c.Refused) > 0 {
		data["refused"] = c.Refused
	}
	if c.Error != "" {
		data["error"] = c.Error
	}
	if route != "" {
		data["route"], data["why"] = route, c.Why
	}
	if who.PID > 0 {
		data["pid"] = who.PID
	}
	s := herd.Session{Name: c.Session}
	if c.Session != "" {
		if row, err := sv.o.Status.Session(ctx, c.Session); err == nil {
			s = row
		}
	}
	ev := sv.st.Event(s, s.Incarnation, herd.EventMCPCall, reason, msg, data)
	return msg, sv.st.Store().Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(ev) })
}

// clipNames keeps an event's message short: the first names, then a count.
func clipNames(names []string) []string {
	const keep = 8
	if len(names) <= keep {
		return names
	}
	return append(append([]string(nil), names[:keep]...), fmt.Sprintf("and %d more", len(names)-keep))
}
