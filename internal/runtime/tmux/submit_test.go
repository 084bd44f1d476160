package tmux

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/agents"
	"herd/internal/runtime"
)

// envInputAgent makes the test binary an input-line agent that behaves
// like Gemini CLI's: an Enter read within fastReturn of a typed key is a
// newline in the input, a later one submits the line, written to the
// file the variable names, one per line; C-u empties the line. envInputMode "deaf" ignores
// every Enter.
const (
	envInputAgent = "HERD_TEST_TMUX_INPUT_AGENT"
	envInputMode  = "HERD_TEST_TMUX_INPUT_MODE"
	fastReturn    = 30 * time.Millisecond
)

// runInputAgent reads keys from its raw terminal and draws its history
// and its input line (prompt "> ") after each one.
func runInputAgent(path, mode string) {
	if t, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
		t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG
		t.Iflag &^= unix.ICRNL
		_ = unix.IoctlSetTermios(0, unix.TCSETS, t)
	}
	var history []string
	var line []byte
	var last time.Time
	draw := func() {
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J")
		for _, h := range history {
			b.WriteString(h + "\r\n")
		}
		for i, l := range strings.Split(string(line), "\n") {
			if i == 0 {
				b.WriteString("> " + l)
			} else {
				b.WriteString("\r\n  " + l)
			}
		}
		os.Stdout.WriteString(b.String())
	}
	draw()
	buf := make([]byte, 256)
	for {
		n, err := os.Stdin.Read(buf)
		if err != nil {
			return
		}
		for _, c := range buf[:n] {
			now := time.Now()
			switch {
			case c == 0x15: // C-u: empty the line; no typed key
				line = line[:0]
			case c != '\r':
				line = append(line, c)
				last = now
			case mode == "deaf":
			case now.Sub(last) <= fastReturn:
				line = append(line, '\n') // a newline, typed like a key
				last = now
			default:
				history = append(history, "sent: "+string(line))
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
				if err == nil {
					fmt.Fprintf(f, "%q\n", line)
					_ = f.Close()
				}
				line = line[:0]
			}
		}
		draw()
	}
}

// startInputAgent starts the input-line agent in session name and
// returns the runtime, the incarnation that names its pane, and the file
// of submitted lines.
func startInputAgent(t *testing.T, c *Client, name, mode string) (*Runtime, herd.Incarnation, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "sent")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envInputAgent: out, envInputMode: mode}
	if _, err := c.NewSession(ctxT(t), name, dir, env, []string{self}); err != nil {
		t.Fatalf("new session: %v", err)
	}
	var p Pane
	poll(t, "the agent's prompt", func() bool {
		var ok bool
		p, ok = findPane(t, c, name)
		if !ok {
			return false
		}
		s, err := c.CapturePane(ctxT(t), p.PaneID, 0)
		return err == nil && bytes.HasPrefix(s, []byte("> "))
	})
	return New(c), herd.Incarnation{Session: name, Root: herd.Identity{PID: p.PID}}, out
}

// geminiSubmit is how verbs.Inject submits to Gemini CLI.
func geminiSubmit(text string) runtime.Submit {
	return runtime.Submit{
		Settle: agents.SubmitSettle(herd.AgentGemini),
		Holds:  func(s string) (bool, bool) { return agents.InputHolds(herd.AgentGemini, s, text) },
	}
}

// TestInjectSubmitsPastFastReturn: on an agent that makes an early Enter
// a newline, every inject is submitted once, whole, with no newline in
// it, at the first Enter.
func TestInjectSubmitsPastFastReturn(t *testing.T) {
	c := newClient(t)
	r, inc, out := startInputAgent(t, c, "fast", "")
	var want []string
	for i := range 8 {
		text := fmt.Sprintf("prompt number %d -- with flags", i)
		start := time.Now()
		if err := r.InjectCleared(ctxT(t), inc, []string{"C-u"}, text, true, geminiSubmit(text)); err != nil {
			t.Fatalf("[inject %d] expected it submitted, got %v", i, err)
		}
		// One press: a second would have waited out sentWait first.
		if d := time.Since(start); d >= sentWait {
			t.Errorf("[inject %d] expected one Enter, took %v", i, d)
		}
		want = append(want, fmt.Sprintf("%q", text))
	}
	got := readFileEventually(t, out, func(b []byte) bool { return bytes.Count(b, []byte("\n")) >= len(want) })
	if g := strings.Split(strings.TrimSpace(string(got)), "\n"); strings.Join(g, "|") != strings.Join(want, "|") {
		t.Errorf("expected submitted %q, got %q", want, g)
	}
}

// TestInjectPressesEnterAgain: an Enter the agent made a newline (no
// settle) is followed by one more, which submits.
func TestInjectPressesEnterAgain(t *testing.T) {
	c := newClient(t)
	r, inc, out := startInputAgent(t, c, "again", "")
	text := "submitted at the second press"
	sub := geminiSubmit(text)
	sub.Settle = 0
	if err := r.InjectCleared(ctxT(t), inc, nil, text, true, sub); err != nil {
		t.Fatalf("expected it submitted, got %v", err)
	}
	got := readFileEventually(t, out, func(b []byte) bool { return len(b) > 0 })
	if s := strings.TrimSpace(string(got)); s != fmt.Sprintf("%q", text) && s != fmt.Sprintf("%q", text+"\n") {
		t.Errorf("expected %q submitted once, got %s", text, got)
	}
}

// TestInjectNotSubmitted: an agent that never takes Enter gets two, and
// the inject says it failed.
func TestInjectNotSubmitted(t *testing.T) {
	c := newClient(t)
	r, inc, out := startInputAgent(t, c, "deaf", "deaf")
	text := "this never leaves the input line"
	err := r.InjectCleared(ctxT(t), inc, nil, text, true, geminiSubmit(text))
	if !errors.Is(err, runtime.ErrNotSubmitted) || !strings.Contains(err.Error(), "pressed 2 times") {
		t.Fatalf("expected ErrNotSubmitted after 2 presses, got %v", err)
	}
	if b, err := os.ReadFile(out); err == nil && len(b) > 0 {
		t.Errorf("expected nothing submitted, got %s", b)
	}
}
