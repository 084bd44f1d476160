package e2e

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/testenv"
)

// noReap keeps the reaper from stopping the archived session these tests
// look at.
const noReap = fastRestart + `
[reaper]
archived = false
orphans = false
`

// runSleepers declares two exec roles that just sleep, and waits for them.
func runSleepers(e *env) {
	e.t.Helper()
	e.must("run", "alpha", "--runtime", "exec", "--", "sleep", "300")
	e.must("run", "beta", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("alpha-0", herd.StateRunning, 10*time.Second)
	e.waitState("beta-0", herd.StateRunning, 10*time.Second)
}

// TestGetKubectlGrammar: get takes names, -l selectors, --role, -o
// yaml|name, --no-headers; empty lists say so; describe role works.
func TestGetKubectlGrammar(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noReap)
	e.start()
	for _, args := range [][]string{{"get", "sessions"}, {"get", "roles"}} {
		out, errs, code := e.herd(args...)
		what := strings.TrimSuffix(args[1], "s")
		if code != 0 || out != "" || errs != "No "+what+"s found.\n" {
			t.Errorf("[%v on nothing] expected 'No %ss found.' on stderr, got %d %q %q", args, what, code, out, errs)
		}
	}
	runSleepers(e)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "sessions", "-o", "name"}, "session/alpha-0\nsession/beta-0\n"},
		{[]string{"get", "sessions", "beta-0", "-o", "name"}, "session/beta-0\n"},
		{[]string{"get", "sessions", "-l", "role=alpha", "-o", "name"}, "session/alpha-0\n"},
		{[]string{"get", "sessions", "-l", "role!=alpha,runtime=exec", "-o", "name"}, "session/beta-0\n"},
		{[]string{"get", "sessions", "--role", "beta", "-o", "name"}, "session/beta-0\n"},
		{[]string{"get", "sessions", "-l", "state=failed", "-o", "name"}, ""},
		{[]string{"get", "roles", "alpha", "-o", "name"}, "role/alpha\n"},
		{[]string{"get", "roles", "-l", "runtime=exec", "-o", "name"}, "role/alpha\nrole/beta\n"},
	} {
		if got := e.must(tc.args...); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", strings.Join(tc.args, " "), tc.want, got)
		}
	}

	out := e.must("get", "sessions", "alpha-0", "--no-headers")
	if strings.Contains(out, "NAME") || !strings.HasPrefix(out, "alpha-0 ") || strings.Count(out, "\n") != 1 {
		t.Errorf("[--no-headers] expected one bare row, got %q", out)
	}
	if out, errs, code := e.herd("get", "sessions", "-l", "state=failed"); code != 0 || out != "" || errs != "No sessions found.\n" {
		t.Errorf("[selector matching nothing] expected 'No sessions found.', got %d %q %q", code, out, errs)
	}

	y := e.must("get", "sessions", "alpha-0", "-o", "yaml")
	for _, want := range []string{"- account: default\n  activity: ", "\n  name: alpha-0\n", "\n  runtime_kind: exec\n", "\n  state: running\n", "\n  backoff_until: null\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("[-o yaml] expected %q in:\n%s", want, y)
		}
	}

	// Names that do not exist: the rest is printed, then one error line.
	out, errs, code := e.herd("get", "sessions", "alpha-0", "nosuch-0", "-o", "name")
	if code == 0 || out != "session/alpha-0\n" || errs != "herd: session nosuch-0 not found\n" {
		t.Errorf("[missing name] expected alpha-0 then an error, got %d %q %q", code, out, errs)
	}
	if _, errs, code := e.herd("get", "sessions", "-l", "colour=red"); code == 0 || !strings.Contains(errs, `selector key "colour": want one of role, state, activity, runtime, host`) {
		t.Errorf("[bad selector] expected a clear error, got %d %q", code, errs)
	}

	wide := e.must("get", "sessions", "-o", "wide")
	header := strings.Fields(strings.SplitN(wide, "\n", 2)[0])
	want := []string{"NAME", "ROLE", "STATE", "PROCESS", "ACTIVITY", "RESTARTS", "AGE", "LAST-EXIT", "RUNTIME", "PANE", "PID", "ATTACHED", "HOST", "INCARNATION", "BACKOFF-UNTIL", "WORKTREE", "COST"}
	if strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("[-o wide] expected columns %v, got %v", want, header)
	}
	if row := strings.Fields(strings.SplitN(wide, "\n", 3)[1]); len(row) < 10 || row[8] != "exec" || row[9] != "-" {
		t.Errorf("[-o wide] expected RUNTIME exec and no PANE for an exec session, got %v", row)
	}
	if roles := e.must("get", "roles"); !strings.Contains(strings.SplitN(roles, "\n", 2)[0], "RUNTIME") || !strings.Contains(roles, " exec ") {
		t.Errorf("[get roles] expected RUNTIME to be tmux/exec there too, got:\n%s", roles)
	}

	if d := e.must("describe", "session", "alpha-0"); !regexpMatch(`(?m)^Runtime: +exec$`, d) || strings.Contains(d, "Pane:") {
		t.Errorf("[describe session] expected 'Runtime: exec' and no pane for an exec session, got:\n%s", d)
	}
	d := e.must("describe", "role", "alpha")
	for _, want := range []string{"Name:", "alpha", "Replicas:", "1 desired, 1 live, 1 running", "Command:", "sleep 300", "Sessions:", "alpha-0", "Events:", "spawned"} {
		if !strings.Contains(d, want) {
			t.Errorf("[describe role] expected %q in:\n%s", want, d)
		}
	}
	var det struct {
		Name     string            `json:"name"`
		Sessions []api.SessionView `json:"sessions"`
		Events   []herd.Event      `json:"recent_events"`
	}
	if err := json.Unmarshal([]byte(e.must("describe", "role", "alpha", "-o", "json")), &det); err != nil || det.Name != "alpha" || len(det.Sessions) != 1 || len(det.Events) == 0 {
		t.Errorf("[describe role -o json] expected the role, its session and events, got %+v %v", det, err)
	}
	if _, errs, code := e.herd("describe", "role", "nosuch"); code == 0 || errs != "herd: role nosuch not found\n" {
		t.Errorf("[describe role nosuch] expected one line, got %d %q", code, errs)
	}

	// Archived sessions are hidden from lists unless asked for, and carry
	// a marker when shown.
	e.must("archive", "beta-0")
	if out := e.must("get", "sessions", "beta-0", "--no-headers"); !strings.Contains(out, "running,ARCHIVED") {
		t.Errorf("[archived] expected the ARCHIVED marker, got %q", out)
	}
	if out := e.must("get", "sessions", "-o", "name"); strings.Contains(out, "beta-0") || !strings.Contains(out, "session/alpha-0") {
		t.Errorf("[archived] expected beta-0 hidden by default, got %q", out)
	}
	if out, errs, code := e.herd("get", "sessions"); code != 0 || row(out, "beta-0") != nil || errs != "(1 archived session(s) not shown; --show-archived lists them)\n" {
		t.Errorf("[archived] expected the table without beta-0 and a note on stderr, got %d %q %q", code, out, errs)
	}
	var listed []api.SessionView
	if err := json.Unmarshal([]byte(e.must("get", "sessions", "-o", "json")), &listed); err != nil || slices.ContainsFunc(listed, func(v api.SessionView) bool { return v.Name == "beta-0" }) {
		t.Errorf("[archived] expected beta-0 hidden from -o json by default, got %+v %v", listed, err)
	}
	out = e.must("get", "sessions", "--show-archived", "--no-headers")
	if r := row(out, "beta-0"); len(r) < 3 || r[2] != "running,ARCHIVED" || row(out, "alpha-0") == nil {
		t.Errorf("[--show-archived] expected beta-0 running,ARCHIVED beside alpha-0, got %q", out)
	}
	listed = nil
	if err := json.Unmarshal([]byte(e.must("get", "sessions", "--show-archived", "-o", "json")), &listed); err != nil {
		t.Fatal(err)
	}
	for _, v := range listed {
		if v.Archived != (v.Name == "beta-0") {
			t.Errorf("[--show-archived -o json] expected archived only on beta-0, got %s archived=%v", v.Name, v.Archived)
		}
	}
	if out := e.must("get", "sessions", "-o", "json", "--show-archived"); !strings.Contains(out, `"archived": true`) {
		t.Errorf("[--show-archived -o json] expected the archived key, got %s", out)
	}
}

