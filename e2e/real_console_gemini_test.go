package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
	"herd/internal/mockapi"
)

// TestRealGeminiConsole is TestRealCodexConsole with the real Gemini CLI
// (HERD_REAL_GEMINI): the mock's shell call (touch tool-ran) makes it ask,
// and a click on "Allow once" in chromium answers. The console does not
// read Gemini CLI's boxed dialog from the screen yet: the inbox item is
// the hook's (the tool's name, herd's usual options), and the test says so.
func TestRealGeminiConsole(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	version, _ := exec.Command(gemini, "--version").Output()
	t.Logf("gemini: %s (%s)", strings.TrimSpace(string(version)), gemini)
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
	for _, d := range []string{filepath.Join(home, ".gemini"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"security": {"auth": {"selectedType": "gemini-api-key"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fastRestart+"[web]\nlisten = \"127.0.0.1:0\"\n")
	e.start()
	const name = "gemini-0"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of %s:\n%s\nmock records: %+v", name, e.capture(name), mock.Records())
		}
		// Gemini CLI relaunches itself as a child that outlives the pane:
		// end it, and wait, so nothing writes into root once it is removed.
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
	e.must("hooks", "install", "--agent", herd.AgentGemini, "--dir", proj)
	roles := filepath.Join(root, "roles.toml")
	// The folder trusted up front: the trust dialog is not what this is
	// about, and herd's hooks load from a trusted folder's settings only.
	if err := os.WriteFile(roles, fmt.Appendf(nil, `[[role]]
name = "gemini"
command = [%q, "-m", "gemini-2.5-flash"]
workdir = %q
env = { HOME = %q, GEMINI_API_KEY = "mock", GOOGLE_GEMINI_BASE_URL = %q, GEMINI_CLI_TRUST_WORKSPACE = "true", TERM = "xterm-256color", LANG = "C.UTF-8" }
`, gemini, proj, home, "http://"+ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	e.eventsOf(name, herd.EventSpawned, 1)
	e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
		v, _ := e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})

	link := strings.TrimSpace(e.must("web", "url"))
	base, _, ok := strings.Cut(link, "/login")
	if !ok {
		t.Fatalf("[web url] expected a login link, got %q", link)
	}
	inbox := consoleInbox(t, base, e.dir)
	browse(t, browser, "login", 15*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#fleet")))
	clickApproval(t, e, browser, mock, inbox, name, approval{
		agent:  herd.AgentGemini,
		prompt: "run the " + mockapi.TriggerTool,
		dialog: "Allow execution",
		yes:    "Allow once",
		dir:    proj,
		// Its options are drawn in a box (│ ● 1. Allow once │).
		hookOnly: true,
	})
}
