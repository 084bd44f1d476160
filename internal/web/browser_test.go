package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
	"herd/internal/api"
	"herd/internal/browsertest"
	"herd/internal/config"
	"herd/internal/daemon"
	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/testenv"
	"herd/internal/web"
	"herd/internal/web/auth"
)

// herdBin is the herd binary the simulated agents run (`herd sim`).
var herdBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := exec.LookPath("chromium"); err == nil {
		dir, err := os.MkdirTemp("", "herd-web-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		herdBin = filepath.Join(dir, "herd")
		out, err := exec.Command("go", "build", "-o", herdBin, "herd/cmd/herd").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build herd: %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

// fleet is a daemon with its console, for a browser to drive.
type fleet struct {
	t      *testing.T
	dir    string
	d      *daemon.Daemon
	st     store.Store
	client *api.Client
	tmux   string
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Require(t, "tmux", "the console's browser test runs its agents in tmux panes", testenv.InstallTmux)
	}
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Daemon.Host = "web-test"
	cfg.Tmux.Socket = fmt.Sprintf("herd-web-%d", os.Getpid())
	cfg.Probe.Interval = 200 * time.Millisecond
	cfg.Probe.Timeout = time.Second
	cfg.Web.Listen = "127.0.0.1:0"
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{StateDir: dir, Config: cfg, Store: st, Logger: slog.New(slog.NewTextHandler(logf, nil)),
		StopGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", daemon.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, ln)
	}()
	f := &fleet{t: t, dir: dir, d: d, st: st, client: api.NewClient(daemon.SocketPath(dir)), tmux: cfg.Tmux.Socket}
	t.Cleanup(func() {
		cancel()
		<-done
		exec.Command("tmux", "-L", f.tmux, "kill-server").Run()
		st.Close()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
			t.Logf("daemon log:\n%s", b)
		}
	})
	return f
}

// link asks the daemon, as `herd web url` does, for a login link.
func (f *fleet) link(next string) string { return f.linkScope(next, false) }

// linkScope is link, read-only when asked.
func (f *fleet) linkScope(next string, readOnly bool) string {
	f.t.Helper()
	var res web.LinkResult
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f.client.Do(context.Background(), http.MethodPost, web.LinkPath, nil, web.LinkRequest{Next: next, ReadOnly: readOnly}, &res)
		if err == nil {
			return res.URL
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("[link] expected a login link … got %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// role declares a one-replica tmux role running argv.
func (f *fleet) role(name, agent string, argv ...string) {
	f.t.Helper()
	r := herd.Role{Name: name, Replicas: 1, Command: argv, Workdir: f.dir, Runtime: herd.RuntimeTmux, Agent: agent,
		AgentProcess: filepath.Base(argv[0]), Restart: herd.RestartPolicy{Policy: herd.PolicyNever}}
	if err := f.d.ApplyRoles(context.Background(), []herd.Role{r}); err != nil {
		f.t.Fatal(err)
	}
}

// consoleEvents counts the console's events of session.
func (f *fleet) events(session, kind string) []herd.Event {
	var evs []herd.Event
	f.st.View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: session, Kind: kind})
		return err
	})
	return evs
}

// newBrowser starts one headless chromium for the test.
func newBrowser(t *testing.T) context.Context {
	return browsertest.Start(t, "the console's tests drive a real headless browser")
}

// do runs steps with a deadline.
func do(t *testing.T, ctx context.Context, what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browsertest.Do(t, ctx, what, d, steps...)
}

// get runs one action with a deadline and returns its value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("[%s] %v", what, err)
	}
	return v
}

// logIn opens a login link and clicks the "Log in" button of its page
// (the link's GET spends nothing; the button's POST does).
func logIn(link string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Navigate(link), visible("#login"), chromedp.Click(chromedp.CSS("#login")))
}

// until polls a predicate in the page.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
}