// TestErrorsNameTheThingOnce: "session nosuch-0 not found", never the store.
func TestErrorsNameTheThingOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	for _, args := range [][]string{
		{"describe", "session", "nosuch-0"},
		{"logs", "nosuch-0"},
		{"stop", "nosuch-0"},
		{"resume", "nosuch-0"},
		{"archive", "nosuch-0"},
		{"inject", "nosuch-0", "x"},
		{"attach", "nosuch-0"},
	} {
		_, errs, code := e.herd(args...)
		if code == 0 || errs != "herd: session nosuch-0 not found\n" {
			t.Errorf("[%s] expected 'herd: session nosuch-0 not found', got %d %q", strings.Join(args, " "), code, errs)
		}
	}
	if _, errs, code := e.herd("scale", "nosuch", "--replicas", "1"); code == 0 || strings.Contains(errs, "sqlite") {
		t.Errorf("[scale nosuch] expected an error without the store's name, got %d %q", code, errs)
	}
}

// TestAttachExecSession: attach to an exec session says why not, in one
// line, instead of passing tmux's error through.
func TestAttachExecSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "ex", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("ex-0", herd.StateRunning, 10*time.Second)
	_, errs, code := e.herd("attach", "ex-0")
	want := "herd: attach ex-0: an exec session has no terminal to attach to; see its output with 'herd logs -f ex-0'\n"
	if code == 0 || errs != want {
		t.Errorf("expected %q, got %d %q", want, code, errs)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatchIntoPipe: -w into a pipe prints a fresh table per change and no
// terminal codes.
func TestWatchIntoPipe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "alpha", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("alpha-0", herd.StateRunning, 10*time.Second)
	cmd := exec.Command(bin, "get", "sessions", "-w")
	cmd.Env = e.environ()
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	e.waitFor("the first table", 10*time.Second, func() bool { return strings.Contains(out.String(), "alpha-0") })
	e.must("run", "beta", "--runtime", "exec", "--", "sleep", "300")
	e.waitFor("a table with beta-0 running", 10*time.Second, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "beta-0" && f[2] == "running" {
				return true
			}
		}
		return false
	})
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("expected -w to end cleanly on SIGINT, got %v", err)
	}
	s := out.String()
	if strings.Contains(s, "\033") {
		t.Errorf("expected no terminal codes in a pipe, got %q", s)
	}
	tables := strings.Split(strings.TrimSpace(s), "\n\n")
	if len(tables) < 2 {
		t.Fatalf("expected a table per change, got %q", s)
	}
	for i, tb := range tables {
		if !strings.HasPrefix(tb, "NAME ") {
			t.Errorf("[table %d] expected it to start with the header, got %q", i, tb)
		}
		if i > 0 && tb == tables[i-1] {
			t.Errorf("[table %d] expected only changed tables, got a repeat: %q", i, tb)
		}
	}
}

