// Package top is `herd top`: a live, full-screen table of the sessions, built on Bubble Tea.
package top

import (
	"cmp"
	"context"
	"os/exec"
	"slices"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/cells"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// Options tune the view.
type Options struct {
	// Refresh is how often the session list is fetched (default 1s).
	Refresh time.Duration
	// DetailEvery is how often one session's diagnostics are fetched, in
	// turn (default 500ms): CPU, RSS and TCP cost a /proc walk each, so
	// they are sampled at a modest rate rather than all at once.
	DetailEvery time.Duration
	// CallTimeout bounds each call to the daemon (default 5s).
	CallTimeout time.Duration
	// Attach returns the command that attaches the terminal to a tmux
	// session; nil disables attaching.
	Attach func(name string) *exec.Cmd
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// mode is what the keyboard is doing.
type mode int

const (
	modeTable   mode = iota
	modeFilter       // typing a filter after "/"
	modeInject       // typing text to inject
	modeConfirm      // y/n before a stop or a restart
	modeLogs         // showing a session's output
)

// Sort columns, cycled with "s": names ascending, states and activities
// what needs a person first, numbers highest first; "S" reverses.
var sortKeys = []string{"name", "state", "activity", "cpu", "rss", "tcp", "age", "restarts"}

// Diag is what top shows of a session's diagnostics.
type Diag struct {
	CPU float64
	RSS float64
	TCP int
	// OK is false when the daemon had no diagnostics (not running).
	OK bool
}

// Model is the view's state. Update and View are pure over it; every
// call to the daemon runs in a tea.Cmd.
type Model struct {
	src  Source
	opts Options

	sessions []api.SessionView
	diags    map[string]Diag
	// detailNext is the index, among live sessions, whose diagnostics are
	// fetched next.
	detailNext int
	loaded     bool

	// selected names the session under the cursor, kept across refreshes
	// and re-sorts.
	selected string
	sortBy   int
	desc     bool
	filter   string

	mode   mode
	input  string // the filter or inject text being typed
	target string // the session a prompt or the logs view is about
	verb   string // what the y/n prompt confirms: "stop" or "restart"
	logs   []string
	scroll int // lines scrolled up from the end, in the logs view

	status string
	err    error

	width, height int
}

// New returns a model reading from src.
func New(src Source, opts Options) *Model {
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.DetailEvery <= 0 {
		opts.DetailEvery = 500 * time.Millisecond
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Model{src: src, opts: opts, diags: map[string]Diag{}, width: 100, height: 30}
}

// Messages.
type (
	tickMsg       struct{}
	detailTickMsg struct{}
	sessionsMsg   struct {
		views []api.SessionView
		err   error
	}
	detailMsg struct {
		name string
		diag Diag
		err  error
	}
	logsMsg struct {
		name string
		text string
		err  error
	}
	// resultMsg is the outcome of an action (stop, resume, inject, attach).
	resultMsg struct {
		text string
		err  error
	}
)

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.fetchSessions(), m.tick(), m.detailTick())
}

func (m *Model) tick() tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m *Model) detailTick() tea.Cmd {
	return tea.Tick(m.opts.DetailEvery, func(time.Time) tea.Msg { return detailTickMsg{} })
}

// call runs fn with a bounded context.
func (m *Model) call(fn func(ctx context.Context) tea.Msg) tea.Cmd {
	timeout := m.opts.CallTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return fn(ctx)
	}
}

func (m *Model) fetchSessions() tea.Cmd {
	src := m.src
	return m.call(func(ctx context.Context) tea.Msg {
		v, err := src.Sessions(ctx)
		return sessionsMsg{views: v, err: err}
	})
}

func (m *Model) fetchLogs(name string) tea.Cmd {
	src, tail := m.src, max(m.height*4, 200)
	return m.call(func(ctx context.Context) tea.Msg {
		text, err := src.Logs(ctx, name, tail)
		return logsMsg{name: name, text: text, err: err}
	})
}

// fetchDetail fetches the diagnostics of the next live session in turn.
func (m *Model) fetchDetail() tea.Cmd {
	var live []string
	for _, v := range m.sessions {
		if v.State.Live() && !v.Unmanaged {
			live = append(live, v.Name)
		}
	}
	if len(live) == 0 {
		return nil
	}
	name := live[m.detailNext%len(live)]
	m.detailNext++
	src := m.src
	return m.call(func(ctx context.Context) tea.Msg {
		d, err := src.Session(ctx, name)
		return detailMsg{name: name, diag: diagOf(d.Diagnostics), err: err}
	})
}

