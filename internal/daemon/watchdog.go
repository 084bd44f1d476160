package daemon

import (
	"context"

	"herd/internal/api"
)

// watchdogLoop watches activity and stalls (issue: activity ingest and stall watchdog).
func (d *Daemon) watchdogLoop(ctx context.Context) { <-ctx.Done() }

// describeActivity adds diagnostics and activity details to a detail view.
func (d *Daemon) describeActivity(det *api.SessionDetail) {}

// summaryData returns what the watchdog knows about an ending incarnation,
// for its summary event; nil when nothing is known.
func (d *Daemon) summaryData(inc string) map[string]any { return nil }
