package attention

import (
	"slices"
	"time"

	"herd"
)

// What sets the two tracks apart is all here: their rules, conditions,
// thresholds, channels, and what a closed episode keeps.

// rulesOf returns the rules track tr watches.
func rulesOf(tr Track) []Rule {
	if tr == TrackNotify {
		return NotifyRules
	}
	return EscalationRules
}

// keepOwed reports whether track tr keeps a closed episode while its
// firing is owed: an escalation is delivered even after its condition
// clears; a notification is about a need that lasts, and goes with it.
func keepOwed(tr Track) bool { return tr == TrackEscalation }

// hinted reports whether track tr's conditions carry a start hint that a
// clear sighting bounds (the escalation waiting rule's LastActivityAt).
func hinted(tr Track) bool { return tr == TrackEscalation }

// tracks returns the tracks that can open episodes under set: the
// escalation track always (its escalated event is recorded with or
// without a channel), the notify track only while it has a channel
// (nobody to tell: no episode, no `!`).
func (s *settings) tracks() []Track {
	if len(s.channels[TrackNotify]) == 0 {
		return escalationOnly
	}
	return bothTracks
}

var (
	escalationOnly = []Track{TrackEscalation}
	bothTracks     = []Track{TrackEscalation, TrackNotify}
)

// settings are the configuration in force.
type settings struct {
	// waitingAfter, livenessTimeout and unknownAfter are the escalation
	// thresholds; after the notify debounce.
	waitingAfter, livenessTimeout, unknownAfter, after time.Duration
	// channels are each track's channels.
	channels map[Track][]Channel
}

// threshold is how long rule r of track tr must hold before it fires.
func (s *settings) threshold(tr Track, r Rule) time.Duration {
	if tr == TrackNotify {
		return s.after
	}
	switch r {
	case RuleWaiting:
		return s.waitingAfter
	case RuleStalled:
		return s.livenessTimeout
	case RuleUnknown:
		return s.unknownAfter
	}
	return 0
}

// channel returns track tr's channel named name, nil when none.
func (s *settings) channel(tr Track, name string) Channel {
	for _, ch := range s.channels[tr] {
		if ch.Name() == name {
			return ch
		}
	}
	return nil
}

// names returns the names of track tr's channels.
func (s *settings) names(tr Track) []string {
	var out []string
	for _, ch := range s.channels[tr] {
		out = append(out, ch.Name())
	}
	return out
}

// condition is what target tg sees of session s (live: s is a local
// session record) at this look under set.
func (t *Tracker) condition(set *settings, tg target, s herd.Session, live bool) Condition {
	if !live || !slices.Contains(set.tracks(), tg.track) {
		return Condition{}
	}
	if tg.track == TrackNotify {
		return ObserveNeed(s, tg.rule)
	}
	c := Observe(s, tg.rule)
	t.mu.Lock()
	c.NotBefore = t.clearSeen[clearKey{tg.session, tg.rule}]
	t.mu.Unlock()
	return c
}

// prune drops what a firing still owes a channel its track no longer has.
func prune(ep *Episode, set *settings, tr Track) {
	for name, d := range ep.Channels {
		if !d.Done && set.channel(tr, name) == nil {
			delete(ep.Channels, name)
		}
	}
}
