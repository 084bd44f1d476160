package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// wantOneLineError checks that a command failed with nothing on stdout and
// one line on stderr containing every one of want.
func wantOneLineError(t *testing.T, args []string, stdout, stderr string, code int, want ...string) {
	t.Helper()
	what := "herd " + strings.Join(args, " ")
	if code == 0 {
		t.Errorf("[%s] expected a non-zero exit, got 0 (stdout %q)", what, stdout)
	}
	if stdout != "" {
		t.Errorf("[%s] expected nothing on stdout, got %q", what, stdout)
	}
	if n := strings.Count(strings.TrimRight(stderr, "\n"), "\n"); n != 0 || stderr == "" {
		t.Errorf("[%s] expected one line on stderr, got %q", what, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("[%s] expected stderr to contain %q, got %q", what, w, stderr)
		}
	}
}

// TestCLIUnknownResource: a mistyped or missing subcommand of get, describe,
// delete and hooks is an error, not help on stdout with exit 0.
func TestCLIUnknownResource(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"get", "sesions"}, []string{`unknown resource "sesions"`, "roles, sessions or tasks"}},
		{[]string{"get"}, []string{"missing resource", "roles, sessions or tasks"}},
		{[]string{"describe", "sesion", "w-0"}, []string{`unknown resource "sesion"`, "session"}},
		{[]string{"describe"}, []string{"missing resource", "session"}},
		{[]string{"delete", "roles", "w"}, []string{`unknown resource "roles"`, "role"}},
		{[]string{"delete"}, []string{"missing resource", "role"}},
		{[]string{"hooks", "instal"}, []string{`unknown action "instal"`, "install"}},
		{[]string{"hooks"}, []string{"missing action", "install"}},
	}
	for _, tt := range tests {
		out, errs, code := e.herd(tt.args...)
		wantOneLineError(t, tt.args, out, errs, code, tt.want...)
	}
	// The real subcommands still work, and help is still help.
	if out, errs, code := e.herd("get", "--help"); code != 0 || !strings.Contains(out, "sessions") {
		t.Errorf("[get --help] expected help on stdout and exit 0, got %d %q %q", code, out, errs)
	}
}

// TestCLIRejectsBadNames: session and role names are checked before
// anything is sent to the daemon, so no name can reach another API path.
func TestCLIRejectsBadNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	sessionHint := "e.g. worker-0"
	roleHint := "e.g. worker"
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"describe", "session", "../../v1/health"}, []string{`"../../v1/health"`, sessionHint}},
		{[]string{"stop", "x?y"}, []string{`"x?y"`, sessionHint}},
		{[]string{"resume", "a/b-0"}, []string{`"a/b-0"`, sessionHint}},
		{[]string{"archive", "Worker-0"}, []string{`"Worker-0"`, sessionHint}},
		{[]string{"logs", "worker"}, []string{`"worker"`, sessionHint}},
		{[]string{"inject", "w%2f-0", "hi"}, []string{`"w%2f-0"`, sessionHint}},
		{[]string{"attach", "=w-0"}, []string{`"=w-0"`, sessionHint}},
		{[]string{"events", "--session", "x?y"}, []string{`"x?y"`, sessionHint}},
		{[]string{"scale", "../roles", "--replicas", "1"}, []string{`"../roles"`, roleHint}},
		{[]string{"delete", "role", "a b"}, []string{`"a b"`, roleHint}},
	}
	for _, tt := range tests {
		out, errs, code := e.herd(tt.args...)
		wantOneLineError(t, tt.args, out, errs, code, tt.want...)
	}
	// A valid name that does not exist is still the daemon's "not found".
	if _, errs, code := e.herd("describe", "session", "nosuch-0"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("[describe session nosuch-0] expected not found, got %d %q", code, errs)
	}
}

// TestCLIRejectsBadFlagValues: a negative --since, --tail or --limit and an
// unknown --kind are errors, not an empty answer.
func TestCLIRejectsBadFlagValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"events", "--since", "-5m"}, []string{"--since", "-5m"}},
		{[]string{"events", "--since", "soon"}, []string{"--since"}},
		{[]string{"events", "--kind", "bogus"}, []string{"--kind", `"bogus"`, herd.EventCrashed, herd.EventProbeUnknown}},
		{[]string{"events", "--limit", "-1"}, []string{"--limit"}},
		{[]string{"logs", "w-0", "--tail", "-3"}, []string{"--tail", "-3"}},
	}
	for _, tt := range tests {
		out, errs, code := e.herd(tt.args...)
		wantOneLineError(t, tt.args, out, errs, code, tt.want...)
		if strings.Contains(errs, "no herd daemon") {
			t.Errorf("[herd %s] expected the value checked before the daemon is asked, got %q", strings.Join(tt.args, " "), errs)
		}
	}
}

