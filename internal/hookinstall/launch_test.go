package hookinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/agents"
)

// settingsDoc decodes a JSON settings document into its hooks (event ->
// commands) and everything else.
func settingsDoc(t *testing.T, data []byte) (map[string][]string, map[string]any) {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	hooks := map[string][]string{}
	for ev, gs := range s.Hooks {
		for _, g := range gs {
			for _, h := range g.Hooks {
				hooks[ev] = append(hooks[ev], h.Command)
			}
		}
	}
	delete(top, "hooks")
	return hooks, top
}

func TestForLaunch(t *testing.T) {
	const bin = "/state/bin/herd"
	dir := t.TempDir()
	file := filepath.Join(dir, "state", "hooks", "w.json")
	userSettings := filepath.Join(dir, "user-settings.json")
	write(t, userSettings, `{"permissions":{"allow":["Bash(ls)"]},"hooks":{"Stop":[{"hooks":[{"type":"command","command":"my-stop"}]}]}}`)
	geminiHome := filepath.Join(dir, "ghome")
	write(t, filepath.Join(geminiHome, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
	badSettings := filepath.Join(dir, "bad.json")
	write(t, badSettings, `{not json`)
	installed := filepath.Join(dir, "installed")
	if _, err := Install(herd.AgentClaude, installed, "/usr/local/bin/herd"); err != nil {
		t.Fatal(err)
	}
	// A home whose user settings run herd's hooks (as `herd hooks install
	// --dir ~` leaves them).
	installedHome := filepath.Join(dir, "installed-home")
	write(t, filepath.Join(installedHome, ".claude", "settings.json"), `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/opt/bin/herd hook Stop"}]}]}}`)
	write(t, filepath.Join(installedHome, ".codex", "hooks.json"), `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/opt/bin/herd hook --agent codex Stop"}]}]}}`)
	codexHome := filepath.Join(dir, "codexhome")
	write(t, filepath.Join(codexHome, "config.toml"), "notify = [\"notify-send\"]\n")

	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		kind    string
		argv    []string
		workdir string
		getenv  func(string) string
		// what must hold
		note      string
		argv2     []string // the launch's argv; nil: checked by check
		env       map[string]string
		fileHooks bool                // herd's hooks in the file
		keep      map[string]any      // the user's settings kept in the file
		userHooks map[string][]string // the user's hooks kept
		notes     int
		check     func(t *testing.T, h LaunchHooks)
	}{
		{name: "claude", kind: herd.AgentClaude, argv: []string{"claude", "--model", "opus"}, workdir: dir, getenv: env(),
			note: NoteWired, argv2: []string{"claude", "--settings", file, "--model", "opus"}, fileHooks: true},
		{name: "claude own settings file", kind: herd.AgentClaude, argv: []string{"claude", "--settings", "user-settings.json"}, workdir: dir, getenv: env(),
			note: NoteWired, argv2: []string{"claude", "--settings", file}, fileHooks: true,
			keep: map[string]any{"permissions": map[string]any{"allow": []any{"Bash(ls)"}}}, userHooks: map[string][]string{"Stop": {"my-stop"}}, notes: 1},
		{name: "claude own inline settings", kind: herd.AgentClaude, argv: []string{"claude", `--settings={"model":"opus"}`}, workdir: dir, getenv: env(),
			note: NoteWired, argv2: []string{"claude", "--settings=" + file}, fileHooks: true, keep: map[string]any{"model": "opus"}, notes: 1},
		// The relaunch of the launch above (its argv names herd's file,
		// written by the case above): one herd entry per event, the user's
		// inline settings still there.
		{name: "claude relaunch keeps one herd entry", kind: herd.AgentClaude, argv: []string{"claude", "--settings", file}, workdir: dir, getenv: env(),
			note: NoteWired, argv2: []string{"claude", "--settings", file}, fileHooks: true, keep: map[string]any{"model": "opus"}, notes: 1},
		{name: "claude unreadable settings", kind: herd.AgentClaude, argv: []string{"claude", "--settings", "missing.json"}, workdir: dir, getenv: env(),
			note: "left out: --settings open " + filepath.Join(dir, "missing.json") + ": no such file or directory", argv2: []string{"claude", "--settings", "missing.json"}},
		{name: "claude invalid settings", kind: herd.AgentClaude, argv: []string{"claude", "--settings", badSettings}, workdir: dir, getenv: env(),
			argv2: []string{"claude", "--settings", badSettings}, check: func(t *testing.T, h LaunchHooks) {
				if !strings.HasPrefix(h.Note, "left out: --settings "+badSettings+": invalid settings JSON") {
					t.Errorf("note %q", h.Note)
				}
			}},
		{name: "claude project has herd's hooks", kind: herd.AgentClaude, argv: []string{"claude"}, workdir: installed, getenv: env(),
			note: "project: " + filepath.Join(installed, ClaudeSettingsFile), argv2: []string{"claude"}},
		{name: "claude user settings have herd's hooks", kind: herd.AgentClaude, argv: []string{"claude"}, workdir: dir, getenv: env("HOME", installedHome),
			note: "user: " + filepath.Join(installedHome, ".claude", "settings.json"), argv2: []string{"claude"}},
		{name: "codex user hooks have herd's", kind: herd.AgentCodex, argv: []string{"codex"}, workdir: dir, getenv: env("CODEX_HOME", filepath.Join(installedHome, ".codex")),
			note: "user: " + filepath.Join(installedHome, ".codex", "hooks.json"), argv2: []string{"codex"}},
		{name: "wrapper", kind: herd.AgentClaude, argv: []string{"./run.sh"}, workdir: dir, getenv: env(), note: "not a known agent", argv2: []string{"./run.sh"}},
		{name: "generic", kind: herd.AgentGeneric, argv: []string{"aider"}, workdir: dir, getenv: env(), note: "not a known agent", argv2: []string{"aider"}},
		{name: "gemini", kind: herd.AgentGemini, argv: []string{"gemini"}, workdir: dir, getenv: env("HOME", geminiHome),
			note: NoteWired, argv2: []string{"gemini"}, notes: 1, check: func(t *testing.T, h LaunchHooks) {
				user := filepath.Join(geminiHome, ".gemini", "settings.json")
				before, _ := os.ReadFile(user)
				if err := h.Write(); err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(user)
				if err != nil {
					t.Fatal(err)
				}
				hooks, rest := settingsDoc(t, data)
				for _, ev := range agents.HookEvents(herd.AgentGemini) {
					if diff := cmp.Diff([]string{HookCommand(herd.AgentGemini, bin, ev)}, hooks[ev]); diff != "" {
						t.Errorf("hooks of %s (-want +got):\n%s", ev, diff)
					}
				}
				if diff := cmp.Diff(map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}}, rest); diff != "" {
					t.Errorf("the user's settings (-want +got):\n%s", diff)
				}
				// A second launch changes nothing.
				if err := h.Write(); err != nil {
					t.Fatal(err)
				}
				if again, _ := os.ReadFile(user); string(again) != string(data) || string(before) == string(data) {
					t.Errorf("expected one change, then none:\n%s\n%s\n%s", before, data, again)
				}
			}},
		{name: "gemini GEMINI_CLI_HOME", kind: herd.AgentGemini, argv: []string{"gemini"}, workdir: dir, getenv: env("HOME", "/nonexistent", "GEMINI_CLI_HOME", geminiHome),
			note: NoteWired, argv2: []string{"gemini"}, notes: 1},
		{name: "gemini no home", kind: herd.AgentGemini, argv: []string{"gemini"}, workdir: dir, getenv: env(),
			note: "left out: no home for Gemini's user settings", argv2: []string{"gemini"}},
		{name: "codex", kind: herd.AgentCodex, argv: []string{"codex", "-a", "on-request"}, workdir: dir, getenv: env("HOME", dir),
			note: NoteWired, check: func(t *testing.T, h LaunchHooks) {
				want, _ := agents.InsertAfterAgent(herd.AgentCodex, []string{"codex", "-a", "on-request"}, "",
					agents.CodexHookOverrides(nil, agents.HookEvents(herd.AgentCodex), func(ev string) string { return HookCommand(herd.AgentCodex, bin, ev) },
						[]string{bin, "hook", "--agent", "codex", "notify"})...)
				if diff := cmp.Diff(want, h.Argv); diff != "" {
					t.Errorf("argv (-want +got):\n%s", diff)
				}
				// A relaunch from this argv (a resume keeps the options) gets
				// them once.
				again := ForLaunch(LaunchSpec{Kind: herd.AgentCodex, Argv: slices.Insert(slices.Clone(h.Argv), 1, "resume", "th_1"), Workdir: dir, Getenv: env("HOME", dir), Binary: bin})
				if n := strings.Count(strings.Join(again.Argv, " "), "hooks.state="); n != 1 {
					t.Errorf("relaunch has %d trust overrides: %q", n, again.Argv)
				}
			}},
		{name: "codex user notify kept", kind: herd.AgentCodex, argv: []string{"codex"}, workdir: dir, getenv: env("CODEX_HOME", codexHome),
			note: NoteWired, notes: 1, check: func(t *testing.T, h LaunchHooks) {
				if slices.ContainsFunc(h.Argv, func(a string) bool { return strings.HasPrefix(a, "notify=") }) {
					t.Errorf("herd's notify replaced the user's: %q", h.Argv)
				}
			}},
	}
	for _, tc := range tests {
		h := ForLaunch(LaunchSpec{Kind: tc.kind, Argv: tc.argv, Workdir: tc.workdir, Getenv: tc.getenv, Binary: bin, File: file})
		if tc.note != "" && h.Note != tc.note {
			t.Errorf("[%s] expected note %q, got %q", tc.name, tc.note, h.Note)
		}
		if tc.argv2 != nil {
			if diff := cmp.Diff(tc.argv2, h.Argv); diff != "" {
				t.Errorf("[%s] argv (-want +got):\n%s", tc.name, diff)
			}
		}
		if diff := cmp.Diff(tc.env, h.Env); diff != "" {
			t.Errorf("[%s] env (-want +got):\n%s", tc.name, diff)
		}
		if len(h.Notes) != tc.notes {
			t.Errorf("[%s] expected %d notes, got %q", tc.name, tc.notes, h.Notes)
		}
		if tc.check != nil {
			tc.check(t, h)
		}
		if !tc.fileHooks {
			if h.File != "" {
				t.Errorf("[%s] a settings file %s for a launch without it", tc.name, h.File)
			}
			continue
		}
		if h.File != file {
			t.Errorf("[%s] expected file %s, got %q", tc.name, file, h.File)
			continue
		}
		hooks, rest := settingsDoc(t, h.Content)
		for _, ev := range agents.HookEvents(tc.kind) {
			cmds := hooks[ev]
			want := append(slices.Clone(tc.userHooks[ev]), HookCommand(tc.kind, bin, ev))
			if diff := cmp.Diff(want, cmds); diff != "" {
				t.Errorf("[%s] hooks of %s (-want +got):\n%s", tc.name, ev, diff)
			}
		}
		if tc.keep == nil {
			tc.keep = map[string]any{}
		}
		if diff := cmp.Diff(tc.keep, rest); diff != "" {
			t.Errorf("[%s] the user's settings (-want +got):\n%s", tc.name, diff)
		}
		// Written, it is there with mode 0600.
		if err := h.Write(); err != nil {
			t.Fatalf("[%s] %v", tc.name, err)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("[%s] written file: %v %v", tc.name, fi, err)
		}
	}
}

func TestStableBinary(t *testing.T) {
	state := t.TempDir()
	a, b := filepath.Join(state, "v1", "herd"), filepath.Join(state, "v2", "herd")
	link, err := StableBinary(state, a)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(link); got != a {
		t.Errorf("link to %q, want %s", got, a)
	}
	// A new herd binary: the same path, the link moved.
	link2, err := StableBinary(state, b)
	if err != nil {
		t.Fatal(err)
	}
	if link2 != link {
		t.Errorf("the hook binary path changed with the binary: %s -> %s", link, link2)
	}
	if got, _ := os.Readlink(link); got != b {
		t.Errorf("link to %q, want %s", got, b)
	}
	if m, _ := filepath.Glob(filepath.Join(state, "bin", "*.tmp")); len(m) > 0 {
		t.Errorf("temporary links left: %v", m)
	}
}
