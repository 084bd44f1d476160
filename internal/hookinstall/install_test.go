package hookinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"herd"
	"herd/internal/agents"
)

const herdBin = "/usr/local/bin/herd"

// hookCommands lists every command of event in the JSON settings at path.
func hookCommands(t *testing.T, path, event string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Hooks map[string][]struct {
			Matcher *string `json:"matcher"`
			Hooks   []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", path, err, data)
	}
	var out []string
	for _, g := range s.Hooks[event] {
		for _, h := range g.Hooks {
			out = append(out, h.Command)
		}
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestInstallEveryKind(t *testing.T) {
	for _, kind := range []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini} {
		dir := t.TempDir()
		res, err := Install(kind, dir, herdBin)
		if err != nil {
			t.Fatalf("[%s] %v", kind, err)
		}
		if !res.Changed || res.Files[0] != SettingsPath(kind, dir) {
			t.Errorf("[%s] expected a change to %s, got %+v", kind, SettingsPath(kind, dir), res)
		}
		for _, ev := range agents.HookEvents(kind) {
			got := hookCommands(t, SettingsPath(kind, dir), ev)
			if len(got) != 1 || got[0] != HookCommand(kind, herdBin, ev) {
				t.Errorf("[%s] %s: expected [%s], got %q", kind, ev, HookCommand(kind, herdBin, ev), got)
			}
		}
		again, err := Install(kind, dir, herdBin)
		if err != nil || again.Changed {
			t.Errorf("[%s] second install: expected no change, got %+v, %v", kind, again, err)
		}
	}
}

func TestHookCommand(t *testing.T) {
	if got := HookCommand(herd.AgentClaude, "/opt/my tools/herd", "Stop"); got != "'/opt/my tools/herd' hook Stop" {
		t.Errorf("claude: got %q", got)
	}
	if got := HookCommand(herd.AgentGemini, herdBin, "BeforeTool"); got != herdBin+" hook --agent gemini BeforeTool" {
		t.Errorf("gemini: got %q", got)
	}
}

func TestInstallKeepsUserEntries(t *testing.T) {
	dir := t.TempDir()
	path := SettingsPath(herd.AgentGemini, dir)
	write(t, path, `{
  "theme": "GitHub",
  "hooks": {
    "BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 5000}]}],
    "AfterAgent": [{"hooks": [{"type": "command", "command": "/old/herd hook --agent gemini AfterAgent"}, {"type": "command", "command": "say done"}]}],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "/a/herd hook --agent gemini SessionEnd"}]}, {"hooks": [{"type": "command", "command": "/b/herd hook --agent gemini SessionEnd"}]}]
  }
}`)
	if _, err := Install(herd.AgentGemini, dir, herdBin); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		agents.GeminiBeforeTool: {"./guard.sh", HookCommand(herd.AgentGemini, herdBin, agents.GeminiBeforeTool)},
		agents.GeminiAfterAgent: {HookCommand(herd.AgentGemini, herdBin, agents.GeminiAfterAgent), "say done"},
		agents.HookSessionEnd:   {HookCommand(herd.AgentGemini, herdBin, agents.HookSessionEnd)},
	}
	for ev, w := range want {
		if got := hookCommands(t, path, ev); strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("%s: expected %q, got %q", ev, w, got)
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"theme": "GitHub"`) {
		t.Errorf("other settings lost:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", fi.Mode().Perm())
	}
}

func TestInstallRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := SettingsPath(herd.AgentClaude, dir)
	write(t, bad, `{"hooks": [`)
	tests := []struct {
		name, kind, dir, bin, want string
	}{
		{"go run build", herd.AgentClaude, t.TempDir(), "/tmp/go-build1234/b001/exe/herd", "go run"},
		{"relative", herd.AgentClaude, t.TempDir(), "herd", "not absolute"},
		{"control character", herd.AgentClaude, t.TempDir(), "/bin/her\nd", "control"},
		{"generic", herd.AgentGeneric, t.TempDir(), herdBin, "no hooks"},
		{"invalid json", herd.AgentClaude, dir, herdBin, "invalid settings JSON"},
	}
	for _, tc := range tests {
		_, err := Install(tc.kind, tc.dir, tc.bin)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("[%s] expected an error with %q, got %v", tc.name, tc.want, err)
		}
	}
	if data, _ := os.ReadFile(bad); string(data) != `{"hooks": [` {
		t.Errorf("invalid file was rewritten: %q", data)
	}
}

func TestInstallCodexConfig(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		want     []string // lines the result must hold
	}{
		{"new", "", []string{"[features]", "hooks = true"}},
		{"keeps the user's config", "# mine\nmodel = \"o3\"\n\n[features]\nweb_search = true\n\n[profiles.x]\nmodel = \"y\"\n",
			[]string{"# mine", `model = "o3"`, "[features]", "hooks = true", "web_search = true", "[profiles.x]"}},
		{"feature off turned on", "[features]\nhooks = false\ncodex_hooks = false\n", []string{"hooks = true", "codex_hooks = false"}},
		{"dotted feature", "features.hooks = false\n", []string{"features.hooks = true"}},
		{"notify in a project is left alone", "notify = [\"x\"]\n", []string{`notify = ["x"]`, "hooks = true"}},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		path := filepath.Join(dir, filepath.FromSlash(CodexConfigFile))
		if tc.existing != "" {
			write(t, path, tc.existing)
		}
		res, err := Install(herd.AgentCodex, dir, herdBin)
		if err != nil {
			t.Errorf("[%s] %v", tc.name, err)
			continue
		}
		assertTOMLLines(t, tc.name, path, tc.want)
		if len(res.Files) != 2 || res.Files[1] != path {
			t.Errorf("[%s] expected the config among the files, got %q", tc.name, res.Files)
		}
		again, err := Install(herd.AgentCodex, dir, herdBin)
		if err != nil || again.Changed {
			t.Errorf("[%s] second install: expected no change, got %+v, %v", tc.name, again, err)
		}
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, filepath.FromSlash(CodexConfigFile)), "notify = [\n")
	if _, err := Install(herd.AgentCodex, dir, herdBin); err == nil || !strings.Contains(err.Error(), "invalid TOML") {
		t.Errorf("invalid TOML: expected an error, got %v", err)
	}
}

func TestInstallCodexNotify(t *testing.T) {
	notify := codexNotifyLine(herdBin)
	tests := []struct {
		name     string
		existing string
		want     []string
		notes    int
	}{
		{"new", "", []string{notify}, 0},
		{"before the first table", "model = \"o3\"\n[tui]\nx = 1\n", []string{notify, `model = "o3"`, "[tui]"}, 0},
		{"user notify kept", "notify = [\"notify-send\", \"codex\"]\n", []string{`notify = ["notify-send", "codex"]`}, 1},
		{"older herd notify replaced", "notify = [\"/old/herd\", \"hook\", \"--agent\", \"codex\", \"notify\"]\n", []string{notify}, 0},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "config.toml")
		if tc.existing != "" {
			write(t, path, tc.existing)
		}
		res, err := InstallCodexNotify(path, herdBin)
		if err != nil {
			t.Errorf("[%s] %v", tc.name, err)
			continue
		}
		assertTOMLLines(t, tc.name, path, tc.want)
		if len(res.Notes) != tc.notes {
			t.Errorf("[%s] expected %d notes, got %q", tc.name, tc.notes, res.Notes)
		}
		if again, err := InstallCodexNotify(path, herdBin); err != nil || again.Changed {
			t.Errorf("[%s] second install: expected no change, got %+v, %v", tc.name, again, err)
		}
	}
	if _, err := InstallCodexNotify(filepath.Join(t.TempDir(), "c.toml"), "/root/.cache/go-build/ab/exe/herd"); err == nil {
		t.Error("expected a go run build refused")
	}
}

// assertTOMLLines checks that path is TOML holding each line of want.
func assertTOMLLines(t *testing.T, name, path string, want []string) {
	t.Helper()
	data, _ := os.ReadFile(path)
	var v map[string]any
	if err := toml.Unmarshal(data, &v); err != nil {
		t.Errorf("[%s] result is not TOML: %v\n%s", name, err, data)
	}
	lines := strings.Split(string(data), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("[%s] expected line %q in:\n%s", name, w, data)
		}
	}
}
