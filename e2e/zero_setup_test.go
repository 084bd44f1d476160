package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
)

// fakeAgent writes an executable script named name into dir that stands
// for a real agent: it copies the --settings file it was given to
// out/settings.<n> (n counts its launches), runs the UserPromptSubmit hook
// command found there with a JSON payload, as Claude would, records its
// argv (one word a line) in out/argv.<n>, last, and then stays at its
// "prompt". Each file is renamed into place whole.
func fakeAgent(t *testing.T, dir, name, out string) string {
	t.Helper()
	script := fmt.Sprintf(`#!/bin/sh
out=%q
echo launch >> "$out/launches"
n=$(wc -l < "$out/launches" | tr -d ' ')
argv=$(printf '%%s\n' "$@")
settings=
while [ $# -gt 0 ]; do
  case "$1" in
    --settings) settings=$2; shift ;;
  esac
  shift
done
if [ -n "$settings" ]; then
  cp "$settings" "$out/settings.tmp" && mv "$out/settings.tmp" "$out/settings.$n"
  cmd=$(sed -n 's/.*"command": "\(.* hook UserPromptSubmit\)".*/\1/p' "$settings" | head -n 1)
  echo '{"hook_event_name":"UserPromptSubmit","session_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}' | sh -c "$cmd"
fi
# argv.<n> last, each file renamed into place whole: once it is there,
# the launch's settings copy is complete.
printf '%%s\n' "$argv" > "$out/argv.tmp" && mv "$out/argv.tmp" "$out/argv.$n"
while :; do sleep 60; done
`, out)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// readArgv waits for the fake agent's n-th argv.
func readArgv(t *testing.T, e *env, out string, n int) []string {
	t.Helper()
	path := filepath.Join(out, fmt.Sprintf("argv.%d", n))
	e.waitFor("the agent's argv "+path, 30*time.Second, func() bool { _, err := os.Stat(path); return err == nil })
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// TestZeroSetupHooks: a command herd knows as Claude, launched in a git
// repository with no herd setup, gets --settings naming a file under the
// state dir whose hooks run herd through its stable link; the hook it runs
// reports working ([hook]); a restart rewrites the file and passes
// --settings once; the repository stays clean. A project with herd's own
// entries (`herd hooks install`) gets none from the launch. A Codex
// command gets its hooks, their trust and notify as -c overrides, and its
// user config is left alone.
func TestZeroSetupHooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	root := t.TempDir()
	bindir, out, proj := filepath.Join(root, "bin"), filepath.Join(root, "out"), filepath.Join(root, "proj")
	for _, d := range []string{bindir, out, proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		c := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	git(proj, "init", "-q")
	if err := os.WriteFile(filepath.Join(proj, "README"), []byte("a project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(proj, "add", "-A")
	git(proj, "commit", "-q", "-m", "start")
	claude := fakeAgent(t, bindir, "claude", out)

	e.must("run", "w", "--workdir", proj, "--", claude, "--model", "opus")
	argv := readArgv(t, e, out, 1)
	file := filepath.Join(e.dir, "hooks", "w-0.claude.json")
	if i := slices.Index(argv, "--settings"); i < 0 || i+1 >= len(argv) || argv[i+1] != file {
		t.Fatalf("[launch] expected --settings %s, got %q", file, argv)
	}
	if !slices.Contains(argv, "--session-id") || argv[len(argv)-2] != "--model" {
		t.Errorf("[launch] expected the session id and the role's flags kept, got %q", argv)
	}
	link := filepath.Join(e.dir, "bin", "herd")
	if target, err := os.Readlink(link); err != nil || target != bin {
		t.Errorf("[launch] expected %s -> %s, got %q, %v", link, bin, target, err)
	}
	var settings struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	data, err := os.ReadFile(filepath.Join(out, "settings.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &settings); err != nil {
		t.Fatalf("[launch] the settings file is not JSON: %v\n%s", err, data)
	}
	for _, ev := range agents.HookEvents(herd.AgentClaude) {
		g := settings.Hooks[ev]
		if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != link+" hook "+ev {
			t.Errorf("[launch] hooks of %s: expected one running %s, got %+v", ev, link, g)
		}
	}
	e.waitFor("w-0 working from its hook", 15*time.Second, func() bool {
		return hasEvent(e, "w-0", herd.EventActivity, func(ev herd.Event) bool {
			return ev.Reason == "hook" && ev.Data["event"] == agents.HookUserPromptSubmit && ev.Data["to"] == string(herd.ActivityWorking)
		})
	})
	if ev := e.eventsOf("w-0", herd.EventSpawned, 1)[0]; ev.Data["hooks"] != "herd" {
		t.Errorf("[launch] expected data hooks = herd, got %v", ev.Data)
	}

	// A restart: the file is made again (removed here first), --settings
	// passed once.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	e.must("restart", "w-0")
	argv = readArgv(t, e, out, 2)
	if n := strings.Count(strings.Join(argv, "\n"), "--settings"); n != 1 {
		t.Errorf("[restart] expected --settings once, got %q", argv)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("[restart] the settings file was not made again: %v", err)
	}
	if st := git(proj, "status", "--porcelain", "--ignored"); strings.TrimSpace(st) != "" {
		t.Errorf("git status is not clean:\n%s", st)
	}

	// A project with herd's own entries: nothing added at launch.
	own := filepath.Join(root, "own")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	e.must("hooks", "install", "--dir", own)
	e.must("run", "p", "--workdir", own, "--", claude)
	argv = readArgv(t, e, out, 3)
	if slices.Contains(argv, "--settings") {
		t.Errorf("[project hooks] expected no --settings, got %q", argv)
	}
	if ev := e.eventsOf("p-0", herd.EventSpawned, 1)[0]; ev.Data["hooks"] != "project: "+filepath.Join(own, ".claude", "settings.local.json") {
		t.Errorf("[project hooks] expected data hooks naming the project's file, got %v", ev.Data["hooks"])
	}

	// Codex: -c overrides, nothing written into its home.
	codexOut := filepath.Join(root, "codex-out")
	codexHome := filepath.Join(root, "codex-home")
	for _, d := range []string{codexOut, codexHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	codex := fakeAgent(t, bindir, "codex", codexOut)
	e.must("run", "cx", "--workdir", proj, "--env", "CODEX_HOME="+codexHome, "--", codex, "-a", "on-request")
	argv = readArgv(t, e, codexOut, 1)
	joined := strings.Join(argv, "\n")
	for _, want := range []string{
		"features.hooks=true",
		`hooks.Stop=[{hooks=[{type="command",command="` + link + ` hook --agent codex Stop",timeout=5}]}]`,
		`"/<session-flags>/config.toml:stop:0:0"={trusted_hash="` + agents.CodexHookHash(agents.HookStop, link+" hook --agent codex Stop", agents.CodexTimeout(agents.HookStop), "") + `"}`,
		`notify=["` + link + `", "hook", "--agent", "codex", "notify"]`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("[codex] expected %s in its argv, got:\n%s", want, joined)
		}
	}
	if argv[len(argv)-2] != "-a" {
		t.Errorf("[codex] expected the role's flags last, got %q", argv)
	}
	if entries, _ := os.ReadDir(codexHome); len(entries) != 0 {
		t.Errorf("[codex] herd wrote into CODEX_HOME: %v", entries)
	}
}

// TestHooksInstallCodexNotify: `herd hooks install --agent codex` sets
// Codex's notify program in the user's config, keeps one of the user's
// own, and changes nothing the second time.
func TestHooksInstallCodexNotify(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	root := t.TempDir()
	home, proj := filepath.Join(root, "codex-home"), filepath.Join(root, "proj")
	e.extraEnv = append(e.extraEnv, "CODEX_HOME="+home)
	cfg := filepath.Join(home, "config.toml")
	out := e.must("hooks", "install", "--agent", "codex", "--dir", proj)
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatalf("no config.toml: %v (output %s)", err, out)
	}
	want := fmt.Sprintf(`notify = [%q, "hook", "--agent", "codex", "notify"]`, bin)
	if !strings.Contains(string(data), want) {
		t.Errorf("expected %s in config.toml, got:\n%s", want, data)
	}
	if again := e.must("hooks", "install", "--agent", "codex", "--dir", proj); !strings.Contains(again, "nothing changed") {
		t.Errorf("expected nothing changed the second time, got %q", again)
	}
	if err := os.WriteFile(cfg, []byte("notify = [\"notify-send\", \"codex\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = e.must("hooks", "install", "--agent", "codex", "--dir", proj)
	if !strings.Contains(out, "codex notify is already set") {
		t.Errorf("expected a note that the user's notify is kept, got %q", out)
	}
	if data, _ := os.ReadFile(cfg); string(data) != "notify = [\"notify-send\", \"codex\"]\n" {
		t.Errorf("the user's notify was changed:\n%s", data)
	}
}
