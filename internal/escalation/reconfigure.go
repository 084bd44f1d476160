package escalation

import (
	"sync/atomic"

	"herd/internal/config"
)

// reconfigured is what a reload changed: new thresholds and notifier.
type reconfigured struct {
	thresholds Thresholds
	notifier   *Notifier
}

// override holds the reload's settings; nil until the first reload.
type override struct{ p atomic.Pointer[reconfigured] }

// Reconfigure applies a reloaded [escalation] (and [watchdog]
// liveness_timeout) from the next evaluation on: thresholds, command and
// webhook. Episodes already open keep their state; a delivery under way
// finishes with the notifier it began with.
func (e *Escalator) Reconfigure(cfg *config.Config) {
	n := *e.notifier() // keep the timeouts and client
	n.Command, n.Webhook = cfg.Escalation.Command, cfg.Escalation.Webhook
	e.live.p.Store(&reconfigured{thresholds: ThresholdsOf(cfg), notifier: &n})
}

// th returns the thresholds in force.
func (e *Escalator) th() Thresholds {
	if r := e.live.p.Load(); r != nil {
		return r.thresholds
	}
	return e.thresholds
}

// notifier returns the notifier in force.
func (e *Escalator) notifier() *Notifier {
	if r := e.live.p.Load(); r != nil {
		return r.notifier
	}
	return e.Notifier
}
