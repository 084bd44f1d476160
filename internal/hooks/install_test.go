package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd/internal/activity"
)

const bin = "/usr/local/bin/herd"

// settings decodes the settings file of dir.
func settings(t *testing.T, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(SettingsPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("settings file is not JSON: %v\n%s", err, data)
	}
	return v
}

// commands lists every command of event, in order.
func commands(t *testing.T, s map[string]any, event string) []string {
	t.Helper()
	hooks, _ := s["hooks"].(map[string]any)
	groups, _ := hooks[event].([]any)
	var out []string
	for _, g := range groups {
		hs, _ := g.(map[string]any)["hooks"].([]any)
		for _, h := range hs {
			out = append(out, h.(map[string]any)["command"].(string))
		}
	}
	return out
}

func writeSettings(t *testing.T, dir, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(SettingsPath(dir), []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestInstall(t *testing.T) {
	userHooks := `{
  "permissions": {"allow": ["Bash(go test:*)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh", "timeout": 5}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    "PreCompact": [{"hooks": [{"type": "command", "command": "echo compact"}]}]
  },
  "model": "opus"
}`
	tests := []struct {
		name     string
		existing string // "" = no file
		binary   string
		want     map[string][]string // event -> expected commands; events not listed: just herd's
		check    func(t *testing.T, s map[string]any)
	}{
		{name: "no file", binary: bin},
		{name: "empty file", existing: "\n", binary: bin},
		{name: "empty object", existing: "{}", binary: bin},
		{name: "hooks null", existing: `{"hooks": null}`, binary: bin},
		{
			name: "keeps user hooks and settings", existing: userHooks, binary: bin,
			want: map[string][]string{
				"PreToolUse": {"~/bin/guard.sh", bin + " hook PreToolUse"},
				"Stop":       {"notify-send done", bin + " hook Stop"},
			},
			check: func(t *testing.T, s map[string]any) {
				if s["model"] != "opus" || s["permissions"] == nil {
					t.Errorf("[keeps user hooks and settings] expected other keys kept, got %v", s)
				}
				pc := commands(t, s, "PreCompact")
				if len(pc) != 1 || pc[0] != "echo compact" {
					t.Errorf("[keeps user hooks and settings] expected PreCompact untouched, got %v", pc)
				}
				pre := s["hooks"].(map[string]any)["PreToolUse"].([]any)
				if m := pre[0].(map[string]any); m["matcher"] != "Bash" || m["hooks"].([]any)[0].(map[string]any)["timeout"] != 5.0 {
					t.Errorf("[keeps user hooks and settings] expected user group intact, got %v", m)
				}
				if m := pre[1].(map[string]any); m["matcher"] != "*" {
					t.Errorf("[keeps user hooks and settings] expected herd matcher *, got %v", m)
				}
			},
		},
		{
			name: "replaces older herd path",
			existing: `{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "/opt/old/herd hook PreToolUse"}]}],
			  "Stop": [{"hooks": [{"type": "command", "command": "'/home/me/my tools/herd' hook Stop"}]}]}}`,
			binary: bin,
		},
		{
			name: "drops duplicates",
			existing: `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/a/herd hook Stop"}]},
			  {"hooks": [{"type": "command", "command": "/b/herd hook Stop"}, {"type": "command", "command": "say hi"}]},
			  {"hooks": [{"type": "command", "command": "/c/herd hook Stop"}]}]}}`,
			binary: bin,
			want:   map[string][]string{"Stop": {bin + " hook Stop", "say hi"}},
		},
		{
			name:     "updates herd entry shared with a user hook in place",
			existing: `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say hi"}, {"type": "command", "command": "/a/herd hook Stop", "timeout": 3}]}]}}`,
			binary:   bin,
			want:     map[string][]string{"Stop": {"say hi", bin + " hook Stop"}},
		},
		{
			name:     "leaves look-alike hooks of other tools",
			existing: `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "other-tool hook Stop"}, {"type": "command", "command": "/a/herd hook PreToolUse"}, {"type": "command", "command": "/a/herd hook Stop --x"}]}]}}`,
			binary:   bin,
			want:     map[string][]string{"Stop": {"other-tool hook Stop", "/a/herd hook PreToolUse", "/a/herd hook Stop --x", bin + " hook Stop"}},
		},
		{
			name:     "fixes a narrowed matcher on herd's own group",
			existing: `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/herd hook PreToolUse"}]}]}}`,
			binary:   bin,
			check: func(t *testing.T, s map[string]any) {
				g := s["hooks"].(map[string]any)["PreToolUse"].([]any)[0].(map[string]any)
				if _, ok := g["matcher"]; ok {
					t.Errorf("[fixes a narrowed matcher] expected matcher removed, got %v", g["matcher"])
				}
			},
		},
		{name: "binary with spaces is quoted", binary: "/home/me/my tools/herd"},
		{name: "binary with a quote", binary: "/home/me/it's/herd"},
		{name: "binary named otherwise", binary: "/tmp/agent-supervisor"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if tt.existing != "" {
			writeSettings(t, dir, tt.existing, 0o644)
		}
		changed, err := Install(dir, tt.binary)
		if err != nil || !changed {
			t.Errorf("[%s] expected changed, nil … got %v, %v", tt.name, changed, err)
			continue
		}
		s := settings(t, dir)
		for _, ev := range activity.HookEvents() {
			want := tt.want[ev]
			if want == nil {
				want = []string{Command(tt.binary, ev)}
			}
			if diff := cmp.Diff(want, commands(t, s, ev)); diff != "" {
				t.Errorf("[%s] %s: expected … got … (-want +got):\n%s", tt.name, ev, diff)
			}
		}
		if tt.check != nil {
			tt.check(t, s)
		}
		// Idempotent: the second run changes nothing, byte for byte.
		before, _ := os.ReadFile(SettingsPath(dir))
		changed, err = Install(dir, tt.binary)
		after, _ := os.ReadFile(SettingsPath(dir))
		if err != nil || changed || string(before) != string(after) {
			t.Errorf("[%s] second run: expected unchanged, nil … got %v, %v (bytes equal %v)", tt.name, changed, err, string(before) == string(after))
		}
	}
}

func TestInstallKeepsKeyOrder(t *testing.T) {
	dir := t.TempDir()
	writeSettings(t, dir, `{"zeta": 1, "hooks": {"Stop": []}, "alpha": {"b": 1, "a": 2}}`, 0o644)
	if _, err := Install(dir, bin); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(SettingsPath(dir))
	s := string(data)
	iz, ih, ia, ib, iaa := strings.Index(s, `"zeta"`), strings.Index(s, `"hooks"`), strings.Index(s, `"alpha"`), strings.Index(s, `"b": 1`), strings.Index(s, `"a": 2`)
	if !(iz < ih && ih < ia && ib < iaa) {
		t.Errorf("[key order] expected zeta, hooks, alpha{b, a} in order, got\n%s", s)
	}
}

func TestInstallModes(t *testing.T) {
	dir := t.TempDir()
	if _, err := Install(dir, bin); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(SettingsPath(dir)); fi.Mode().Perm() != newFileMode {
		t.Errorf("[new file] expected mode %o, got %o", newFileMode, fi.Mode().Perm())
	}
	dir = t.TempDir()
	writeSettings(t, dir, `{"model":"x"}`, 0o640)
	if err := os.Chmod(SettingsPath(dir), 0o640); err != nil { // umask-proof
		t.Fatal(err)
	}
	if _, err := Install(dir, bin); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(SettingsPath(dir)); fi.Mode().Perm() != 0o640 {
		t.Errorf("[kept mode] expected 640, got %o", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Join(dir, ".claude"))
	if len(entries) != 1 {
		t.Errorf("[no temp files left] expected 1 file, got %d", len(entries))
	}
}

func TestInstallThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "real.json")
	if err := os.WriteFile(target, []byte(`{"model":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, SettingsPath(dir)); err != nil {
		t.Fatal(err)
	}
	if changed, err := Install(dir, bin); err != nil || !changed {
		t.Fatalf("[symlink] expected changed, nil … got %v, %v", changed, err)
	}
	if fi, err := os.Lstat(SettingsPath(dir)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("[symlink] expected the link kept, got %v, %v", fi, err)
	}
	if got := commands(t, settings(t, dir), "Stop"); len(got) != 1 {
		t.Errorf("[symlink] expected the target updated, got %v", got)
	}
}

func TestInstallErrors(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		binary   string
		want     string
	}{
		{"invalid json", `{"hooks": {`, bin, "invalid settings JSON"},
		{"not an object", `[1, 2]`, bin, "invalid settings JSON"},
		{"trailing garbage", `{} {}`, bin, "invalid settings JSON"},
		{"hooks is an array", `{"hooks": []}`, bin, `"hooks" is not an object`},
		{"event is an object", `{"hooks": {"Stop": {"x": 1}}}`, bin, `"hooks.Stop" is not an array`},
		{"group is a string", `{"hooks": {"Stop": ["x"]}}`, bin, "entry 0 is not an object"},
		{"group hooks not array", `{"hooks": {"Stop": [{"hooks": 3}]}}`, bin, `entry 0: "hooks" is not an array`},
		{"relative binary", `{}`, "herd", "not absolute"},
		{"control characters", `{}`, "/bin/her\nd", "control characters"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		writeSettings(t, dir, tt.existing, 0o644)
		changed, err := Install(dir, tt.binary)
		if err == nil || changed || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[%s] expected false, error containing %q … got %v, %v", tt.name, tt.want, changed, err)
		}
		if data, _ := os.ReadFile(SettingsPath(dir)); string(data) != tt.existing {
			t.Errorf("[%s] expected file untouched, got %q", tt.name, data)
		}
	}
}

func TestShellQuoteRoundTrip(t *testing.T) {
	tests := []struct {
		in, quoted string
	}{
		{"/usr/bin/herd", "/usr/bin/herd"},
		{"/a b/herd", "'/a b/herd'"},
		{"/it's/herd", `'/it'\''s/herd'`},
		{"/x/$HOME/herd", "'/x/$HOME/herd'"},
		{"", "''"},
	}
	for _, tt := range tests {
		q := shellQuote(tt.in)
		if q != tt.quoted {
			t.Errorf("[%s] expected %s, got %s", tt.in, tt.quoted, q)
		}
		words, ok := shellSplit(q + " hook Stop")
		if !ok || len(words) != 3 || words[0] != tt.in {
			t.Errorf("[%s] expected round trip, got %q %v", tt.in, words, ok)
		}
	}
}

func TestShellSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{`a  b	c`, []string{"a", "b", "c"}, true},
		{`"/a b/herd" hook Stop`, []string{"/a b/herd", "hook", "Stop"}, true},
		{`/a\ b/herd hook`, []string{"/a b/herd", "hook"}, true},
		{`"x\"y\\z\a"`, []string{`x"y\z\a`}, true},
		{`''`, []string{""}, true},
		{"\"a\\\nb\" c\\\nd", []string{"ab", "cd"}, true},
		{`'open`, nil, false},
		{`"open`, nil, false},
		{`trailing\`, nil, false},
		{``, nil, true},
	}
	for _, tt := range tests {
		got, ok := shellSplit(tt.in)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("[%s] expected %q %v, got %q %v", tt.in, tt.want, tt.ok, got, ok)
		}
	}
}

func TestInstallKeepsUserTextReadable(t *testing.T) {
	dir := t.TempDir()
	writeSettings(t, dir, `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "make lint && echo '<ok>'"}]}]}}`, 0o644)
	if _, err := Install(dir, "/opt/a&b/herd"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(SettingsPath(dir))
	if !strings.Contains(string(data), `"make lint && echo '<ok>'"`) || !strings.Contains(string(data), `'/opt/a&b/herd' hook Stop`) {
		t.Errorf("[no HTML escaping] expected text kept verbatim, got\n%s", data)
	}
}