// TestInjectTextIsNeverAFlag: text after NAME is text, even when it looks
// like a flag; --stdin reads the text from stdin; --no-enter goes before NAME
// or right after TEXT.
func TestInjectTextIsNeverAFlag(t *testing.T) {
	t.Parallel()
	// Without a daemon the text is not parsed as flags: the error is the
	// missing daemon, not an unknown flag.
	bare := newEnv(t, "")
	for _, args := range [][]string{
		{"inject", "w-0", "-v please"},
		{"inject", "w-0", "--help"},
		{"inject", "--no-enter", "w-0", "-x"},
	} {
		out, errs, code := bare.herd(args...)
		wantOneLineError(t, args, out, errs, code, "no herd daemon")
	}
	for _, args := range [][]string{
		{"inject", "w-0"},
		{"inject", "w-0", "a", "b"},
	} {
		out, errs, code := bare.herd(args...)
		wantOneLineError(t, args, out, errs, code, "inject", "TEXT")
	}
	if out, _, code := bare.herd("inject", "--help"); code != 0 || !strings.Contains(out, "stdin") {
		t.Errorf("[inject --help] expected help that documents stdin, got %d %q", code, out)
	}

	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	out := filepath.Join(t.TempDir(), "typed")
	// The first inject must meet the raw terminal: wait for "ready".
	e.must("run", "cat", "--", "sh", "-c", "stty raw -echo; echo ready; cat > "+out)
	e.waitState("cat-0", herd.StateRunning, 10*time.Second)
	e.waitFor("the agent's terminal in raw mode", 10*time.Second, func() bool {
		logs, _, _ := e.herd("logs", "cat-0")
		return strings.Contains(logs, "ready")
	})
	e.must("inject", "cat-0", "-v please")
	e.must("inject", "--no-enter", "cat-0", "--no-enter")
	e.must("inject", "cat-0", " and more", "--no-enter")
	e.must("inject", "cat-0", "--", "-- after dash")
	big := strings.Repeat("0123456789abcdef", 10000) // 160 KB: over the argv limit of one argument
	if _, errs, code := e.herdIn(big+"\n", "inject", "--stdin", "cat-0"); code != 0 {
		t.Fatalf("[inject from stdin] expected exit 0, got %d %q", code, errs)
	}
	want := "-v please\r--no-enter and more-- after dash\r" + big + "\r"
	e.waitFor("the text typed into the agent", 20*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == want
	})
}

// TestAgentSessionIDNeverAFlag: an agent that reports a session id shaped
// like a flag (in its hooks and its stream-json) keeps its activity, but the
// id never reaches the resume snapshot, where it would become an argument.
func TestAgentSessionIDNeverAFlag(t *testing.T) {
	t.Parallel()
	e := startE2E(t, "")
	e.run("sly", "--interval", "300ms", "--session-id=--dangerously-skip-permissions",
		"--hooks", "SessionStart,PreToolUse:Bash,Stop")
	e.poll("idle after the hooks, and all three counted", func() bool {
		// Not must: the session is only recorded once the reconciler
		// has launched it.
		out, _, code := e.herd("describe", "session", "sly-0", "-o", "json")
		var det api.SessionDetail
		if code != 0 || json.Unmarshal([]byte(out), &det) != nil {
			return false
		}
		m, _ := det.ActivityDetail.(map[string]any)
		return det.Activity == herd.ActivityIdle && m["hook_events"] == float64(3)
	})
	e.must("stop", "sly-0")
	var det api.SessionDetail
	if err := json.Unmarshal([]byte(e.must("describe", "session", "sly-0", "-o", "json")), &det); err != nil {
		t.Fatal(err)
	}
	if det.Snapshot == nil || det.Snapshot.AgentSessionID != "" {
		t.Errorf("[snapshot] expected a snapshot without an agent session id, got %+v", det.Snapshot)
	}
	for _, ev := range e.events("sly-0", "") {
		if b, _ := json.Marshal(ev.Data); strings.Contains(string(b), `"agent_session_id":"--`) {
			t.Errorf("[events] expected the id in no event, got %s %s", ev.Kind, b)
		}
	}
}
