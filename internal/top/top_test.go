package top

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"herd"
	"herd/internal/api"
)

// fake is a Source that records the actions asked of it.
type fake struct {
	mu       sync.Mutex
	sessions []api.SessionView
	diags    map[string]any
	logs     string
	actions  []string
	err      error
}

func (f *fake) Sessions(context.Context) ([]api.SessionView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions, f.err
}

func (f *fake) Session(_ context.Context, name string) (api.SessionDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.SessionDetail{SessionView: api.SessionView{Name: name}, Diagnostics: f.diags[name]}, nil
}

func (f *fake) Logs(_ context.Context, name string, _ int) (string, error) {
	return f.logs, nil
}

func (f *fake) act(what string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, what)
	return what + " done", nil
}

func (f *fake) Stop(_ context.Context, name string) (string, error) { return f.act("stop " + name) }
func (f *fake) Restart(_ context.Context, name string) (string, error) {
	return f.act("restart " + name)
}
func (f *fake) Resume(_ context.Context, name string) (string, error) { return f.act("resume " + name) }
func (f *fake) Inject(_ context.Context, name, text string) (string, error) {
	return f.act("inject " + name + " " + text)
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func fixture() *fake {
	t1, t2 := now.Add(-2*time.Minute), now.Add(-30*time.Second)
	code := 1
	return &fake{
		sessions: []api.SessionView{
			{Name: "worker-0", Role: "worker", State: herd.StateRunning, Activity: herd.ActivityWorking, RuntimeKind: herd.RuntimeTmux, StartedAt: &t1, Restarts: 0, Usage: api.Usage{InputTokens: 100, CostUSD: 1.25}},
			{Name: "worker-1", Role: "worker", State: herd.StateStalled, Activity: herd.ActivityUnknown, RuntimeKind: herd.RuntimeTmux, StartedAt: &t2, Restarts: 2, Escalated: true},
			{Name: "batch-0", Role: "batch", State: herd.StateBackoff, Activity: herd.ActivityIdle, RuntimeKind: herd.RuntimeExec, Restarts: 3,
				Exit: &herd.Exit{Code: &code, Reason: herd.ReasonExitCode, At: now.Add(-5 * time.Second)}},
		},
		diags: map[string]any{
			"worker-0": map[string]any{"cpu_percent": 12.5, "rss_bytes": float64(200 << 20), "tcp_established": float64(3)},
			"worker-1": map[string]any{"cpu_percent": 0.0, "rss_bytes": float64(50 << 20), "tcp_established": float64(0)},
		},
		logs: "line one\nline two\n",
	}
}

// run feeds msg to m and then, recursively, the messages its commands
// produce, except timers (which would never end) and program-level ones.
func run(t *testing.T, m *Model, msg tea.Msg) {
	t.Helper()
	queue := []tea.Msg{msg}
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 100 {
			t.Fatal("too many messages")
		}
		msg, queue = queue[0], queue[1:]
		_, cmd := m.Update(msg)
		queue = append(queue, expand(cmd)...)
	}
}

// expand runs cmd and returns the messages it yields, dropping ticks.
func expand(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-done:
	case <-time.After(50 * time.Millisecond):
		return nil // a timer: not followed in unit tests
	}
	if batch, ok := msg.(tea.BatchMsg); ok {
		var out []tea.Msg
		for _, c := range batch {
			out = append(out, expand(c)...)
		}
		return out
	}
	switch msg.(type) {
	case tickMsg, detailTickMsg:
		return nil
	}
	return []tea.Msg{msg}
}

func newModel(t *testing.T, f *fake) *Model {
	t.Helper()
	m := New(f, Options{Now: func() time.Time { return now }, Refresh: time.Hour, DetailEvery: time.Hour})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 12})
	run(t, m, sessionsMsg{views: f.sessions})
	for range f.sessions {
		run(t, m, m.fetchDetail()())
	}
	return m
}

func key(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

func typeText(t *testing.T, m *Model, s string) {
	for _, r := range s {
		run(t, m, key(string(r)))
	}
}

func screen(m *Model) string { return ansi.Strip(m.Render()) }

// rowNames are the session names in table order.
func rowNames(m *Model) string {
	var out []string
	for _, v := range m.rows() {
		out = append(out, v.Name)
	}
	return strings.Join(out, " ")
}

func TestViewShowsDiagnostics(t *testing.T) {
	m := newModel(t, fixture())
	s := screen(m)
	for _, want := range []string{
		"herd top  3 sessions  running 1  stalled 1  backoff 1",
		"NAME", "CPU%", "RSS", "TCP", "COST", "RESTARTS", "LAST-EXIT",
		"12.5", "200.0M", "2m0s", "$1.25",
		"stalled!",
		"code 1 5s ago",
		"q quit",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("expected the screen to contain %q:\n%s", want, s)
		}
	}
	if lines := strings.Split(s, "\n"); len(lines) != 12 {
		t.Errorf("expected the screen to fill its 12 lines, got %d", len(lines))
	}
}