// diagOf reads the diagnostics object of `describe -o json`.
func diagOf(v any) Diag {
	m, ok := v.(map[string]any)
	if !ok {
		return Diag{}
	}
	d := Diag{OK: true}
	d.CPU, _ = m["cpu_percent"].(float64)
	d.RSS, _ = m["rss_bytes"].(float64)
	if t, ok := m["tcp_established"].(float64); ok {
		d.TCP = int(t)
	}
	return d
}

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		cmds := []tea.Cmd{m.fetchSessions(), m.tick()}
		if m.mode == modeLogs {
			cmds = append(cmds, m.fetchLogs(m.target))
		}
		return m, tea.Batch(cmds...)
	case detailTickMsg:
		return m, tea.Batch(m.fetchDetail(), m.detailTick())
	case sessionsMsg:
		m.err = msg.err
		if msg.err == nil {
			m.sessions, m.loaded = msg.views, true
			m.keepSelection()
		}
	case detailMsg:
		if msg.err == nil {
			m.diags[msg.name] = msg.diag
		}
	case logsMsg:
		if m.mode == modeLogs && msg.name == m.target {
			if msg.err != nil {
				m.logs = []string{"error: " + msg.err.Error()}
			} else {
				m.logs = strings.Split(strings.TrimRight(msg.text, "\n"), "\n")
			}
		}
	case resultMsg:
		m.status = msg.text
		if msg.err != nil {
			m.status = "error: " + msg.err.Error()
		}
		return m, m.fetchSessions()
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

// keepSelection keeps the cursor on a visible row.
func (m *Model) keepSelection() {
	rows := m.rows()
	if len(rows) == 0 {
		m.selected = ""
		return
	}
	if !slices.ContainsFunc(rows, func(v api.SessionView) bool { return v.Name == m.selected }) {
		m.selected = rows[0].Name
	}
}

// rows are the sessions shown: filtered, then sorted.
func (m *Model) rows() []api.SessionView {
	var out []api.SessionView
	f := strings.ToLower(m.filter)
	for _, v := range m.sessions {
		hay := strings.ToLower(strings.Join([]string{v.Name, v.Role, string(v.State), string(v.Activity), v.RuntimeKind, v.Host}, " "))
		if f == "" || strings.Contains(hay, f) {
			out = append(out, v)
		}
	}
	now := m.opts.Now()
	key := sortKeys[m.sortBy]
	slices.SortStableFunc(out, func(a, b api.SessionView) int {
		var c int
		switch key {
		case "state":
			c = cmp.Compare(rank(stateOrder, a.State), rank(stateOrder, b.State))
		case "activity":
			c = cmp.Compare(rank(activityOrder, a.Activity), rank(activityOrder, b.Activity))
		case "cpu":
			c = -cmp.Compare(m.metric(a, func(d Diag) float64 { return d.CPU }), m.metric(b, func(d Diag) float64 { return d.CPU }))
		case "rss":
			c = -cmp.Compare(m.metric(a, func(d Diag) float64 { return d.RSS }), m.metric(b, func(d Diag) float64 { return d.RSS }))
		case "tcp":
			c = -cmp.Compare(m.metric(a, func(d Diag) float64 { return float64(d.TCP) }), m.metric(b, func(d Diag) float64 { return float64(d.TCP) }))
		case "age":
			c = -cmp.Compare(age(a, now), age(b, now))
		case "restarts":
			c = -cmp.Compare(a.Restarts, b.Restarts)
		}
		if c == 0 {
			c = cmp.Compare(a.Name, b.Name)
		}
		if m.desc {
			c = -c
		}
		return c
	})
	return out
}

// Sort orders: what needs a person first.
var (
	stateOrder = []herd.State{herd.StateFailed, herd.StateCrashed, herd.StateBackoff, herd.StateStalled,
		herd.StateUnknown, herd.StatePending, herd.StateRunning, herd.StateSucceeded, herd.StateStopped}
	activityOrder = []herd.Activity{herd.ActivityWaiting, herd.ActivityWorking, herd.ActivityIdle, herd.ActivityUnknown}
)

// rank is v's place in order; unlisted values go last.
func rank[T comparable](order []T, v T) int {
	if i := slices.Index(order, v); i >= 0 {
		return i
	}
	return len(order)
}

// metric is one diagnostic of a live session, -1 when there is none (so
// it sorts after every measured one).
func (m *Model) metric(v api.SessionView, f func(Diag) float64) float64 {
	d, ok := m.diags[v.Name]
	if !ok || !d.OK || !v.State.Live() {
		return -1
	}
	return f(d)
}

// logRows is how many lines of output the logs view shows.
func (m *Model) logRows() int { return max(m.height-3, 1) }

// Styles.
var (
	titleStyle  = lipgloss.NewStyle().Bold(true)
	headerStyle = lipgloss.NewStyle().Bold(true).Underline(true)
	cursorStyle = lipgloss.NewStyle().Reverse(true)
	badStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	warnStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	goodStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	dimStyle    = lipgloss.NewStyle().Faint(true)
)

// View implements tea.Model.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "herd top"
	return v
}

// age orders sessions by how long they have run; one not live sorts last.
func age(v api.SessionView, now time.Time) time.Duration {
	if d, ok := cells.Age(v, now); ok {
		return d
	}
	return -1
}