// TestVersionAndStaticBuild: version comes from the build info, and
// scripts/build.sh makes a statically linked binary.
func TestVersionAndStaticBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	out := e.must("version")
	if strings.Contains(out, "dev (commit none)") || !strings.HasPrefix(out, "herd ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("[version] expected the build info's identity, got %q", out)
	}
	var id map[string]any
	if err := json.Unmarshal([]byte(e.must("version", "-o", "json")), &id); err != nil || id["go"] != runtime.Version() || id["revision"] == nil {
		t.Errorf("[version -o json] got %v %v", id, err)
	}

	if testing.Short() {
		t.Skip("the static build takes a while")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	static := filepath.Join(t.TempDir(), "herd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, filepath.Join(root, "scripts", "build.sh"), static)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, b)
	}
	f, err := elf.Open(static)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("expected a static binary, found program header %v", p.Type)
		}
	}
	v, err := exec.CommandContext(ctx, static, "version").Output()
	if err != nil || !strings.Contains(string(v), "static") {
		t.Errorf("[static version] expected it to say static, got %q %v", v, err)
	}
}

// TestCompletionOfNames: the shell completes session and role names from
// the daemon, and nothing (never file names) without one.
func TestCompletionOfNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	if script := e.must("completion", "bash"); !strings.Contains(script, "__start_herd") {
		t.Errorf("[completion bash] expected a bash completion script, got %.200q", script)
	}
	for _, sh := range []string{"zsh", "fish"} {
		if script := e.must("completion", sh); len(script) < 100 {
			t.Errorf("[completion %s] expected a script, got %q", sh, script)
		}
	}
	// No daemon: no names, no file names (directive 4: NoFileComp).
	if out := e.must("__complete", "stop", ""); strings.TrimSpace(out) != ":4\nCompletion ended with directive: ShellCompDirectiveNoFileComp" && !strings.HasPrefix(out, ":4\n") {
		t.Errorf("[no daemon] expected no candidates, got %q", out)
	}
	e.start()
	runSleepers(e)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "stop", ""}, "alpha-0\nbeta-0\n:4\n"},
		{[]string{"__complete", "get", "sessions", "alpha-0", ""}, "beta-0\n:4\n"},
		{[]string{"__complete", "scale", ""}, "alpha\nbeta\n:4\n"},
		{[]string{"__complete", "describe", "role", ""}, "alpha\nbeta\n:4\n"},
		{[]string{"__complete", "get", "sessions", "--role", ""}, "alpha\nbeta\n:4\n"},
		{[]string{"__complete", "inject", "alpha-0", ""}, ":4\n"},
	} {
		out := e.must(tc.args...)
		if got := strings.SplitN(out, "Completion ended", 2)[0]; got != tc.want {
			t.Errorf("[%s] expected %q, got %q", strings.Join(tc.args, " "), tc.want, out)
		}
	}
}

