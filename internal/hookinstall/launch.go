package hookinstall

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	toml "github.com/pelletier/go-toml/v2"

	"herd"
	"herd/internal/agents"
)

// LaunchSpec is one launch of an agent that is to report through herd's
// hooks.
type LaunchSpec struct {
	Kind     string   // the role's agent kind
	Argv     []string // the command, as it will run
	Resolved string   // Argv[0] resolved in PATH (agents.Resolve)
	Workdir  string
	// Getenv reads the launch's environment (the role's env over the
	// daemon's): the settings paths the user set are merged, not replaced.
	Getenv func(string) string
	// Binary is the herd binary the hooks run (StableBinary).
	Binary string
	// File is herd's settings file for this launch, under the state dir
	// (Claude's --settings, Gemini's system settings).
	File string
}

// LaunchHooks is what gives a launch herd's hooks: its argv, the
// environment to add, and the settings file to write first (File with
// Content; "" for none).
type LaunchHooks struct {
	Argv    []string
	Env     map[string]string
	File    string
	Content []byte
	// Note says what was done ("herd") or why hooks were left out; the
	// spawned event carries it (data hooks).
	Note string
	// Notes are smaller remarks (a setting of the user's kept).
	Notes []string

	// userFile is a user's settings file Write merges herd's entries
	// into (Gemini), for kind, running binary.
	userFile, kind, binary string
}

// Wired reports whether the launch gets herd's hooks.
func (h LaunchHooks) Wired() bool { return h.Note == NoteWired }

// NoteWired is LaunchHooks.Note when herd's hooks are given to the launch.
const NoteWired = "herd"

// ForLaunch gives a launch of a known agent herd's hooks without writing
// into the user's repository or config: Claude Code a --settings file
// (merged by Claude over the user's settings; a --settings the command
// already passes is merged into herd's file), Codex `-c` overrides with
// the hooks, their trust (so no "Hooks need review" dialog stops the
// launch) and its notify program (unless the user's config has one),
// Gemini CLI its user settings (~/.gemini/settings.json of the launch's
// home: herd's entries merged in, the user's kept; see Write). A command that is no known agent, or a
// project whose settings already run herd's hooks (`herd hooks install`),
// is left as it is, and Note says why.
func ForLaunch(in LaunchSpec) LaunchHooks {
	out := LaunchHooks{Argv: slices.Clone(in.Argv)}
	if in.Getenv == nil {
		in.Getenv = os.Getenv
	}
	if k := agents.Infer(in.Argv, in.Resolved); k != in.Kind || agents.HookEvents(k) == nil {
		out.Note = "not a known agent"
		return out
	}
	if p, ok := projectHooks(in.Kind, in.Workdir); ok {
		out.Note = "project: " + p
		return out
	}
	if p, ok := userHooks(in.Kind, in.Getenv); ok {
		out.Note = "user: " + p
		return out
	}
	switch in.Kind {
	case herd.AgentClaude:
		argv, prior, _ := agents.WithSettingsFile(in.Argv, in.Resolved, in.File)
		base, err := settingsValue(prior, in.Workdir)
		if err != nil {
			out.Note = "left out: --settings " + err.Error()
			return out
		}
		content, err := merge(base, in.Kind, in.Binary)
		if err != nil {
			out.Note = "left out: --settings " + prior + ": " + err.Error()
			return out
		}
		out.Argv, out.File, out.Content = argv, in.File, content
		if prior != "" {
			out.Notes = append(out.Notes, "the command's --settings "+clipNote(prior)+" merged into herd's")
		}
	case herd.AgentGemini:
		// Gemini CLI (0.61) reads a system settings file only when root
		// owns it and every directory above it: a file of herd's cannot
		// be one. Its user settings (whose hooks run in every trusted
		// folder) get herd's entries instead; outside herd they do
		// nothing (`herd hook` without HERD_SESSION returns at once).
		home := in.Getenv("GEMINI_CLI_HOME")
		if home == "" {
			home = in.Getenv("HOME")
		}
		if home == "" {
			out.Note = "left out: no home for Gemini's user settings"
			return out
		}
		path := filepath.Join(home, ".gemini", "settings.json")
		if _, _, err := readSettings(path); err != nil {
			out.Note = "left out: " + err.Error()
			return out
		}
		out.userFile, out.kind, out.binary = path, in.Kind, in.Binary
		out.Notes = append(out.Notes, "herd's hooks merged into "+path)
	case herd.AgentCodex:
		argv := dropHerdCodexOverrides(in.Argv)
		var notify []string
		if cfg := codexUserConfig(in.Getenv); cfg != "" {
			if n, err := codexHasNotify(cfg); err != nil {
				out.Notes = append(out.Notes, "notify left out: "+err.Error())
			} else if n {
				out.Notes = append(out.Notes, "notify left out: "+cfg+" sets its own")
			} else {
				notify = []string{in.Binary, "hook", "--agent", herd.AgentCodex, "notify"}
			}
		}
		words := agents.CodexHookOverrides(argv, agents.HookEvents(in.Kind), func(ev string) string {
			return HookCommand(in.Kind, in.Binary, ev)
		}, notify)
		argv, ok := agents.InsertAfterAgent(in.Kind, argv, in.Resolved, words...)
		if !ok {
			out.Note = "not a known agent"
			return out
		}
		out.Argv = argv
	}
	out.Note = NoteWired
	return out
}

