package e2e

import (
	"os"
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
	browser := newConsoleBrowser(t)
	a := startRealAgent(t, herd.AgentGemini, gemini)
	inbox := consoleInbox(t, a.base, a.e.dir)
	browse(t, browser, "login", 15*time.Second, chromedp.Navigate(a.link), chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#fleet")))
	clickApproval(t, a, browser, inbox, approval{
		agent:  herd.AgentGemini,
		prompt: "run the " + mockapi.TriggerTool,
		dialog: "Allow execution",
		yes:    "Allow once",
		dir:    a.proj,
		// Its options are drawn in a box (│ ● 1. Allow once │).
		hookOnly: true,
	})
}