func TestSortAndFilter(t *testing.T) {
	m := newModel(t, fixture())
	for _, tc := range []struct {
		keys string
		want string
	}{
		{"", "batch-0 worker-0 worker-1"},       // name
		{"s", "batch-0 worker-1 worker-0"},      // state: worst first
		{"s", "worker-0 batch-0 worker-1"},      // activity: waiting, working, idle, unknown
		{"s", "worker-0 worker-1 batch-0"},      // cpu, highest first
		{"S", "batch-0 worker-1 worker-0"},      // reversed
		{"Ssssss", "batch-0 worker-0 worker-1"}, // back to name
		{"/work", "worker-0 worker-1"},          // filter while typing
		{"\x7f\x7f\x7f\x7fbatch\n", "batch-0"},  // edit, keep
		{"\x1b", "batch-0 worker-0 worker-1"},   // esc clears
		{"/nothing-matches\n", ""},              // empty
	} {
		for _, r := range tc.keys {
			switch r {
			case '\x7f':
				run(t, m, key("backspace"))
			case '\n':
				run(t, m, key("enter"))
			case '\x1b':
				run(t, m, key("esc"))
			default:
				run(t, m, key(string(r)))
			}
		}
		if got := rowNames(m); got != tc.want {
			t.Errorf("[%q] expected rows %q, got %q", tc.keys, tc.want, got)
		}
	}
	if s := screen(m); !strings.Contains(s, "No sessions match the filter.") {
		t.Errorf("expected the empty-filter line, got:\n%s", s)
	}
}

func TestActions(t *testing.T) {
	f := fixture()
	m := newModel(t, f)
	// Cursor starts on the first row (batch-0); move to worker-0.
	run(t, m, key("down"))
	if m.selected != "worker-0" {
		t.Fatalf("expected worker-0 selected, got %q", m.selected)
	}
	run(t, m, key("x"))
	if s := screen(m); !strings.Contains(s, "stop worker-0? (y/n)") {
		t.Errorf("expected a stop prompt, got:\n%s", s)
	}
	run(t, m, key("n"))
	if s := screen(m); !strings.Contains(s, "stop cancelled") {
		t.Errorf("expected the stop cancelled, got:\n%s", s)
	}
	run(t, m, key("x"))
	run(t, m, key("y"))
	run(t, m, key("R"))
	if s := screen(m); !strings.Contains(s, "restart worker-0? (y/n)") || !strings.Contains(s, "y restart") {
		t.Errorf("expected a restart prompt, got:\n%s", s)
	}
	run(t, m, key("q"))
	if s := screen(m); !strings.Contains(s, "restart cancelled") {
		t.Errorf("expected the restart cancelled (a key other than y), got:\n%s", s)
	}
	run(t, m, key("R"))
	run(t, m, key("y"))
	run(t, m, key("r"))
	run(t, m, key("i"))
	typeText(t, m, "run the tests")
	if s := screen(m); !strings.Contains(s, "inject into worker-0: run the tests") {
		t.Errorf("expected the inject prompt with the text, got:\n%s", s)
	}
	run(t, m, key("enter"))
	want := []string{"stop worker-0", "restart worker-0", "resume worker-0", "inject worker-0 run the tests"}
	if strings.Join(f.actions, "|") != strings.Join(want, "|") {
		t.Errorf("expected actions %q, got %q", want, f.actions)
	}
	if s := screen(m); !strings.Contains(s, "inject worker-0 run the tests done") {
		t.Errorf("expected the last result on the status line, got:\n%s", s)
	}
}

func TestEnterAttachesTmuxAndShowsLogsForExec(t *testing.T) {
	f := fixture()
	var attached []string
	m := New(f, Options{Now: func() time.Time { return now }, Attach: func(name string) *exec.Cmd {
		attached = append(attached, name)
		return exec.Command("true")
	}})
	run(t, m, sessionsMsg{views: f.sessions})
	// batch-0 is exec: Enter shows its output.
	run(t, m, key("enter"))
	if m.mode != modeLogs || !strings.Contains(screen(m), "line two") {
		t.Fatalf("expected the logs of batch-0, got:\n%s", screen(m))
	}
	run(t, m, key("esc"))
	if m.mode != modeTable {
		t.Fatalf("expected esc to return to the table")
	}
	// worker-0 is a live tmux session: Enter runs the attach command.
	run(t, m, key("down"))
	_, cmd := m.Update(key("enter"))
	if cmd == nil || len(attached) != 1 || attached[0] != "worker-0" {
		t.Errorf("expected an attach to worker-0, got %v", attached)
	}
}

func TestErrorsShown(t *testing.T) {
	f := fixture()
	m := newModel(t, f)
	run(t, m, sessionsMsg{err: errors.New("no daemon")})
	if s := screen(m); !strings.Contains(s, "error: no daemon") || !strings.Contains(s, "worker-0") {
		t.Errorf("expected the error and the last known rows, got:\n%s", s)
	}
	empty := New(&fake{}, Options{Now: func() time.Time { return now }})
	run(t, empty, sessionsMsg{views: []api.SessionView{}})
	if s := screen(empty); !strings.Contains(s, "No sessions found.") {
		t.Errorf("expected the empty line, got:\n%s", s)
	}
}

func TestDetailRoundRobin(t *testing.T) {
	f := fixture()
	m := New(f, Options{Now: func() time.Time { return now }})
	run(t, m, sessionsMsg{views: f.sessions})
	var names []string
	for range 4 {
		names = append(names, m.fetchDetail()().(detailMsg).name)
	}
	// Only live sessions are sampled, in turn.
	if got := strings.Join(names, " "); got != "worker-0 worker-1 worker-0 worker-1" {
		t.Errorf("expected live sessions in turn, got %q", got)
	}
}