// Write writes the launch's settings file (mode 0600, its directory 0700),
// when it has one, and merges herd's entries into the user's settings
// file the launch reads them from (Gemini), atomically, keeping the
// user's.
func (h LaunchHooks) Write() error {
	if h.userFile != "" {
		if _, err := installJSON(h.userFile, h.kind, h.binary); err != nil {
			return err
		}
	}
	if h.File == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.File), 0o700); err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	return writeAtomic(h.File, h.Content, 0o600)
}

// settingsValue reads the value of Claude's --settings: inline JSON, or a
// file (relative to workdir). "" is none.
func settingsValue(v, workdir string) ([]byte, error) {
	t := strings.TrimSpace(v)
	switch {
	case t == "":
		return nil, nil
	case strings.HasPrefix(t, "{"):
		return []byte(t), nil
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(workdir, v)
	}
	data, err := os.ReadFile(v)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// dropHerdCodexOverrides returns argv without the `-c` overrides a former
// launch got from herd (a resume keeps the prior command's options).
func dropHerdCodexOverrides(argv []string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		if argv[i] == "--" {
			return append(out, argv[i:]...)
		}
		if (argv[i] == "-c" || argv[i] == "--config") && i+1 < len(argv) && agents.IsHerdCodexOverride(argv[i+1]) {
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return out
}

// codexUserConfig is the user's Codex config file ($CODEX_HOME/config.toml,
// else ~/.codex/config.toml); "" when no home is known.
func codexUserConfig(getenv func(string) string) string {
	if h := getenv("CODEX_HOME"); h != "" {
		return filepath.Join(h, "config.toml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".codex", "config.toml")
	}
	return ""
}

// CodexUserConfig is the user's Codex config file in this environment, for
// `herd hooks install --agent codex`.
func CodexUserConfig() string { return codexUserConfig(os.Getenv) }

// codexHasNotify reports whether the Codex config at path sets a notify
// program that is not herd's (Codex runs only one).
func codexHasNotify(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var cfg struct {
		Notify []string `toml:"notify"`
	}
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return false, fmt.Errorf("%s: invalid TOML: %w", path, err)
	}
	if len(cfg.Notify) == 0 {
		return false, nil
	}
	herdsOwn := len(cfg.Notify) >= 2 && cfg.Notify[1] == "hook" && strings.HasPrefix(filepath.Base(cfg.Notify[0]), "herd")
	return !herdsOwn, nil
}

// projectHooks reports whether the project in workdir already runs herd's
// hooks for kind (`herd hooks install`), and which file has them: the
// agent would run them twice.
func projectHooks(kind, workdir string) (string, bool) {
	if workdir == "" {
		return "", false
	}
	files := []string{SettingsPath(kind, workdir)}
	if kind == herd.AgentClaude {
		files = append(files, filepath.Join(workdir, ".claude", "settings.json"))
	}
	return herdHooksIn(files)
}

// userHooks reports whether the user's own settings of Claude or Codex
// (`herd hooks install --dir ~`) already run herd's hooks, and where.
// Gemini's are where herd puts them itself.
func userHooks(kind string, getenv func(string) string) (string, bool) {
	var f string
	switch {
	case kind == herd.AgentClaude && getenv("CLAUDE_CONFIG_DIR") != "":
		f = filepath.Join(getenv("CLAUDE_CONFIG_DIR"), "settings.json")
	case kind == herd.AgentClaude && getenv("HOME") != "":
		f = filepath.Join(getenv("HOME"), ".claude", "settings.json")
	case kind == herd.AgentCodex:
		if cfg := codexUserConfig(getenv); cfg != "" {
			f = filepath.Join(filepath.Dir(cfg), "hooks.json")
		}
	}
	if f == "" {
		return "", false
	}
	return herdHooksIn([]string{f})
}

// herdHooksIn returns the first of files (JSON hook settings) that holds
// a herd entry.
func herdHooksIn(files []string) (string, bool) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var doc struct {
			Hooks map[string][]struct {
				Hooks []json.RawMessage `json:"hooks"`
			} `json:"hooks"`
		}
		if json.Unmarshal(data, &doc) != nil {
			continue
		}
		for event, groups := range doc.Hooks {
			for _, g := range groups {
				for _, h := range g.Hooks {
					var o object
					if json.Unmarshal(h, &o) == nil && isHerdEntry(o, event, "") {
						return f, true
					}
				}
			}
		}
	}
	return "", false
}

// StableBinary returns the path hooks run herd by: <stateDir>/bin/herd, a
// link to exe made (or moved) now. A new herd binary moves the link and
// leaves every hook command unchanged, so Codex's trust in them holds.
func StableBinary(stateDir, exe string) (string, error) {
	link := filepath.Join(stateDir, "bin", "herd")
	if cur, err := os.Readlink(link); err == nil && cur == exe {
		return link, nil
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return "", fmt.Errorf("hooks: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.%d.tmp", link, os.Getpid(), linkSeq.Add(1))
	if err := os.Symlink(exe, tmp); err != nil {
		return "", fmt.Errorf("hooks: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("hooks: %w", err)
	}
	return link, nil
}

// linkSeq tells apart the temporary links of launches made side by side.
var linkSeq atomic.Uint64

func clipNote(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
