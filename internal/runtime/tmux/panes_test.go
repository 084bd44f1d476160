package tmux

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func intp(n int) *int { return &n }

// row joins fields with tabs, as tmux prints them.
func row(fields ...string) string { return strings.Join(fields, "\t") }

// alive returns the fields of a healthy row of session name.
func alive(name string) []string {
	return []string{name, "%3", "4242", "0", "", "", "1", "1700000100", "1700000000", "99"}
}

func with(fields []string, i int, v string) []string {
	out := append([]string(nil), fields...)
	out[i] = v
	return out
}

func TestParsePanes(t *testing.T) {
	good := Pane{
		Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1,
		WindowActivity: time.Unix(1700000100, 0), SessionCreated: time.Unix(1700000000, 0),
		ServerPID: 99,
	}
	withPane := func(f func(*Pane)) Pane { p := good; f(&p); return p }

	tests := []struct {
		name string
		out  string
		want []Pane
		// bad lists, per pane, whether Err must be set (Err values are
		// not compared).
		bad []bool
	}{
		{"empty output", "", nil, nil},
		{"good row", row(alive("worker-0")...) + "\n", []Pane{good}, []bool{false}},
		{"no trailing newline", row(alive("worker-0")...), []Pane{good}, []bool{false}},
		{"crlf", row(alive("worker-0")...) + "\r\n" + row(alive("worker-0")...) + "\r\n",
			[]Pane{good, good}, []bool{false, false}},
		{"blank lines", "\n\n" + row(alive("worker-0")...) + "\n   \n\r\n", []Pane{good}, []bool{false}},
		{"dead with status",
			row(with(with(alive("worker-0"), 3, "1"), 4, "3")...),
			[]Pane{withPane(func(p *Pane) { p.Dead = true; p.DeadStatus = intp(3) })}, []bool{false}},
		{"dead with status 0",
			row(with(with(alive("worker-0"), 3, "1"), 4, "0")...),
			[]Pane{withPane(func(p *Pane) { p.Dead = true; p.DeadStatus = intp(0) })}, []bool{false}},
		{"dead with signal",
			row(with(with(alive("worker-0"), 3, "1"), 5, "11")...),
			[]Pane{withPane(func(p *Pane) { p.Dead = true; p.DeadSignal = intp(11) })}, []bool{false}},
		{"dead, exit not reported (or no pane_dead_signal in this tmux)",
			row(with(alive("worker-0"), 3, "1")...),
			[]Pane{withPane(func(p *Pane) { p.Dead = true })}, []bool{false}},
		{"alive with a stale status is alive without exit",
			row(with(alive("worker-0"), 4, "3")...), []Pane{good}, []bool{false}},
		{"session name with spaces and unicode",
			row(alive("wörk 1 ✓")...),
			[]Pane{withPane(func(p *Pane) { p.Session = "wörk 1 ✓" })}, []bool{false}},
		{"unattached", row(with(alive("worker-0"), 6, "0")...),
			[]Pane{withPane(func(p *Pane) { p.Attached = 0 })}, []bool{false}},
		{"all fields empty after the name", "name" + strings.Repeat("\t", 9),
			[]Pane{{Session: "name"}}, []bool{true}},
		{"empty session name", row(with(alive("x"), 0, "")...), []Pane{{}}, []bool{true}},
		{"missing columns", "worker-0\t%3\t4242", []Pane{{Session: "worker-0"}}, []bool{true}},
		{"only a name", "worker-0", []Pane{{Session: "worker-0"}}, []bool{true}},
		{"extra tab", row(alive("worker-0")...) + "\t", []Pane{{Session: "worker-0"}}, []bool{true}},
		{"extra column", row(append(alive("worker-0"), "x")...), []Pane{{Session: "worker-0"}}, []bool{true}},
		{"garbled pane id", row(with(alive("worker-0"), 1, "3")...), []Pane{{Session: "worker-0", PaneID: "3"}}, []bool{true}},
		{"empty pid", row(with(alive("worker-0"), 2, "")...), []Pane{{Session: "worker-0", PaneID: "%3"}}, []bool{true}},
		{"non-numeric pid", row(with(alive("worker-0"), 2, "12a")...), []Pane{{Session: "worker-0", PaneID: "%3"}}, []bool{true}},
		{"zero pid", row(with(alive("worker-0"), 2, "0")...), []Pane{{Session: "worker-0", PaneID: "%3"}}, []bool{true}},
		{"negative pid", row(with(alive("worker-0"), 2, "-5")...), []Pane{{Session: "worker-0", PaneID: "%3"}}, []bool{true}},
		{"empty dead flag", row(with(alive("worker-0"), 3, "")...), []Pane{{Session: "worker-0", PaneID: "%3", PID: 4242}}, []bool{true}},
		{"garbled dead flag", row(with(alive("worker-0"), 3, "yes")...), []Pane{{Session: "worker-0", PaneID: "%3", PID: 4242}}, []bool{true}},
		{"garbled status", row(with(with(alive("worker-0"), 3, "1"), 4, "x")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Dead: true}}, []bool{true}},
		{"garbled signal", row(with(with(alive("worker-0"), 3, "1"), 5, "SEGV")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Dead: true}}, []bool{true}},
		{"empty attached", row(with(alive("worker-0"), 6, "")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242}}, []bool{true}},
		{"empty activity", row(with(alive("worker-0"), 7, "")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1}}, []bool{true}},
		{"non-numeric activity", row(with(alive("worker-0"), 7, "yesterday")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1}}, []bool{true}},
		{"zero activity", row(with(alive("worker-0"), 7, "0")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1}}, []bool{true}},
		{"activity with spaces", row(with(alive("worker-0"), 7, " 1700000100")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1}}, []bool{true}},
		{"empty created", row(with(alive("worker-0"), 8, "")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1, WindowActivity: time.Unix(1700000100, 0)}}, []bool{true}},
		{"empty server pid", row(with(alive("worker-0"), 9, "")...),
			[]Pane{{Session: "worker-0", PaneID: "%3", PID: 4242, Attached: 1,
				WindowActivity: time.Unix(1700000100, 0), SessionCreated: time.Unix(1700000000, 0)}}, []bool{true}},
		{"huge number", row(with(alive("worker-0"), 2, "99999999999999999999999")...),
			[]Pane{{Session: "worker-0", PaneID: "%3"}}, []bool{true}},
		{"bad row does not hide good rows",
			row(alive("worker-0")...) + "\n" + "broken\n" + row(alive("worker-0")...) + "\n",
			[]Pane{good, {Session: "broken"}, good}, []bool{false, true, false}},
	}
	for _, tt := range tests {
		got := ParsePanes([]byte(tt.out))
		if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Pane{}, "Err")); diff != "" {
			t.Errorf("[%s] expected panes … got (-want +got):\n%s", tt.name, diff)
			continue
		}
		for i, p := range got {
			if (p.Err != nil) != tt.bad[i] {
				t.Errorf("[%s] row %d: expected error %v … got %v", tt.name, i, tt.bad[i], p.Err)
			}
		}
	}
}

