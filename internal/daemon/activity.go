package daemon

import (
	"net/http"

	"herd/internal/api"
)

// handleActivity records an agent hook event sent by `herd hook`.
func (d *Daemon) handleActivity(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusNotImplemented, api.Error{Error: "activity ingest is not available yet"})
}
