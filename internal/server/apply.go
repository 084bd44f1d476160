package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"herd/internal/api"
	"herd/internal/slots"
)

// handleApply upserts roles; every role is validated before any is
// written. The body is a bare array of roles (herd run) or an
// api.ApplyRequest (herd apply: inherited restart keys, dry run). The
// reply says what changed per role.
func (sv *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		fail(w, badf("apply: read body: %v", err))
		return
	}
	var req api.ApplyRequest
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &req.Roles)
	} else {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		fail(w, badf("apply: bad request body: %v", err))
		return
	}
	changes, err := sv.o.Slots.Apply(r.Context(), req.Roles, slots.ApplyOptions{Inherit: req.Inherit, DryRun: req.DryRun})
	if err != nil {
		fail(w, err)
		return
	}
	res := api.ApplyResult{Changes: make([]api.RoleChange, len(changes))}
	n := 0
	for i, c := range changes {
		res.Changes[i] = api.RoleChange(c)
		if c.Action != slots.RoleUnchanged {
			n++
		}
	}
	res.Message = fmt.Sprintf("%d role(s) applied, %d changed", len(changes), n)
	if req.DryRun {
		res.Message = fmt.Sprintf("%d role(s) would change (dry run: nothing applied)", n)
	}
	reply(w, http.StatusOK, res)
}
