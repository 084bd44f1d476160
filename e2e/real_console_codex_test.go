package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
	"herd/internal/mockapi"
	webinbox "herd/internal/web/inbox"
)

// TestRealCodexConsole is TestRealClaudeConsole with the real Codex
// (HERD_REAL_CODEX): on-request approvals, and the mock's escalated shell
// call (touch tool-ran) makes it ask. Its startup dialogs (trust, hooks
// review) are answered at the pane; the approval by a click in chromium. The mock must get the call's output back, the file be
// made, the inbox empty, and the answer be an answered event naming the
// browser.
func TestRealCodexConsole(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	browser := newConsoleBrowser(t)
	a := startRealAgent(t, herd.AgentCodex, codex)
	inbox := consoleInbox(t, a.base, a.e.dir)
	browse(t, browser, "login", 15*time.Second, chromedp.Navigate(a.link), chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#fleet")))
	clickApproval(t, a, browser, inbox, approval{
		agent:  herd.AgentCodex,
		prompt: "run the " + mockapi.TriggerTool + " " + mockapi.TriggerEscalate, // the mock's escalated shell call
		dialog: "Would you like to run",
		yes:    "Yes, proceed",
		dir:    a.proj,
	})
}

// approval is what clickApproval needs to know of an agent's dialog.
type approval struct {
	agent  string // the agent kind
	prompt string // what makes the mock call the shell tool (ToolCommand)
	dialog string // words the dialog shows on screen
	yes    string // the label the approving option starts with
	dir    string // where the command runs
	// hookOnly: herd does not read this dialog from the screen yet (a
	// box drawn around its options), so the inbox shows the hook's tool
	// and herd's usual options; the loop is checked all the same.
	hookOnly bool
}

// clickApproval types a's prompt into session name, waits for the inbox
// API to list its dialog as a permission with ToolCommand and the
// dialog's own options, clicks the approving option in the browser, and
// checks the tool's output reached the mock, the marker file was made,
// the item left the inbox and the answer is an answered event naming the
// browser. It logs the timings.
func clickApproval(t *testing.T, ag *realAgent, browser context.Context, inbox func() []webinbox.Item, a approval) {
	t.Helper()
	const command = mockapi.ToolCommand
	e, mock, name := ag.e, ag.mock, ag.name
	onScreen := e.watchPane(name, a.dialog)
	ag.submit(a.prompt)
	var item webinbox.Item
	var inboxAt time.Time
	seen := ""
	e.waitFor("the approval in the inbox", 60*time.Second, func() bool {
		for _, it := range inbox() {
			if it.Session != name {
				continue
			}
			if s := fmt.Sprintf("%s %q %v", it.Kind, it.Text, it.Options); s != seen {
				seen = s
				t.Logf("inbox lists %s", s)
			}
			if it.Kind == webinbox.KindPermission && (a.hookOnly || strings.Contains(it.Text, command)) {
				item, inboxAt = it, time.Now()
				return true
			}
		}
		return false
	})
	screen := e.capture(name)
	var screenAt time.Time
	select {
	case screenAt = <-onScreen:
	case <-time.After(5 * time.Second):
		t.Fatalf("[screen] expected the approval on the screen the inbox read:\n%s", screen)
	}
	t.Logf("inbox item: %q, options %v", item.Text, item.Options)
	t.Logf("latency: approval on screen (pane polled every 20ms) -> listed by GET /api/v1/inbox (polled): %s", inboxAt.Sub(screenAt).Round(time.Millisecond))
	switch {
	case a.hookOnly:
		t.Logf("the dialog is not read from the screen: the inbox shows %q with herd's usual options", item.Text)
	case slices.Equal(item.Options, webinbox.DefaultOptions(a.agent, webinbox.KindPermission)):
		t.Errorf("[inbox] expected the dialog's options read from the screen, got %v", item.Options)
	}
	yes := ""
	for _, o := range item.Options {
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(o.Label, o.Key+".")), a.yes) {
			yes = o.Key
		}
	}
	if yes == "" {
		t.Fatalf("[inbox] expected a %q option, got %v", a.yes, item.Options)
	}

	button := fmt.Sprintf(`.item[data-session=%q] button[data-key=%q]`, name, yes)
	shows := command
	if a.hookOnly {
		shows = item.Text
	}
	words := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e !== null && e.textContent.includes(%q); })()`,
		fmt.Sprintf(`.item[data-session=%q] .item-text`, name), shows)
	browse(t, browser, "the item in the page", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(button)),
		chromedp.Poll[chromedp.Void](words, chromedp.WithPollingInterval(20*time.Millisecond)))
	t.Logf("latency: approval on screen -> its item shown in the browser: %s", time.Since(screenAt).Round(time.Millisecond))
	clickAt := time.Now()
	browse(t, browser, "click "+a.yes, 15*time.Second, chromedp.Click(chromedp.CSS(button)))

	var result mockapi.ToolResult
	var resultAt time.Time
	e.waitFor("the tool output at the API", 60*time.Second, func() bool {
		// The output for the call (Gemini CLI names no call id: the
		// first output after it).
		toolID, seen := "", false
		for _, r := range mock.Records() {
			if r.Tool && !seen {
				toolID, seen = r.ToolID, true
				continue
			}
			for _, x := range r.Results {
				if seen && (toolID == "" || x.ToolUseID == toolID) {
					result, resultAt = x, r.Time
					return true
				}
			}
		}
		return false
	})
	t.Logf("latency: click -> tool output at the API: %s", resultAt.Sub(clickAt).Round(time.Millisecond))
	t.Logf("tool output: %+v", result)
	if _, err := os.Stat(filepath.Join(a.dir, mockapi.ToolMarker)); err != nil {
		t.Errorf("[tool] expected %s made by the approved command: %v", mockapi.ToolMarker, err)
	}
	e.waitFor("the inbox empty", 30*time.Second, func() bool {
		return !slices.ContainsFunc(inbox(), func(it webinbox.Item) bool { return it.Session == name && it.Kind == webinbox.KindPermission })
	})
	t.Logf("herd events --kind answered:\n%s", e.must("events", "--kind", herd.EventAnswered))
	evs := e.events("--session", name, "--kind", herd.EventAnswered)
	if !slices.ContainsFunc(evs, func(ev herd.Event) bool {
		return ev.Reason == webinbox.KindPermission && ev.Data["option"] == yes && strings.Contains(ev.Message, "answered by browser:")
	}) {
		t.Errorf("[events] expected the approval answered by the browser, got %+v", evs)
	}
}

// chooseOption moves a dialog's selection to the option whose label
// starts with label and confirms it.
func (e *env) chooseOption(name, marker, label string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var lastKey time.Time
	for time.Now().Before(deadline) {
		s := e.capture(name)
		if !strings.Contains(s, marker) {
			return
		}
		sel, want := -1, -1
		for i, l := range strings.Split(s, "\n") {
			text := strings.TrimSpace(strings.ReplaceAll(l, "\u00a0", " "))
			selected := strings.HasPrefix(text, "›") || strings.HasPrefix(text, "❯")
			text = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(strings.TrimLeft(text, "›❯")), "0123456789."))
			if selected && text != "" {
				sel = i
			}
			if want < 0 && strings.HasPrefix(text, label) {
				want = i
			}
		}
		if sel >= 0 && want >= 0 && time.Since(lastKey) > 1500*time.Millisecond {
			switch {
			case sel == want:
				e.keys(name, "Enter")
			case sel < want:
				e.keys(name, "Down")
			default:
				e.keys(name, "Up")
			}
			lastKey = time.Now()
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	e.t.Fatalf("could not choose %q in %q:\n%s", label, marker, e.capture(name))
}
