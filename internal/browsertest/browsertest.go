// Package browsertest starts the headless chromium that the console's
// tests drive (chromedp), with the flags this kind of machine needs, and
// runs browser steps with a deadline. Tests call it; it never runs in herd.
package browsertest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/internal/testenv"
)

// Install says how to get the browser.
const Install = "chromium (apt-get install chromium; scripts/test.sh installs it)"

// Start starts a headless chromium with a fresh profile, gone with t; why
// says what needs it, for the skip (or, under CI, the failure) when no
// chromium is installed.
func Start(t *testing.T, why string) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Require(t, "chromium", why, Install)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// No connection of its own: this machine's network is closed.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil {
		cancelB()
		cancelA()
		t.Fatalf("chromium: %v", err)
	}
	t.Cleanup(func() { cancelB(); cancelA() })
	return ctx
}

// Do runs steps within d, failing t with what on an error.
func Do(t *testing.T, ctx context.Context, what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("[%s] %v", what, err)
	}
}
