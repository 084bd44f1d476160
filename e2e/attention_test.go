package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
)

// hookServer is a loopback HTTP endpoint standing in for ntfy, Slack or
// a webhook receiver: it records requests and fails the first few.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []hookRequest
	fail int
}

type hookRequest struct {
	header http.Header
	body   string
	at     time.Time
}

func newHookServer(t *testing.T, fail int) *hookServer {
	t.Helper()
	h := &hookServer{fail: fail}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		at := time.Now()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reqs = append(h.reqs, hookRequest{r.Header.Clone(), string(b), at})
		if h.fail > 0 {
			h.fail--
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.reqs...)
}

// script writes an executable shell script.
func script(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// notifiedBy returns a session's notified events by channel.
func notifiedBy(e *env, session string) map[string]herd.Event {
	out := map[string]herd.Event{}
	for _, ev := range e.events("--session", session, "--kind", herd.EventNotified) {
		if ch, _ := ev.Data["channel"].(string); ch != "" {
			out[ch] = ev
		}
	}
	return out
}

// TestNotifyAtOnce: a permission prompt and a failed session each reach
// every [notify] channel at once — a fake notify-send on PATH, ntfy,
// Slack and webhook endpoints on loopback (the webhook failing first, so
// it is retried), a command reading the event JSON — with a notified
// event per channel and a ! in get sessions.
func TestNotifyAtOnce(t *testing.T) {
	t.Parallel()
	fakes := t.TempDir()
	desktop := script(t, filepath.Join(fakes, "notify-send"), `printf '%s\n' "$@" >> "$0.args"`)
	command := script(t, filepath.Join(fakes, "notifier"), `cat >> "$0.stdin"; echo >> "$0.stdin"`)
	ntfy, slack, hook := newHookServer(t, 0), newHookServer(t, 0), newHookServer(t, 1)
	e := newEnv(t, fmt.Sprintf(`[notify]
desktop = true
ntfy = %q
slack_webhook = %q
command = [%q]
webhook = %q
`, ntfy.URL+"/herd-topic", slack.URL+"/api/webhooks/1/x/slack", command, hook.URL))
	e.extraEnv = []string{"PATH=" + fakes + ":" + os.Getenv("PATH")}
	e.start()
	e.must("run", "asker", "--runtime", "exec", "--restart", "never", "--", bin, "sim", "--interval", "300ms",
		"--hooks", "SessionStart,PermissionRequest:Bash")
	e.must("run", "quitter", "--runtime", "exec", "--restart", "never", "--", "sh", "-c", "exit 3")

	channels := []string{"desktop", "ntfy", "slack", "command", "webhook"}
	for _, name := range []string{"asker-0", "quitter-0"} {
		e.waitFor(name+" notified on every channel", 20*time.Second, func() bool { return len(notifiedBy(e, name)) == len(channels) })
	}
	asked := notifiedBy(e, "asker-0")
	for _, ch := range channels {
		ev := asked[ch]
		if ev.Reason != "waiting" || ev.Data["action"] != "herd logs asker-0" || !strings.Contains(ev.Message, "asker-0 needs permission") ||
			!strings.Contains(ev.Message, "permission to use Bash") {
			t.Errorf("[%s] expected a waiting notification naming session, tool and action, got %+v", ch, ev)
		}
	}
	// The webhook's one failure hit whichever session came first: that one
	// was tried twice.
	tries := asked["webhook"].Data["attempts"].(float64) + notifiedBy(e, "quitter-0")["webhook"].Data["attempts"].(float64)
	if tries != 3 || len(hook.requests()) != 3 {
		t.Errorf("[webhook] expected a failed try retried (3 tries in all), got %v attempts, %d requests", tries, len(hook.requests()))
	}
	// How soon: from the hook's waiting event to the first delivery.
	var waitingAt time.Time
	for _, ev := range e.events("--session", "asker-0", "--kind", herd.EventActivity) {
		if ev.Data["to"] == "waiting" {
			waitingAt = ev.Time
		}
	}
	first := asked["ntfy"].Time
	for _, ev := range asked {
		if ev.Time.Before(first) {
			first = ev.Time
		}
	}
	latency := first.Sub(waitingAt)
	t.Logf("permission prompt -> first notification delivered: %s", latency.Round(time.Millisecond))
	if waitingAt.IsZero() || latency < 0 || latency > 5*time.Second {
		t.Errorf("expected a notification within seconds of the prompt, got %s (waiting at %s)", latency, waitingAt)
	}

	failed := notifiedBy(e, "quitter-0")["command"]
	if failed.Reason != "failed" || failed.Data["action"] != "herd restart quitter-0" || !strings.Contains(failed.Message, "exit code 3") {
		t.Errorf("[failed] expected the last exit and herd restart, got %+v", failed)
	}

	// What each channel received.
	var sawNtfy bool
	for _, r := range ntfy.requests() {
		if r.header.Get("Title") == "asker-0 needs permission" && r.header.Get("Priority") == "4" && strings.Contains(r.body, "Run: herd logs asker-0") {
			sawNtfy = true
		}
	}
	if !sawNtfy {
		t.Errorf("[ntfy] expected Title, Priority and the text, got %+v", ntfy.requests())
	}
	var sawSlack bool
	for _, r := range slack.requests() {
		var body map[string]string
		if json.Unmarshal([]byte(r.body), &body) == nil && strings.Contains(body["text"], "*quitter-0 failed*") {
			sawSlack = true
		}
	}
	if !sawSlack {
		t.Errorf(`[slack] expected {"text": ...} naming the failed session, got %+v`, slack.requests())
	}
	if args, _ := os.ReadFile(desktop + ".args"); !strings.Contains(string(args), "--app-name=herd\n--urgency=critical\n--\nasker-0 needs permission\n") {
		t.Errorf("[desktop] expected notify-send's arguments, got %q", args)
	}
	if in, _ := os.ReadFile(command + ".stdin"); strings.Count(string(in), `"kind":"notified"`) != 2 {
		t.Errorf("[command] expected two notified events on stdin, got %q", in)
	}

	// ! while the need lasts, in the table and in JSON.
	if out := e.must("get", "sessions", "asker-0", "quitter-0", "--no-headers"); strings.Count(out, "!") != 2 {
		t.Errorf("[get sessions] expected ! on both sessions, got\n%s", out)
	}
	v, _ := e.session("asker-0")
	if !v.Notified {
		t.Errorf("[json] expected notified true, got %+v", v)
	}
	desc := e.must("describe", "session", "asker-0")
	for _, want := range []string{"asker-0 needs permission; run herd logs asker-0", "command delivered, desktop delivered, ntfy delivered, slack delivered, webhook delivered"} {
		if !strings.Contains(desc, want) {
			t.Errorf("[describe] expected %q, got\n%s", want, desc)
		}
	}
	// Once per episode: nothing more arrives while it lasts.
	before := len(e.events("--kind", herd.EventNotified))
	e.must("reload")
	time.Sleep(time.Second) // nothing to poll for: the absence of a second notification
	if after := len(e.events("--kind", herd.EventNotified)); after != before {
		t.Errorf("expected no second notification of the same episodes, got %d then %d", before, after)
	}
}

// TestBlockedNotifiedAfterReloadAndContinued: a tmux agent blocked by a
// rate limit is notified once [notify] is added by herd reload, and gets
// "continue" typed in when the limit resets (auto_continue), once.
func TestBlockedNotifiedAfterReloadAndContinued(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	hook := newHookServer(t, 0)
	e := newEnv(t, "")
	e.start()
	e.must("run", "limited", "--restart", "never", "--", bin, "sim", "--interval", "300ms", "--wait-input",
		"--hooks", "SessionStart,StopFailure:rate_limit", "--reset-in", "4s")
	e.waitFor("limited-0 blocked", 20*time.Second, func() bool {
		v, ok := e.session("limited-0")
		return ok && v.Activity == herd.ActivityBlocked
	})
	if v, _ := e.session("limited-0"); v.Notified {
		t.Errorf("expected no notification with no [notify] channel, got %+v", v)
	}
	cfg := filepath.Join(e.dir, "herd.toml")
	old, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(old, fmt.Sprintf("[notify]\nwebhook = %q\n", hook.URL)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.must("reload"); !strings.Contains(out, "[notify]") {
		t.Errorf("[reload] expected [notify] applied, got %q", out)
	}
	e.waitFor("the blocked session notified", 20*time.Second, func() bool { return len(notifiedBy(e, "limited-0")) == 1 })
	ev := notifiedBy(e, "limited-0")["webhook"]
	if ev.Reason != "blocked" || !strings.Contains(ev.Message, "limited-0 is rate limited") || !strings.Contains(ev.Message, "resets at") ||
		ev.Data["action"] != "herd attach limited-0" {
		t.Errorf("[notified] expected a rate limit with its reset time and herd attach, got %+v", ev)
	}

	e.waitFor("continue typed in at the reset", 20*time.Second, func() bool {
		return strings.Contains(e.try("logs", "limited-0"), "You said: continue")
	})
	var cont []herd.Event
	for _, ev := range e.events("--session", "limited-0", "--kind", herd.EventActivity) {
		if ev.Reason == "auto_continue" {
			cont = append(cont, ev)
		}
	}
	if len(cont) != 1 {
		t.Fatalf("expected one auto_continue event, got %+v", cont)
	}
	// The look comes at the reset (a timer set on it); the event is
	// written once the text is typed, the pane has shown it (up to 2 s)
	// and Enter is pressed: two injects through tmux into a race-built
	// agent, each bounded by 5 s.
	reset, err := time.Parse(time.RFC3339, cont[0].Data["reset_at"].(string))
	if err != nil || cont[0].Time.Before(reset) || cont[0].Time.After(reset.Add(10*time.Second)) {
		t.Errorf("expected continue typed at the reset %s, got %s (%v)", reset, cont[0].Time, err)
	}
	time.Sleep(time.Second) // nothing to poll for: the absence of a second continue
	if n := strings.Count(e.try("logs", "limited-0"), "You said: continue"); n != 1 {
		t.Errorf("expected continue typed once, got %d times", n)
	}
}

// TestCrashRelaunchContinuesConversation: a Claude launch gets
// --session-id chosen by herd (known at once), and a crash relaunch
// resumes that conversation keeping the role's flags — unless the role
// says resume_on_crash = false, or the conversation never began (the
// same id is then given again).
func TestCrashRelaunchContinuesConversation(t *testing.T) {
	t.Parallel()
	fakes := t.TempDir()
	// A stand-in for Claude Code: it records its arguments and, like
	// Claude after a first prompt, keeps its conversation's transcript
	// (unless NO_TRANSCRIPT: it died before its first prompt).
	claude := script(t, filepath.Join(fakes, "claude"), `printf '%s\n' "$*" >> "$ARGS_LOG"
while [ $# -gt 0 ]; do [ "$1" = --session-id ] && id=$2; shift; done
if [ -n "$id" ] && [ -z "$NO_TRANSCRIPT" ]; then
  d="$HOME/.claude/projects/$(pwd -P | sed 's/[^A-Za-z0-9]/-/g')"
  mkdir -p "$d" && echo '{}' > "$d/$id.jsonl"
fi
exec sleep 3600`)
	home := t.TempDir()
	e := newEnv(t, "[restart]\ninitial_backoff = \"200ms\"\n")
	e.start()
	logs := map[string]string{"keep": filepath.Join(fakes, "keep.log"), "fresh": filepath.Join(fakes, "fresh.log"), "early": filepath.Join(fakes, "early.log")}
	roles := filepath.Join(fakes, "roles.toml")
	if err := os.WriteFile(roles, fmt.Appendf(nil, `[[role]]
name = "keep"
command = [%[1]q, "--model", "sonnet"]
runtime = "exec"
env = { ARGS_LOG = %[2]q, HOME = %[5]q }
[[role]]
name = "fresh"
command = [%[1]q, "--model", "sonnet"]
runtime = "exec"
env = { ARGS_LOG = %[3]q, HOME = %[5]q }
resume_on_crash = false
[[role]]
name = "early"
command = [%[1]q, "--model", "sonnet"]
runtime = "exec"
env = { ARGS_LOG = %[4]q, HOME = %[5]q, NO_TRANSCRIPT = "1" }
`, claude, logs["keep"], logs["fresh"], logs["early"], home), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)

	uuid := regexp.MustCompile(`^--session-id ([0-9a-f-]{36}) --model sonnet$`)
	// Each launch also gets herd's hooks first (--settings FILE, see
	// TestZeroSetupHooks): set aside here.
	settings := regexp.MustCompile(`^--settings \S+/hooks/[a-z]+-0\.claude\.json `)
	lines := func(role string, n int) []string {
		var out []string
		e.waitFor(fmt.Sprintf("%s launched %d time(s)", role, n), 20*time.Second, func() bool {
			b, _ := os.ReadFile(logs[role])
			out = strings.Split(strings.TrimSpace(string(b)), "\n")
			return len(b) > 0 && len(out) >= n
		})
		for i, l := range out {
			out[i] = settings.ReplaceAllString(l, "")
		}
		return out
	}
	first := map[string]string{}
	for _, role := range []string{"keep", "fresh", "early"} {
		m := uuid.FindStringSubmatch(lines(role, 1)[0])
		if m == nil {
			t.Fatalf("[%s] expected a first launch with --session-id, got %q", role, lines(role, 1)[0])
		}
		first[role] = m[1]
		// The agent may log its arguments before its launch's record
		// commits.
		var spawned []herd.Event
		e.waitFor(role+" spawned", 20*time.Second, func() bool {
			spawned = e.events("--session", role+"-0", "--kind", herd.EventSpawned)
			return len(spawned) > 0
		})
		if len(spawned) != 1 || spawned[0].Data["agent_session_id"] != m[1] {
			t.Errorf("[%s] expected the id recorded at launch, got %+v", role, spawned)
		}
		v := e.waitState(role+"-0", herd.StateRunning, 20*time.Second)
		if role != "early" {
			// Killed only once its conversation began (its transcript is
			// there), as the relaunch's choice depends on it.
			e.waitFor(role+"'s transcript", 20*time.Second, func() bool {
				got, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", m[1]+".jsonl"))
				return len(got) > 0
			})
		}
		if err := syscall.Kill(v.PID, syscall.SIGSEGV); err != nil {
			t.Fatal(err)
		}
	}
	if got := lines("keep", 2)[1]; got != "--resume "+first["keep"]+" --model sonnet" {
		t.Errorf("[keep] expected the crash relaunch to resume %s with the role's flags, got %q", first["keep"], got)
	}
	// The relaunched agent logs its arguments before the relaunch's
	// record (the restarted event) commits.
	var restarted []herd.Event
	e.waitFor("keep restarted", 20*time.Second, func() bool {
		restarted = e.events("--session", "keep-0", "--kind", herd.EventRestarted)
		return len(restarted) > 0
	})
	if len(restarted) != 1 || restarted[0].Data["resumed_conversation"] != true ||
		!strings.Contains(restarted[0].Message, "conversation "+first["keep"]+" resumed") {
		t.Errorf("[keep] expected the restarted event to say it resumed, got %+v", restarted)
	}
	m := uuid.FindStringSubmatch(lines("fresh", 2)[1])
	if m == nil || m[1] == first["fresh"] {
		t.Errorf("[fresh] expected a new conversation after the crash, got %q (first %s)", lines("fresh", 2)[1], first["fresh"])
	}
	// Died before its first prompt: nothing to resume, the same id again.
	if got := lines("early", 2)[1]; got != "--session-id "+first["early"]+" --model sonnet" {
		t.Errorf("[early] expected the same id given to --session-id again, got %q (first %s)", got, first["early"])
	}
	crashed := e.events("--session", "keep-0", "--kind", herd.EventCrashed)
	if len(crashed) != 1 || crashed[0].Data["signal"] != float64(11) {
		t.Errorf("[keep] expected one crash by SIGSEGV through the crash path, got %+v", crashed)
	}
}