// visible waits for a CSS selector to be visible.
func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// screenshot writes a PNG of the page to docs/ when HERD_SCREENSHOTS is
// set (the docs' pictures are made with it).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("HERD_SCREENSHOTS") == "" {
		return
	}
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join("..", "..", "docs", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser drives the console in a real chromium: log in through a
// link, watch a session appear live, answer a permission prompt with a
// click, see an agent's hostile output shown as text, refuse a
// cross-origin POST, and render the inbox on a phone.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	f := startFleet(t)

	// Log in through the link `herd web url` prints.
	link := f.link("/")
	do(t, ctx, "login", 15*time.Second, logIn(link), visible("#fleet"), visible("#live.on"))
	if who := get(t, ctx, "scope", chromedp.Text(chromedp.CSS("#scope"))); who != "operate" {
		t.Fatalf("[login] expected the operate scope … got %q", who)
	}
	base := strings.SplitN(link, "/login", 2)[0]

	// A session appears live (no reload).
	f.role("asker", herd.AgentGeneric, herdBin, "sim", "--interval", "200ms", "--quiet", "--wait-input",
		"--hooks", "SessionStart,UserPromptSubmit,PreToolUse:Bash,PermissionRequest:Bash")
	do(t, ctx, "session appears", 15*time.Second, visible(`#fleet tr[data-session="asker-0"]`))

	// A worker that works, and one that fails (the inbox lists it too).
	f.role("worker", herd.AgentGeneric, herdBin, "sim", "--interval", "500ms", "--hooks", "SessionStart,UserPromptSubmit,PreToolUse:Bash,PostToolUse:Bash")
	f.role("broken", herd.AgentGeneric, "/bin/sh", "-c", "echo 'cannot reach the repository' >&2; exit 3")

	// It asks for permission: the inbox shows it with its answers.
	item := `.item[data-session="asker-0"]`
	do(t, ctx, "inbox item", 20*time.Second, visible(item+` button[data-key="1"]`), visible(`.item[data-session="broken-0"]`),
		visible(`#fleet tr[data-session="worker-0"]`))
	if text := get(t, ctx, "item text", chromedp.Text(chromedp.CSS(item+" .item-text"))); !strings.Contains(text, "Bash") {
		t.Errorf("[inbox] expected the tool asked for … got %q", text)
	}
	screenshot(t, ctx, "console-desktop.png")

	// The same inbox on a phone.
	do(t, ctx, "phone", 15*time.Second,
		chromedp.EmulateViewport(375, 812, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulatePortrait),
		chromedp.Reload(), visible(item+` button[data-key="1"]`))
	if get(t, ctx, "phone width", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > 375`)) {
		t.Errorf("[phone] expected the page to fit 375 px … it scrolls sideways")
	}
	screenshot(t, ctx, "console-phone.png")
	do(t, ctx, "desktop", 15*time.Second, chromedp.EmulateViewport(1280, 900), chromedp.Reload(), visible(item+` button[data-key="1"]`))

	// Answer with a click: the agent gets it, its item leaves the inbox.
	do(t, ctx, "answer", 15*time.Second, chromedp.Click(chromedp.CSS(item+` button[data-key="1"]`)), chromedp.WaitNotPresent(chromedp.CSS(item)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := f.screen("asker-0")
		if strings.Contains(out, "You said: 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("[answer] expected the agent to read the answer … its screen: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if evs := f.events("asker-0", herd.EventAnswered); len(evs) != 1 || !strings.Contains(evs[0].Message, "browser:") {
		t.Errorf("[answer] expected one answered event naming the browser … got %+v", evs)
	}

	// The failed one is stopped (through the API, as a script would):
	// the inbox empties.
	tok, err := os.ReadFile(filepath.Join(f.dir, auth.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/sessions/broken-0/stop", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("[stop by token] expected 200 … got %d", resp.StatusCode)
	}
	empty, cancelEmpty := context.WithTimeout(ctx, 15*time.Second)
	if err := chromedp.Do(empty, visible("#inbox-empty")); err != nil {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/inbox", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		var inbox []byte
		if resp, err := http.DefaultClient.Do(req); err == nil {
			inbox, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("inbox-section").innerText`))
		t.Fatalf("[inbox empty] %v; the inbox API: %s; the page: %q", err, inbox, page)
	}
	cancelEmpty()

	// The crash chart: the failed role's crash is a bar of its own
	// figure, drawn as SVG by the page's script.
	do(t, ctx, "crash chart", 15*time.Second, visible(`#crashes figure[data-role="broken"] svg rect.chart-bar-crashed`))
	if cap := get(t, ctx, "crash caption", chromedp.Text(chromedp.CSS(`#crashes figure[data-role="broken"] figcaption`))); !strings.Contains(cap, "1 crashed") {
		t.Errorf("[crash chart] expected one crash counted … got %q", cap)
	}

	// An agent prints markup: it shows as text and runs nothing.
	f.role("xss", herd.AgentGeneric, "/bin/sh", "-c",
		`printf '%s\n' '<script>window.pwned=1</script>' '<img src=x onerror="window.pwned=2">'; `+
			`printf '\033[31m%s\033[0m\n' '<script>window.pwned=3</script>'; exec sleep 600`)
	do(t, ctx, "hostile output", 20*time.Second,
		chromedp.Navigate(base+"/sessions/xss-0"),
		until(`document.getElementById("screen").textContent.includes("<img src=x")`))
	text := get(t, ctx, "screen", chromedp.Text(chromedp.CSS("#screen")))
	pwned := get(t, ctx, "pwned", chromedp.Evaluate[bool](`window.pwned !== undefined`))
	elems := get(t, ctx, "elements", chromedp.Evaluate[int](`document.querySelectorAll("#screen img, #screen script").length`))
	if !strings.Contains(text, "<script>window.pwned=1</script>") || pwned || elems != 0 {
		t.Errorf("[hostile output] expected the markup as text, nothing run … got text %q, pwned %v, elements %d", text, pwned, elems)
	}
	// The pane's colours render: the red line is a span of class fg1,
	// its markup text in it.
	do(t, ctx, "coloured span", 10*time.Second, until(`[...document.querySelectorAll("#screen span.fg1")].some(e => e.textContent.includes("window.pwned=3"))`))
	if c := get(t, ctx, "span colour", chromedp.Evaluate[string](
		`getComputedStyle([...document.querySelectorAll("#screen span.fg1")].find(e => e.textContent.includes("window.pwned=3"))).color`)); c == get(t, ctx, "screen colour", chromedp.Evaluate[string](`getComputedStyle(document.getElementById("screen")).color`)) {
		t.Errorf("[colour] expected the red span in another colour than the screen's … both %q", c)
	}
	if n := get(t, ctx, "elements", chromedp.Evaluate[int](`document.querySelectorAll("#screen script, #screen img").length`)); n != 0 ||
		get(t, ctx, "pwned", chromedp.Evaluate[bool](`window.pwned !== undefined`)) {
		t.Errorf("[coloured markup] expected the coloured <script> as text … %d elements, or it ran", n)
	}
	do(t, ctx, "session page", 10*time.Second, visible("#events li"))
	do(t, ctx, "resource charts", 10*time.Second, visible("#resources figure.chart-cpu svg"), visible("#resources figure.chart-mem svg"))
	screenshot(t, ctx, "console-session.png")

	// A page of another origin POSTs to the console with the browser's
	// cookie: refused.
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><script>
fetch("`+base+`/api/v1/sessions/asker-0/input", {method: "POST", mode: "no-cors", credentials: "include",
  headers: {"Content-Type": "text/plain"}, body: JSON.stringify({text: "pwned"})})
  .then(() => { document.title = "sent"; }, () => { document.title = "sent"; });
