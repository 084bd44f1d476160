package web

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"herd"
	"herd/internal/resources"
)

// Resources are the samples of this host's agents (resources.Sampler).
type Resources interface {
	// Series is a session's samples, oldest first.
	Series(name string) []resources.Point
	// Every is the sampling period.
	Every() time.Duration
}

var _ Resources = (*resources.Sampler)(nil)

// ResourceSeries is a session's CPU and memory over the last hour.
type ResourceSeries struct {
	Session string `json:"session"`
	// Every is the sampling period, e.g. "30s".
	Every  string            `json:"every"`
	Points []resources.Point `json:"points"`
}

func (s *Server) handleResources(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	out := ResourceSeries{Session: name, Points: []resources.Point{}}
	if s.o.Resources != nil {
		out.Every = s.o.Resources.Every().String()
		if pts := s.o.Resources.Series(name); pts != nil {
			out.Points = pts
		}
	}
	replyJSON(w, http.StatusOK, out)
}

// CrashChart counts crashes and restarts per role in equal buckets.
type CrashChart struct {
	// Start is the first bucket's start; each lasts Bucket.
	Start  time.Time     `json:"start"`
	Bucket string        `json:"bucket"`
	Roles  []RoleCrashes `json:"roles"`
}

// RoleCrashes are one role's counts, one per bucket, oldest first.
type RoleCrashes struct {
	Role      string `json:"role"`
	Crashed   []int  `json:"crashed"`
	Restarted []int  `json:"restarted"`
}

// Crash chart defaults: a day in hours.
const (
	crashBucket  = time.Hour
	crashBuckets = 24
	// crashEvents bounds the events read per kind.
	crashEvents = 5000
)

// Crashes counts the crashed and restarted events of evs from start on,
// per role, in n buckets of bucket; roles with neither are left out.
func Crashes(evs []herd.Event, start time.Time, bucket time.Duration, n int) []RoleCrashes {
	byRole := map[string]*RoleCrashes{}
	for _, e := range evs {
		if e.Kind != herd.EventCrashed && e.Kind != herd.EventRestarted {
			continue
		}
		i := int(e.Time.Sub(start) / bucket)
		if e.Time.Before(start) || i >= n {
			continue
		}
		role := RoleOf(e.Session)
		rc := byRole[role]
		if rc == nil {
			rc = &RoleCrashes{Role: role, Crashed: make([]int, n), Restarted: make([]int, n)}
			byRole[role] = rc
		}
		if e.Kind == herd.EventCrashed {
			rc.Crashed[i]++
		} else {
			rc.Restarted[i]++
		}
	}
	out := make([]RoleCrashes, 0, len(byRole))
	for _, rc := range byRole {
		out = append(out, *rc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out
}

// RoleOf is the role of a session name (<role>-<index>).
func RoleOf(session string) string {
	i := strings.LastIndexByte(session, '-')
	if i <= 0 {
		return session
	}
	if _, err := strconv.Atoi(session[i+1:]); err != nil {
		return session
	}
	return session[:i]
}

func (s *Server) handleCrashes(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	start := now.Truncate(crashBucket).Add(-(crashBuckets - 1) * crashBucket)
	var evs []herd.Event
	for _, kind := range []string{herd.EventCrashed, herd.EventRestarted} {
		got, err := s.o.Backend.Events(r.Context(), EventQuery{Kind: kind, Limit: crashEvents})
		if err != nil {
			fail(w, err)
			return
		}
		evs = append(evs, got...)
	}
	replyJSON(w, http.StatusOK, CrashChart{Start: start, Bucket: crashBucket.String(), Roles: Crashes(evs, start, crashBucket, crashBuckets)})
}
