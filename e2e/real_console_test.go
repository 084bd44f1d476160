package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
	"herd/internal/browsertest"
	"herd/internal/mockapi"
	"herd/internal/web/auth"
	webinbox "herd/internal/web/inbox"
)

// consoleTrigger starts the mock's scripted conversation: one Bash call.
const consoleTrigger = "herd-console"

// consoleMarker is what the scripted command prints (and writes to a
// file of the project); the tool's result carries it back to the API.
const consoleMarker = "herd-console-ok"

// TestRealClaudeConsole closes the console's loop with the real Claude
// Code (HERD_REAL_CLAUDE; scripts/real-agents.sh installs one) under the
// daemon, its console on a private loopback port: the mock API, scripted,
// has Claude call Bash (echo herd-console-ok | tee a file), so Claude
// shows its permission dialog. The console's inbox (GET /api/v1/inbox,
// bearer token) lists it as a permission, with the command and the
// dialog's own answers read from the screen; a headless chromium, logged
// in through `herd web url`, clicks its "Yes"; the mock must then get the
// tool's result holding what the command printed, the inbox empty, and
// the answer be an answered event naming the browser and its address. It
// logs how long the dialog took to reach the inbox API and the page, and
// the click to reach the API as a tool result.
func TestRealClaudeConsole(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	browser := newConsoleBrowser(t)
	a := startRealAgent(t, herd.AgentClaude, claude)
	e, mock, name, link := a.e, a.mock, a.name, a.link
	// Harmless, and not read-only: Claude Code runs echo alone unasked,
	// and asks before a command writes a file.
	const command = "echo " + consoleMarker + " | tee console-ok.txt"
	mock.Script(consoleTrigger, []mockapi.ToolCall{
		{Name: "Bash", Input: map[string]any{"command": command, "description": "Print the console's marker"}},
	})

	// Log in as a person would: the link `herd web url` prints.
	inbox := consoleInbox(t, a.base, e.dir)
	browse(t, browser, "login", 15*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#fleet")))

	// The prompt: the mock answers with the Bash call, Claude asks. The
	// pane, the inbox API and the page are watched side by side, each on
	// its own, for when each shows the dialog.
	const dialog = "Do you want to proceed?"
	onScreen := e.watchPane(name, dialog)
	// The page: the item with its answers, then with the dialog's words.
	inPage, withWords := make(chan time.Time, 1), make(chan time.Time, 1)
	go func() {
		defer close(withWords)
		defer close(inPage)
		ctx, cancel := context.WithTimeout(browser, 90*time.Second)
		defer cancel()
		if chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`.item[data-session=%q] button.option`, name)))) != nil {
			return
		}
		inPage <- time.Now()
		words := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e !== null && e.textContent.includes(%q); })()`,
			fmt.Sprintf(`.item[data-session=%q] .item-text`, name), command)
		if chromedp.Do(ctx, chromedp.Poll[chromedp.Void](words, chromedp.WithPollingInterval(20*time.Millisecond))) == nil {
			withWords <- time.Now()
		}
	}()
	e.typeLine(name, consoleTrigger+": print the marker")
	var item webinbox.Item
	var listedAt, inboxAt time.Time
	e.waitFor("the permission dialog in the inbox", 90*time.Second, func() bool {
		for _, it := range inbox() {
			if it.Session != name || it.Kind != webinbox.KindPermission {
				continue
			}
			if listedAt.IsZero() {
				listedAt = time.Now()
				t.Logf("inbox, first listed: %q, options %v", it.Text, it.Options)
			}
			if strings.Contains(it.Text, command) {
				item, inboxAt = it, time.Now()
				return true
			}
		}
		return false
	})
	screen := e.capture(name)
	shownAt, ok := <-inPage
	if !ok {
		t.Fatalf("[browser] expected the item shown in the page")
	}
	wordsAt, ok := <-withWords
	if !ok {
		t.Fatalf("[browser] expected the item shown in the page with the command %q", command)
	}
	var screenAt time.Time
	select {
	case screenAt = <-onScreen:
	case <-time.After(5 * time.Second):
		t.Fatalf("[screen] expected %q on the screen the inbox read:\n%s", dialog, screen)
	}
	t.Logf("inbox item: %q, options %v", item.Text, item.Options)
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	t.Logf("latency from the permission dialog on screen (pane polled every 20ms): listed by GET /api/v1/inbox (polled) %s, with the dialog's words %s; "+
		"an item with answers shown in the browser %s, with the dialog's words %s", ms(listedAt.Sub(screenAt)), ms(inboxAt.Sub(screenAt)), ms(shownAt.Sub(screenAt)), ms(wordsAt.Sub(screenAt)))
	// The answers are the dialog's own, read from the screen, not the
	// ones herd assumes when it cannot read it.
	if len(item.Options) < 2 || slices.Equal(item.Options, webinbox.DefaultOptions(herd.AgentClaude, webinbox.KindPermission)) {
		t.Errorf("[inbox] expected the dialog's options read from the screen, got %v", item.Options)
	}
	flat := strings.ReplaceAll(screen, "\u00a0", " ")
	yes := ""
	for _, o := range item.Options {
		label := strings.TrimSpace(strings.TrimPrefix(o.Label, o.Key+"."))
		if !strings.Contains(flat, label) {
			t.Errorf("[inbox] expected option %q on the screen:\n%s", o.Label, screen)
		}
		if label == "Yes" {
			yes = o.Key
		}
	}
	if yes == "" {
		t.Fatalf("[inbox] expected a %q option, got %v", "Yes", item.Options)
	}

	// The click: the "Yes" button of the item, in the browser.
	button := fmt.Sprintf(`.item[data-session=%q] button[data-key=%q]`, name, yes)
	if got := browserText(t, browser, button); strings.TrimSpace(strings.TrimPrefix(got, yes+".")) != "Yes" {
		t.Fatalf("[browser] expected the button %q, got %q", "Yes", got)
	}
	clickAt := time.Now()
	browse(t, browser, "click Yes", 15*time.Second, chromedp.Click(chromedp.CSS(button)))

	// The tool ran and its result reached the API.
	var result mockapi.ToolResult
	var resultAt time.Time
	toolID := ""
	e.waitFor("the tool result at the API", 60*time.Second, func() bool {
		for _, r := range mock.Records() {
			if r.ToolName == "Bash" && toolID == "" {
				toolID = r.ToolID
			}
			for _, x := range r.Results {
				if toolID != "" && x.ToolUseID == toolID {
					result, resultAt = x, r.Time
					return true
				}
			}
		}
		return false
	})
	t.Logf("latency: click on Yes -> tool result at the API: %s", resultAt.Sub(clickAt).Round(time.Millisecond))
	t.Logf("tool result: %+v", result)
	if result.IsError || !strings.Contains(result.Text, consoleMarker) {
		t.Errorf("[tool result] expected the output of %q, no error, got %+v", command, result)
	}

	// The item is gone: from the API and from the page.
	e.waitFor("the inbox empty", 30*time.Second, func() bool {
		return !slices.ContainsFunc(inbox(), func(it webinbox.Item) bool { return it.Session == name })
	})
	browse(t, browser, "the item gone from the page", 15*time.Second, chromedp.WaitNotPresent(chromedp.CSS(fmt.Sprintf(`.item[data-session=%q]`, name))))

	// The answer is on record: who, from where, what.
	t.Logf("herd events --kind answered:\n%s", e.must("events", "--kind", herd.EventAnswered))
	evs := e.events("--session", name, "--kind", herd.EventAnswered)
	if len(evs) != 1 {
		t.Fatalf("[events] expected one answered event, got %+v", evs)
	}
	ev := evs[0]
	if !strings.Contains(ev.Message, "answered by browser:") || !strings.Contains(ev.Message, " from 127.0.0.1:") ||
		ev.Data["option"] != yes || ev.Reason != webinbox.KindPermission || !strings.Contains(fmt.Sprint(ev.Data["question"]), command) {
		t.Errorf("[events] expected the answer by the browser from loopback, option %s to the permission, got %s %s %v", yes, ev.Reason, ev.Message, ev.Data)
	}
	e.waitIdle(name)
}

// watchPane polls session name's pane every 20ms, apart from the test's
// other waits, and sends when it first shows marker.
func (e *env) watchPane(name, marker string) <-chan time.Time {
	at := make(chan time.Time, 1)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if strings.Contains(e.capture(name), marker) {
				at <- time.Now()
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // polling interval
			}
		}
	}()
	e.t.Cleanup(func() { close(stop); <-done })
	return at
}

// consoleInbox returns a reader of the console's inbox through its API,
// authenticated with the state dir's token, as a script would.
func consoleInbox(t *testing.T, base, stateDir string) func() []webinbox.Item {
	t.Helper()
	tok := consoleToken(t, stateDir)
	client := &http.Client{Timeout: 10 * time.Second}
	return func() []webinbox.Item {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/api/v1/inbox", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("[inbox] %v", err)
		}
		defer resp.Body.Close()
		var items []webinbox.Item
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("[inbox] expected 200, got %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&items); err != nil {
			t.Fatalf("[inbox] %v", err)
		}
		return items
	}
}

// consoleToken is the console's bearer token of the state dir.
func consoleToken(t *testing.T, stateDir string) string {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(stateDir, auth.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(tok))
}

// newConsoleBrowser starts a headless chromium for the test (the flags
// internal/web's browser test runs it with).
func newConsoleBrowser(t *testing.T) context.Context {
	return browsertest.Start(t, "the console is clicked in a real headless browser")
}

// browse runs browser steps with a deadline.
func browse(t *testing.T, ctx context.Context, what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browsertest.Do(t, ctx, what, d, steps...)
}

// browserText is the text of the element sel names.
func browserText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("[%s] %v", sel, err)
	}
	return s
}