</script>`)
	})}
	eln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go evil.Serve(eln)
	defer evil.Close()
	do(t, ctx, "cross-origin", 15*time.Second, chromedp.Navigate("http://"+eln.Addr().String()+"/"), until(`document.title === "sent"`))
	deadline = time.Now().Add(5 * time.Second)
	for {
		log, _ := os.ReadFile(filepath.Join(f.dir, "daemon.log"))
		if strings.Contains(string(log), "cross-origin request refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("[cross-origin] expected the refusal logged … log has none")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if evs := f.events("asker-0", herd.EventConsole); len(evs) != 0 {
		t.Errorf("[cross-origin] expected the POST refused … got %+v", evs)
	}
	if out, _ := f.screen("asker-0"); strings.Contains(out, "pwned") {
		t.Errorf("[cross-origin] expected nothing typed … the screen shows %q", out)
	}

	// A read-only login sees the session and none of the controls.
	do(t, ctx, "read-only", 15*time.Second, logIn(f.linkScope("/sessions/worker-0", true)),
		visible("#info dd"), until(`document.body.classList.contains("readonly")`))
	if who := get(t, ctx, "scope", chromedp.Text(chromedp.CSS("#scope"))); who != "read-only" {
		t.Errorf("[read-only] expected the read scope shown … got %q", who)
	}
	if shown := get(t, ctx, "controls", chromedp.Evaluate[int](
		`[...document.querySelectorAll(".operate")].filter(e => e.offsetParent !== null).length`)); shown != 0 {
		t.Errorf("[read-only] expected no controls … %d shown", shown)
	}
}

// screen reads a session's pane as `herd logs` does.
func (f *fleet) screen(name string) (string, error) {
	var out []byte
	err := f.client.Do(context.Background(), http.MethodGet, "/v1/sessions/"+name+"/logs", nil, nil, &out)
	return string(out), err
}

// TestBrowserLateDialog: an agent's hook says it waits before it draws
// its dialog, so its item is first the hook's generic one; the dialog's
// own words reach the page within about a second of being drawn, not at
// the next periodic refresh.
func TestBrowserLateDialog(t *testing.T) {
	ctx := newBrowser(t)
	f := startFleet(t)
	do(t, ctx, "login", 15*time.Second, logIn(f.link("/")), visible("#live.on"))

	f.role("late", herd.AgentGeneric, herdBin, "sim", "--interval", "200ms", "--quiet", "--wait-input",
		"--hooks", "SessionStart,UserPromptSubmit,PreToolUse:Bash,PermissionRequest:Bash")
	item := `.item[data-session="late-0"]`
	do(t, ctx, "generic item", 20*time.Second, visible(item+` button[data-key="1"]`))
	if text := get(t, ctx, "item text", chromedp.Text(chromedp.CSS(item+" .item-text"))); !strings.Contains(text, "Bash") {
		t.Fatalf("[generic] expected the hook's tool … got %q", text)
	}

	// The agent draws its dialog: written straight to its terminal, as
	// the agent would, with no change of state for the page to hear of.
	out, err := exec.Command("tmux", "-L", f.tmux, "list-panes", "-a", "-F", "#{session_name}:#{window_name} #{pane_tty}").CombinedOutput()
	if err != nil {
		t.Fatalf("tmux list-panes: %v: %s", err, out)
	}
	tty := ""
	for _, l := range strings.Split(string(out), "\n") {
		if name, dev, ok := strings.Cut(l, " "); ok && strings.Contains(name, "late-0") {
			tty = dev
		}
	}
	if tty == "" {
		t.Fatalf("[tty] expected late-0's pane … got %q", out)
	}
	if err := os.WriteFile(tty, []byte("\r\nRun the late tool?\r\n\r\n❯ 1. Yes, run it\r\n  2. No, never\r\n"), 0); err != nil {
		t.Fatal(err)
	}
	drawn := time.Now()
	do(t, ctx, "dialog's words", 5*time.Second,
		until(`(document.querySelector('.item[data-session="late-0"] .item-text') || {}).textContent.includes("Run the late tool?")`),
		visible(item+` button[data-key="2"]`))
	if d := time.Since(drawn); d > 3*time.Second {
		t.Errorf("[late dialog] expected the dialog's words within about a second … took %v", d)
	}
	if label := get(t, ctx, "option", chromedp.Text(chromedp.CSS(item+` button[data-key="2"]`))); !strings.Contains(label, "No, never") {
		t.Errorf("[late dialog] expected the dialog's own answer … got %q", label)
	}
}

// TestBrowserCost: the console charts each role's cost per day from real
// ledger rows in the daemon's store; a role's name is shown as text, never
// run, and each bar's title tells its tokens.
func TestBrowserCost(t *testing.T) {
	ctx := newBrowser(t)
	f := startFleet(t)

	hostile := `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	now := time.Now().UTC()
	today, before := now.Format(time.DateOnly), now.Add(-3*24*time.Hour).Format(time.DateOnly)
	rows := []store.UsageRow{
		{Incarnation: "i-w0", Source: "transcript", Model: "claude-sonnet-4-5", Hour: now, Session: "worker-0", Role: "worker", Host: "web-test",
			InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 30, CacheWriteTokens: 4, CostUSD: 1.25},
		{Incarnation: "i-w1", Source: "transcript", Model: "claude-sonnet-4-5", Hour: now.Add(-3 * 24 * time.Hour), Session: "worker-1", Role: "worker", Host: "web-test",
			InputTokens: 500, OutputTokens: 50, CostUSD: 0.5},
		{Incarnation: "i-w2", Source: "transcript", Model: "claude-sonnet-4-5", Hour: now.Add(-40 * 24 * time.Hour), Session: "worker-2", Role: "worker", Host: "web-test",
			InputTokens: 9, CostUSD: 100}, // before the chart's days
		{Incarnation: "i-h0", Source: "stream", Model: `<b>model</b>`, Hour: now, Session: hostile + "-0", Role: hostile, Host: "web-test",
			InputTokens: 7, OutputTokens: 3, CostUSD: 0.1},
	}
	if err := f.st.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range rows {
			if err := tx.AddUsage(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	do(t, ctx, "cost chart", 20*time.Second, logIn(f.link("/")), visible(`#cost figure[data-role="worker"]`),
		until(`document.querySelectorAll("#cost figure").length === 2`))
	screenshot(t, ctx, "console-cost.png")

	if got := get(t, ctx, "worker caption", chromedp.Text(chromedp.CSS(`#cost figure[data-role="worker"] figcaption`))); got != "worker: $1.75 in 14 days" {
		t.Errorf("[worker] expected its 14 days' cost … got %q", got)
	}
	bars := get(t, ctx, "worker bars", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#cost figure[data-role="worker"] rect.chart-bar-cost')).map(r => r.dataset.day + "|" + r.querySelector("title").textContent)`))
	want := []string{
		before + "|" + before + ": $0.50, 500 in, 50 out, 0 cache read, 0 cache write tokens",
		today + "|" + today + ": $1.25, 1000 in, 200 out, 30 cache read, 4 cache write tokens",
	}
	if strings.Join(bars, "\n") != strings.Join(want, "\n") {
		t.Errorf("[worker] expected a bar for each day it spent, tokens in the title … got %q", bars)
	}
	if got := get(t, ctx, "total", chromedp.Text(chromedp.CSS("#cost-total"))); got != "total $1.85" {
		t.Errorf("[total] expected the roles' sum … got %q", got)
	}
	if !get(t, ctx, "empty hidden", chromedp.Evaluate[bool](`document.getElementById("cost-empty").hidden`)) {
		t.Errorf("[empty] expected the no-usage line hidden")
	}

	// The hostile role's name is text: its caption shows it, nothing ran.
	caption := get(t, ctx, "hostile caption", chromedp.Evaluate[string](
		`Array.from(document.querySelectorAll("#cost figure")).filter(f => f.dataset.role !== "worker")[0].querySelector("figcaption").textContent`))
	if caption != hostile+": $0.10 in 14 days" {
		t.Errorf("[hostile] expected the role's name as text … got %q", caption)
	}
	if get(t, ctx, "no script", chromedp.Evaluate[bool](`window.pwned !== undefined || document.querySelector("#cost script, #cost img") !== null`)) {
		t.Errorf("[hostile] a role's name was run as markup")
	}
}