func TestParsePanesErrorNamesLineAndField(t *testing.T) {
	got := ParsePanes([]byte(row(alive("a")...) + "\n" + row(with(alive("b"), 7, "")...)))
	if len(got) != 2 || got[1].Err == nil {
		t.Fatalf("expected an error on the second row … got %+v", got)
	}
	if msg := got[1].Err.Error(); !strings.Contains(msg, "line 2") || !strings.Contains(msg, "window_activity") {
		t.Errorf("expected the line and field in the error … got %q", msg)
	}
}

func TestPaneFormatMatchesFields(t *testing.T) {
	if n := strings.Count(paneFormat, "\t") + 1; n != len(paneFields) {
		t.Errorf("expected %d columns in the format … got %d", len(paneFields), n)
	}
	if !strings.HasPrefix(paneFormat, "#{session_name}\t") {
		t.Errorf("expected the session name first … got %q", paneFormat)
	}
}

func TestUnreportedExitServer(t *testing.T) {
	dead := Pane{Session: "a", Dead: true, ServerPID: 7}
	tests := []struct {
		name  string
		panes []Pane
		want  int
	}{
		{"none", nil, 0},
		{"alive", []Pane{{Session: "a", ServerPID: 7}}, 0},
		{"dead with status", []Pane{{Session: "a", Dead: true, DeadStatus: intp(1), ServerPID: 7}}, 0},
		{"dead with signal", []Pane{{Session: "a", Dead: true, DeadSignal: intp(9), ServerPID: 7}}, 0},
		{"dead without exit", []Pane{dead}, 7},
		{"garbled row is not trusted", []Pane{{Session: "a", Dead: true, ServerPID: 7, Err: errTest}}, 0},
	}
	for _, tt := range tests {
		if got := unreportedExitServer(tt.panes); got != tt.want {
			t.Errorf("[%s] expected %d … got %d", tt.name, tt.want, got)
		}
	}
}

func TestFindPane(t *testing.T) {
	agent := Pane{Session: "a", PaneID: "%1", PID: 10}
	split := Pane{Session: "a", PaneID: "%2", PID: 11}
	other := Pane{Session: "b", PaneID: "%3", PID: 10}
	garbled := Pane{Session: "a", PaneID: "%4", PID: 10, Err: errTest}
	tests := []struct {
		name    string
		panes   []Pane
		session string
		pid     int
		want    string // pane id; "" = not found
	}{
		{"the agent's pane, listed after a split one", []Pane{split, agent}, "a", 10, "%1"},
		{"not the first pane", []Pane{split, agent}, "a", 11, "%2"},
		{"same pid in another session", []Pane{other}, "a", 10, ""},
		{"garbled row is not trusted", []Pane{garbled}, "a", 10, ""},
		{"pid 0 matches nothing", []Pane{{Session: "a", PaneID: "%5"}}, "a", 0, ""},
		{"none", nil, "a", 10, ""},
	}
	for _, tt := range tests {
		p, ok := FindPane(tt.panes, tt.session, tt.pid)
		if ok != (tt.want != "") || p.PaneID != tt.want {
			t.Errorf("[%s] expected %q … got %q, %v", tt.name, tt.want, p.PaneID, ok)
		}
	}
}
