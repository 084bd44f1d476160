package liveness

import (
	"math"

	"herd"
)

// The mass-death breaker: when one observation (one listing of the runtime)
// would account most sessions dead at once, the likelier story is a broken
// observer — a wedged or restarted tmux server, a runtime answering
// garbage — not that most agents died in the same second. Such an
// observation is inconclusive: those sessions are unknown and observed
// again, and the deaths are accounted only when a later observation agrees
// with itself. A death proven apart from the listing (the agent's own pidfd
// fired, or its exit status was reaped) is accounted whatever the breaker
// says.
const (
	// MinMassDeathSessions is how many sessions an observation must cover
	// for the breaker to trip: with fewer, one death is a large fraction.
	MinMassDeathSessions = 5
	// DefaultMassDeathFraction is probe.mass_death_fraction's default.
	DefaultMassDeathFraction = 0.5
	// ReasonMassDeath is the reason of the probe_unknown event written
	// when the breaker trips.
	ReasonMassDeath = "mass_death"
)

// MassDeath reports whether an observation of observed sessions that would
// account unproven of them dead (deaths proven by pidfd or exit status not
// counted) is inconclusive: observed is at least MinMassDeathSessions and
// unproven is more than fraction of it. A fraction outside (0, 1] is
// DefaultMassDeathFraction.
func MassDeath(observed, unproven int, fraction float64) bool {
	if !(fraction > 0 && fraction <= 1) { // also NaN
		fraction = DefaultMassDeathFraction
	}
	if observed < MinMassDeathSessions || unproven <= 0 {
		return false
	}
	return float64(unproven) > fraction*float64(observed) &&
		// Exactly at the bound is not more than it, whatever the rounding.
		!(math.Abs(float64(unproven)-fraction*float64(observed)) < 1e-9)
}

// Observed is one session's verdict from one observation, and whether its
// death is proven apart from that observation (its pidfd fired, or its exit
// status was reaped).
type Observed struct {
	Verdict Verdict
	Proven  bool
}

// BreakMassDeath applies the breaker to one observation of every session
// in obs. When it trips, each Crash verdict not proven becomes unknown
// with Reprobe (the runtime axis unknown too), and it returns how many it
// held back; the caller then writes one probe_unknown event with reason
// ReasonMassDeath and observes again. Proven deaths keep their Crash.
func BreakMassDeath(obs []Observed, fraction float64) int {
	unproven := 0
	for _, o := range obs {
		if o.Verdict.Action == Crash && !o.Proven {
			unproven++
		}
	}
	if !MassDeath(len(obs), unproven, fraction) {
		return 0
	}
	for i := range obs {
		if obs[i].Verdict.Action == Crash && !obs[i].Proven {
			obs[i].Verdict = Verdict{State: herd.StateUnknown, Runtime: herd.Unknown,
				Process: obs[i].Verdict.Process, Action: Reprobe}
		}
	}
	return unproven
}
