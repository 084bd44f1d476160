// Package resources keeps the last hour of each live agent's CPU and
// memory, sampled from /proc, for the console's charts. The daemon runs
// its Sampler; the console reads Series. It only reads /proc (its stat
// files: no fd or socket walk), after verifying each agent's identity; it
// never writes the store and never signals a process.
package resources

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"herd"
	"herd/internal/loop"
	"herd/internal/proc"
	"herd/internal/status"
)

// Point is one sample of an agent's process tree.
type Point struct {
	// At is when it was taken.
	At time.Time `json:"t"`
	// CPUPercent is the tree's CPU since the previous sample, in percent
	// of one core; nil for the first sample of an incarnation.
	CPUPercent *float64 `json:"cpu"`
	// RSSBytes is the sum of the tree's resident sets.
	RSSBytes int64 `json:"rss"`
}

// Lister lists this host's live sessions (status.Manager).
type Lister interface {
	Live(ctx context.Context) ([]herd.Session, []status.Live, error)
}

var _ Lister = (*status.Manager)(nil)

// Defaults of Options.
const (
	DefaultEvery  = time.Minute
	DefaultPoints = 60
)

// Options configure a Sampler.
type Options struct {
	Live   Lister
	Proc   proc.FS
	BootID string
	// Every is the sampling period (DefaultEvery when 0).
	Every time.Duration
	// Points is how many samples a session keeps (DefaultPoints when 0).
	Points int
	Log    *slog.Logger
}

// series is one session's samples.
type series struct {
	// points is a ring of at most Options.Points, oldest first from next.
	points []Point
	next   int
	// inc, ticks and at are the previous sample's incarnation, tree CPU
	// ticks and time: the base of the next CPU percentage.
	inc   string
	ticks uint64
	at    time.Time
	// members are the tree's pids below the agent as last listed, at
	// listed: listing a tree reads every thread's children file, so it
	// is done every relist only.
	members []int
	listed  time.Time
}

// relist is how often a tree's members are listed again.
const relist = 5 * time.Minute

// Sampler samples the live agents' trees every Options.Every.
type Sampler struct {
	o    Options
	page int64

	// mu guards the field below.
	mu sync.Mutex
	// series by session name.
	series map[string]*series
}

// New returns a sampler; Run samples.
func New(o Options) *Sampler {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Points <= 0 {
		o.Points = DefaultPoints
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Proc.Root == "" {
		o.Proc = proc.Real()
	}
	return &Sampler{o: o, page: int64(os.Getpagesize()), series: map[string]*series{}}
}

// Every is the sampling period.
func (s *Sampler) Every() time.Duration { return s.o.Every }

// Run samples until ctx is done.
func (s *Sampler) Run(ctx context.Context) {
	loop.Loop{Name: "resources", Log: s.o.Log, Every: s.o.Every, First: time.Second}.Run(ctx, func(ctx context.Context) time.Duration {
		s.Sample(ctx, time.Now())
		return s.o.Every
	})
}

// Sample takes one sample of every live agent. A session no longer live
// keeps its samples until they are older than the window.
func (s *Sampler) Sample(ctx context.Context, now time.Time) {
	_, live, err := s.o.Live.Live(ctx)
	if err != nil {
		s.o.Log.Debug("resources: live set not read", "err", err)
		return
	}
	type taken struct {
		name, inc string
		ticks     uint64
		rss       int64
		members   []int
		listed    time.Time
	}
	var got []taken
	for _, l := range live {
		id := l.Inc.AgentIdentity()
		if id.Zero() || s.o.Proc.Check(id, s.o.BootID) != herd.Alive {
			continue
		}
		var members []int
		var listed time.Time
		s.mu.Lock()
		if sr := s.series[l.S.Name]; sr != nil && sr.inc == l.Inc.ID && now.Sub(sr.listed) < relist {
			members, listed = sr.members, sr.listed
		}
		s.mu.Unlock()
		if listed.IsZero() {
			var err error
			if members, err = s.o.Proc.Descendants(id.PID); err != nil {
				continue
			}
			listed = now
		}
		ticks, rss, members, ok := s.tree(id.PID, members)
		if !ok {
			continue
		}
		got = append(got, taken{name: l.S.Name, inc: l.Inc.ID, ticks: ticks, rss: rss, members: members, listed: listed})
	}
	window := time.Duration(s.o.Points) * s.o.Every
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range got {
		sr := s.series[t.name]
		if sr == nil {
			sr = &series{}
			s.series[t.name] = sr
		}
		p := Point{At: now.UTC(), RSSBytes: t.rss}
		if sr.inc == t.inc && now.After(sr.at) && t.ticks >= sr.ticks {
			pct := float64(t.ticks-sr.ticks) / float64(proc.ClockTicks()) / now.Sub(sr.at).Seconds() * 100
			p.CPUPercent = &pct
		}
		sr.inc, sr.ticks, sr.at, sr.members, sr.listed = t.inc, t.ticks, now, t.members, t.listed
		sr.add(p, s.o.Points)
	}
	for name, sr := range s.series {
		if now.Sub(sr.at) > window {
			delete(s.series, name)
		}
	}
}

// tree sums the CPU ticks (user and system) and resident sets of pid and
// its members, and returns the members still there.
func (s *Sampler) tree(pid int, members []int) (ticks uint64, rss int64, alive []int, ok bool) {
	st, err := s.o.Proc.Stat(pid)
	if err != nil {
		return 0, 0, nil, false
	}
	ticks, rss = st.UTime+st.STime, st.RSSPages*s.page
	alive = members[:0:0]
	for _, p := range members {
		st, err := s.o.Proc.Stat(p)
		if err != nil || st.Zombie() {
			continue
		}
		ticks += st.UTime + st.STime
		rss += st.RSSPages * s.page
		alive = append(alive, p)
	}
	return ticks, rss, alive, true
}

func (sr *series) add(p Point, max int) {
	if len(sr.points) < max {
		sr.points = append(sr.points, p)
		return
	}
	sr.points[sr.next] = p
	sr.next = (sr.next + 1) % max
}

// Series returns session name's samples, oldest first (none when it was
// not sampled in the window).
func (s *Sampler) Series(name string) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.series[name]
	if sr == nil {
		return []Point{}
	}
	out := make([]Point, 0, len(sr.points))
	out = append(out, sr.points[sr.next:]...)
	return append(out, sr.points[:sr.next]...)
}
