package watchdog

import (
	"sync"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/diag"
	"herd/internal/execoutput"
	"herd/internal/proc"
	"herd/internal/runtime/execrt"
)

// incWatch is what the watchdog saw of one incarnation.
type incWatch struct {
	session string
	id      string
	runtime string
	start   time.Time

	// hookMu serializes hook reports of this incarnation together with
	// their store update, so the stored activity follows the hook order.
	hookMu sync.Mutex

	// tailMu guards the tailers (the tick polls them, the summary drains them).
	tailMu  sync.Mutex
	stdout  *execrt.Tailer
	stderr  *execrt.Tailer
	tracker *execoutput.Tracker

	mu sync.Mutex // guards the fields below
	// hook is the activity derived from hook events; hookSeen is set once
	// one arrived: from then on hooks, not output, drive the activity axis.
	hook     agents.State
	hookSeen bool
	hooks    int
	// hookAt is the time of the hook that last moved hook: a report from
	// before it (a spooled one ingested late) is counted, never applied.
	hookAt time.Time
	// applied are the reports applied lately, by their hook's time and
	// event: a hook whose answer came after its time budget spools the
	// report it delivered, and the copy must not count twice.
	applied []hookKey
	// lastActivity is the last output or real activity; longest is the
	// longest gap between two of them.
	lastActivity time.Time
	longest      time.Duration
	// persisted is the LastActivityAt last written to the store.
	persisted time.Time
	// agentSessionID is the id last written to the incarnation.
	agentSessionID string
	// stalls and warnings count stalled and stall_warning events of the
	// incarnation; stallWarnings those of the current stall. lastWarn is
	// the time of the last one.
	stalls        int
	warnings      int
	stallWarnings int
	lastWarn      time.Time
	// prev is the last /proc sample; killBase starts the kill window.
	prev     *diag.Diagnostics
	killBase *diag.Diagnostics
	killWhy  string
	// kind is the agent kind of the session's role ("" until read).
	kind string
	// tmux: the last window_activity seen, the one seen at the last
	// capture, and when that capture was taken.
	winActivity time.Time
	winCaptured time.Time
	capturedAt  time.Time
	captures    int // capture-pane calls for this incarnation
	// An agent herd cannot read: the last pane content hash.
	paneHash   uint64
	paneHashed bool
	// An agent herd can read: the hash of the last normalised screen,
	// when it was first captured, and whether it shows the prompt.
	screenHash  string
	screenSince time.Time
	screenIdle  bool
	// transcript is what the watchdog follows of the agent's transcript.
	transcript transcriptWatch
	// outGap is the spacing of output polls while the exec agent is
	// quiet, and outNext when the next one is due.
	outGap  time.Duration
	outNext time.Time
	// ended is set once the summary was taken: the tick stops tailing.
	ended bool
	// exeReplaced is the agent's executable once it was seen replaced on
	// disk ("" while current); updateRestart is set while a
	// restart_on_update restart of it runs.
	exeReplaced   string
	updateRestart bool
	// exeCheckedAt is when the executable was last read. exePath and
	// exeID are the file it runs, once known: while the file at exePath
	// is still exeID the binary is current, and the agent is not read.
	exeCheckedAt time.Time
	exePath      string
	exeID        proc.FileID
}

// watchFor returns the memory of s's current incarnation inc, creating it
// from what the store knows (after a daemon restart, the stored last
// activity and activity carry on).
func (w *Watchdog) watchFor(s herd.Session, inc herd.Incarnation) *incWatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m, ok := w.incs[inc.ID]; ok {
		return m
	}
	m := &incWatch{session: s.Name, id: inc.ID, runtime: inc.RuntimeKind, start: inc.StartedAt}
	m.tracker = execoutput.NewTracker(inc.StartedAt)
	m.lastActivity = inc.StartedAt
	if s.LastActivityAt != nil && s.LastActivityAt.After(m.lastActivity) {
		m.lastActivity = *s.LastActivityAt
		m.persisted = *s.LastActivityAt
	}
	m.hook.Activity = s.Activity
	m.hook.AgentSessionID = inc.AgentSessionID
	m.agentSessionID = inc.AgentSessionID
	if s.State == herd.StateStalled {
		m.lastWarn = s.StateSince
	}
	w.incs[inc.ID] = m
	return m
}

// lookup returns the memory of an incarnation, nil when there is none.
func (w *Watchdog) lookup(inc string) *incWatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.incs[inc]
}

// gc drops the memory of incarnations that are no longer current and live.
func (w *Watchdog) gc(current map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.incs {
		if !current[id] {
			delete(w.incs, id)
		}
	}
}

// noteActivityLocked records output or real activity at at.
func (m *incWatch) noteActivityLocked(at time.Time) {
	if !at.After(m.lastActivity) {
		return
	}
	base := m.lastActivity
	if base.IsZero() {
		base = m.start
	}
	if gap := at.Sub(base); gap > m.longest {
		m.longest = gap
	}
	m.lastActivity = at
}

// activityLocked is the activity the watchdog classifies by.
func (m *incWatch) activityLocked() herd.Activity {
	if m.hook.Activity == "" {
		return herd.ActivityUnknown
	}
	return m.hook.Activity
}

// hookKey names one hook report: the time its hook took it, and its event.
type hookKey struct {
	at    int64
	event string
}

// maxApplied bounds the reports remembered per incarnation: a spooled copy
// comes within the spool's latency, a few reports later at most.
const maxApplied = 64

// appliedLocked reports whether the report named k was applied already.
func (m *incWatch) appliedLocked(k hookKey) bool {
	for _, a := range m.applied {
		if a == k {
			return true
		}
	}
	return false
}

// noteAppliedLocked remembers the report named k as applied.
func (m *incWatch) noteAppliedLocked(k hookKey) {
	if len(m.applied) == maxApplied {
		m.applied = m.applied[1:]
	}
	m.applied = append(m.applied, k)
}
