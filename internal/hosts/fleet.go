package hosts

import (
	"slices"
	"strings"
	"time"

	"herd"
)

// ReasonHostStale is the reason a session shows unknown: its host's daemon
// has not beaten within the host timeout.
const ReasonHostStale = "host_stale"

// Fleet judges the hosts of one read of the store, as seen by the daemon
// of host Self: another host whose heartbeat is older than Timeout, or that
// never recorded itself, is stale, and what its sessions last reported can
// no longer be vouched for.
type Fleet struct {
	Self    string
	Timeout time.Duration
	Now     time.Time
	// Hosts are the rows read, by name.
	Hosts map[string]herd.Host
}

// NewFleet indexes hosts for judging at now.
func NewFleet(self string, timeout time.Duration, now time.Time, hosts []herd.Host) Fleet {
	f := Fleet{Self: self, Timeout: timeout, Now: now, Hosts: make(map[string]herd.Host, len(hosts))}
	for _, h := range hosts {
		f.Hosts[h.Name] = h
	}
	return f
}

// Stale reports whether host's daemon is stale. The daemon judging is never
// stale to itself: it is answering.
func (f Fleet) Stale(host string) bool {
	if host == f.Self {
		return false
	}
	h, ok := f.Hosts[host]
	return !ok || Status(h, f.Now, f.Timeout) == Stale
}

// Mask returns s as the fleet should see it: a session that counts toward
// its replicas on a stale host is unknown on both axes, whatever its host
// last wrote (it may have died since, or be running still: nobody can
// tell, so nothing treats it as dead). Other sessions are returned as they
// are; a stopped or failed session stays so.
func (f Fleet) Mask(s herd.Session) (herd.Session, bool) {
	if !s.State.CountsTowardReplicas() || !f.Stale(s.Host) {
		return s, false
	}
	s.State, s.Runtime, s.Process, s.Activity = herd.StateUnknown, herd.Unknown, herd.Unknown, herd.ActivityUnknown
	s.BackoffUntil = nil
	return s, true
}

// Row is one line of `herd get hosts`.
type Row struct {
	Host     herd.Host
	Daemon   string // Up or Stale
	Sessions int    // sessions counting toward replicas
	// Recorded is false for a host that only sessions name: its daemon
	// never wrote a row.
	Recorded bool
}

// Rows lists every host the fleet knows, by name: the recorded ones and
// those that only sessions name.
func (f Fleet) Rows(sessions []herd.Session) []Row {
	byName := map[string]*Row{}
	for name, h := range f.Hosts {
		byName[name] = &Row{Host: h, Recorded: true}
	}
	for _, s := range sessions {
		r, ok := byName[s.Host]
		if !ok {
			r = &Row{Host: herd.Host{Name: s.Host}}
			byName[s.Host] = r
		}
		if s.State.CountsTowardReplicas() {
			r.Sessions++
		}
	}
	out := make([]Row, 0, len(byName))
	for _, r := range byName {
		r.Daemon = Up
		if f.Stale(r.Host.Name) {
			r.Daemon = Stale
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Row) int { return strings.Compare(a.Host.Name, b.Host.Name) })
	return out
}
