package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
	"herd/internal/mockapi"
	"herd/internal/web"
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
	hasTmux(t)
	version, _ := exec.Command(codex, "--version").Output()
	t.Logf("codex: %s (%s)", strings.TrimSpace(string(version)), codex)
	browser := newConsoleBrowser(t)

	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	mock := mockapi.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})

	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{filepath.Join(home, ".codex"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), fmt.Appendf(nil, `model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "http://%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fastRestart+"[web]\nlisten = \"127.0.0.1:0\"\n")
	e.start()
	const name = "codex-0"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of %s:\n%s\nmock records: %+v", name, e.capture(name), mock.Records())
		}
		// Codex and the app-server it starts outlive the daemon: end
		// them, and wait, so nothing writes into root once it is removed.
		_ = exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			pids := e.agentPIDs()
			if len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	})
	e.must("hooks", "install", "--agent", herd.AgentCodex, "--dir", proj)
	roles := filepath.Join(root, "roles.toml")
	if err := os.WriteFile(roles, fmt.Appendf(nil, `[[role]]
name = "codex"
command = [%q, "-a", "on-request", "-s", "read-only"]
workdir = %q
env = { HOME = %q, MOCK_API_KEY = "mock", TERM = "xterm-256color", LANG = "C.UTF-8" }
`, codex, proj, home), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	e.eventsOf(name, herd.EventSpawned, 1)

	link := strings.TrimSpace(e.must("web", "url"))
	base, _, ok := strings.Cut(link, "/login")
	if !ok {
		t.Fatalf("[web url] expected a login link, got %q", link)
	}
	inbox := consoleInbox(t, base, e.dir)

	// The startup dialogs, answered at the pane: a digit sent by the
	// console selects an option of Codex's trust dialog without
	// confirming it.
	for _, d := range [][2]string{{"Trust this folder?", "Trust and continue"}, {"Hooks need review", "Trust all and continue"}} {
		e.waitFor(name+" at "+d[0], 60*time.Second, func() bool { return strings.Contains(e.capture(name), d[0]) })
		e.chooseOption(name, d[0], d[1])
	}
	e.waitFor(name+" idle at its prompt", 60*time.Second, func() bool {
		v, _ := e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	browse(t, browser, "login", 15*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#fleet")))

	// The prompt: the mock answers with the escalated shell call.
	const command = mockapi.ToolCommand
	onScreen := e.watchPane(name, "Would you like to run")
	e.typeLine(name, "run the "+mockapi.TriggerTool+" "+mockapi.TriggerEscalate)
	var item web.Item
	var inboxAt time.Time
	e.waitFor("the approval in the inbox", 90*time.Second, func() bool {
		for _, it := range inbox() {
			if it.Session == name && it.Kind == web.KindPermission && strings.Contains(it.Text, command) {
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
	t.Logf("latency: approval on screen (pane polled every 20ms) -> listed with its command by GET /api/v1/inbox (polled): %s", inboxAt.Sub(screenAt).Round(time.Millisecond))
	if slices.Equal(item.Options, web.DefaultOptions(herd.AgentCodex, web.KindPermission)) {
		t.Errorf("[inbox] expected the dialog's options read from the screen, got %v", item.Options)
	}
	yes := ""
	for _, o := range item.Options {
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(o.Label, o.Key+".")), "Yes, proceed") {
			yes = o.Key
		}
	}
	if yes == "" {
		t.Fatalf("[inbox] expected a %q option, got %v", "Yes, proceed", item.Options)
	}

	button := fmt.Sprintf(`.item[data-session=%q] button[data-key=%q]`, name, yes)
	words := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e !== null && e.textContent.includes(%q); })()`,
		fmt.Sprintf(`.item[data-session=%q] .item-text`, name), command)
	browse(t, browser, "the item in the page", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(button)),
		chromedp.Poll[chromedp.Void](words, chromedp.WithPollingInterval(20*time.Millisecond)))
	t.Logf("latency: approval on screen -> shown with its command in the browser: %s", time.Since(screenAt).Round(time.Millisecond))
	clickAt := time.Now()
	browse(t, browser, "click Yes, proceed", 15*time.Second, chromedp.Click(chromedp.CSS(button)))

	var result mockapi.ToolResult
	var resultAt time.Time
	e.waitFor("the tool output at the API", 60*time.Second, func() bool {
		toolID := ""
		for _, r := range mock.Records() {
			if r.Tool && toolID == "" {
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
	t.Logf("latency: click -> tool output at the API: %s", resultAt.Sub(clickAt).Round(time.Millisecond))
	t.Logf("tool output: %+v", result)
	if _, err := os.Stat(filepath.Join(proj, mockapi.ToolMarker)); err != nil {
		t.Errorf("[tool] expected %s made by the approved command: %v", mockapi.ToolMarker, err)
	}
	e.waitFor("the inbox empty", 30*time.Second, func() bool {
		return !slices.ContainsFunc(inbox(), func(it web.Item) bool { return it.Session == name && it.Kind == web.KindPermission })
	})
	t.Logf("herd events --kind answered:\n%s", e.must("events", "--kind", herd.EventAnswered))
	evs := e.events("--session", name, "--kind", herd.EventAnswered)
	if !slices.ContainsFunc(evs, func(ev herd.Event) bool {
		return ev.Reason == web.KindPermission && ev.Data["option"] == yes && strings.Contains(ev.Message, "answered by browser:")
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