// TestStartupPrint: the unit herd startup would write passes systemd's
// own checker, and says what matters.
func TestStartupPrint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	unit := e.must("startup", "--print")
	for _, want := range []string{"Type=notify", "KillMode=process", "Restart=on-failure", "WatchdogSec=", `"daemon" "--state-dir" "` + e.dir + `"`} {
		if !strings.Contains(unit, want) {
			t.Errorf("expected %q in the unit:\n%s", want, unit)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Require(t, "systemd-analyze", "the unit's text was checked only: "+err.Error(), testenv.InstallSystemdAnalyze)
	}
	path := filepath.Join(t.TempDir(), "herd.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Writing and removing go to $XDG_CONFIG_HOME/systemd/user.
	cfgHome := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(e.environ(), "XDG_CONFIG_HOME="+cfgHome)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("herd %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	if out := run("startup"); !strings.Contains(out, "loginctl enable-linger") {
		t.Errorf("[startup] expected the linger hint, got %q", out)
	}
	written, err := os.ReadFile(filepath.Join(cfgHome, "systemd", "user", "herd.service"))
	if err != nil || string(written) != unit {
		t.Errorf("[startup] expected the printed unit written, got %v", err)
	}
	run("startup", "--remove")
	if _, err := os.Stat(filepath.Join(cfgHome, "systemd", "user", "herd.service")); !os.IsNotExist(err) {
		t.Errorf("[startup --remove] expected the unit gone, got %v", err)
	}
}

// TestRunRefusesMissingCommand: a command that cannot be found is refused
// at once, instead of crash-looping with code 127.
func TestRunRefusesMissingCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	_, errs, code := e.herd("run", "x", "--", "no-such-binary", "--flag")
	if code == 0 || errs != "herd: run: command \"no-such-binary\" not found in PATH\n" {
		t.Errorf("expected a clear refusal, got %d %q", code, errs)
	}
	_, errs, code = e.herd("run", "y", "--workdir", t.TempDir(), "--", "./agent.sh")
	if code == 0 || !strings.Contains(errs, "command ./agent.sh: no such file") {
		t.Errorf("expected a clear refusal of a missing script, got %d %q", code, errs)
	}
	if out, errs, _ := e.herd("get", "roles"); out != "" || errs != "No roles found.\n" {
		t.Errorf("expected no role declared, got %q %q", out, errs)
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
