// Package hookinstall writes herd's hook entries into an agent's settings
// (`herd hooks install`, and the real-agent tests): Claude Code's, Codex's and
// Gemini CLI's project files, and Codex's user-level notify program, merged
// into what the user has. The events and the agents come from
// internal/agents, which never imports it. It must never change or reorder
// a setting that is not herd's, nor write a file it could not parse.
package hookinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"herd"
	"herd/internal/agents"
)

// Settings files the installers write, relative to the project directory.
const (
	ClaudeSettingsFile = ".claude/settings.local.json" // per project, not committed
	CodexHooksFile     = ".codex/hooks.json"
	CodexConfigFile    = ".codex/config.toml"
	GeminiSettingsFile = ".gemini/settings.json"
)

// newFileMode is the mode of a settings file herd creates.
const newFileMode = 0o600

// toolEvents are the events whose matcher is compared with a tool name;
// herd matches every tool there. The other events get no matcher (match all).
var toolEvents = map[string]bool{
	agents.HookPreToolUse: true, agents.HookPostToolUse: true, agents.HookPostToolUseFailure: true,
	agents.HookPermissionRequest: true, agents.GeminiBeforeTool: true, agents.GeminiAfterTool: true,
}

// SettingsPath is the hook settings file Install writes for kind in
// project dir; "" for a kind without hooks.
func SettingsPath(kind, dir string) string {
	var f string
	switch kind {
	case herd.AgentClaude:
		f = ClaudeSettingsFile
	case herd.AgentCodex:
		f = CodexHooksFile
	case herd.AgentGemini:
		f = GeminiSettingsFile
	default:
		return ""
	}
	return filepath.Join(dir, filepath.FromSlash(f))
}

// HookCommand is the shell command line of herd's hook entry for event:
// "<herd> hook EVENT" for Claude (as always), "<herd> hook --agent KIND
// EVENT" for the others, so `herd hook` knows whose payload it reads.
func HookCommand(kind, herdBinary, event string) string {
	if kind == herd.AgentClaude {
		return shellQuote(herdBinary) + " hook " + event
	}
	return shellQuote(herdBinary) + " hook --agent " + kind + " " + event
}

// Installed is what Install did.
type Installed struct {
	Files   []string // the files written or checked, in order
	Changed bool     // some file changed
	Notes   []string // what was left alone and why, for the user
}

// Install merges herd's hook entries for kind into the agent's settings
// in project dir, creating files and directories when missing: Claude's
// .claude/settings.local.json, Codex's .codex/hooks.json (plus the hooks
// feature in .codex/config.toml; see InstallCodexNotify for the
// user-level notify program), Gemini's .gemini/settings.json. The user's own hooks
// and every other setting are kept, in order; a herd entry with another
// binary path is updated in place; duplicates are dropped; a second run
// changes nothing. Invalid existing files are an error and are left
// untouched. Files are replaced atomically and keep their mode.
//
// herdBinary must be the absolute path of an installed herd: a temporary
// build of `go run` is refused, since it is deleted when go run exits and
// every hook would then fail.
func Install(kind, dir, herdBinary string) (Installed, error) {
	var res Installed
	if err := CheckHerdBinary(herdBinary); err != nil {
		return res, err
	}
	path := SettingsPath(kind, dir)
	if path == "" {
		return res, fmt.Errorf("agents: no hooks for agent %q (want claude, codex or gemini)", kind)
	}
	changed, err := installJSON(path, kind, herdBinary)
	if err != nil {
		return res, err
	}
	res.Files, res.Changed = append(res.Files, path), changed
	if kind == herd.AgentCodex {
		cpath := filepath.Join(dir, filepath.FromSlash(CodexConfigFile))
		changed, notes, err := installCodexConfig(cpath)
		if err != nil {
			return res, err
		}
		res.Files = append(res.Files, cpath)
		res.Changed = res.Changed || changed
		res.Notes = append(res.Notes, notes...)
	}
	return res, nil
}

// installJSON merges herd's entries into the JSON settings file at path.
func installJSON(path, kind, herdBinary string) (bool, error) {
	// Write through a symlink (dotfile managers link settings files).
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	old, mode, err := readSettings(path)
	if err != nil {
		return false, err
	}
	updated, err := merge(old, kind, herdBinary)
	if err != nil {
		return false, fmt.Errorf("agents: %s: %w", path, err)
	}
	if same, err := sameJSON(old, updated); err != nil {
		return false, fmt.Errorf("agents: %s: %w", path, err)
	} else if same {
		return false, nil
	}
	if err := mkdirFor(path); err != nil {
		return false, err
	}
	if err := writeAtomic(path, updated, mode); err != nil {
		return false, err
	}
	return true, nil
}

// CheckHerdBinary accepts the path of the herd binary hooks will run: it
// must be absolute, free of control characters, and not a temporary build
// of `go run` (a path element named go-build*).
func CheckHerdBinary(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("agents: herd binary path %q is not absolute", p)
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("agents: herd binary path %q contains control characters", p)
	}
	for _, el := range strings.Split(filepath.ToSlash(p), "/") {
		if strings.HasPrefix(el, "go-build") {
			return fmt.Errorf("agents: herd binary %s is a temporary build of `go run`, deleted when it exits; build herd (go build -o ~/bin/herd ./cmd/herd) and install hooks with that binary", p)
		}
	}
	return nil
}

// readSettings returns the file's bytes and mode; nil bytes and the default
// mode when it does not exist.
func readSettings(path string) ([]byte, fs.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, newFileMode, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("agents: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("agents: %w", err)
	}
	return data, fi.Mode().Perm(), nil
}

// merge returns the settings document data with herd's entries merged in,
// indented with two spaces.
func merge(data []byte, kind, herdBinary string) ([]byte, error) {
	var top object
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &top); err != nil {
			return nil, fmt.Errorf("invalid settings JSON: %w", err)
		}
	}
	var hooksObj object
	if raw, ok := top.get("hooks"); ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &hooksObj); err != nil {
			return nil, fmt.Errorf(`"hooks" is not an object: %w`, err)
		}
	}
	for _, event := range agents.HookEvents(kind) {
		var groups []json.RawMessage
		if raw, ok := hooksObj.get(event); ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, fmt.Errorf(`"hooks.%s" is not an array: %w`, event, err)
			}
		}
		groups, err := mergeEvent(groups, kind, event, herdBinary)
		if err != nil {
			return nil, fmt.Errorf(`"hooks.%s": %w`, event, err)
		}
		raw, err := marshal(groups)
		if err != nil {
			return nil, err
		}
		hooksObj.set(event, raw)
	}
	raw, err := marshal(hooksObj)
	if err != nil {
		return nil, err
	}
	top.set("hooks", raw)
	flat, err := marshal(top)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flat, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// mergeEvent makes groups (the matcher groups of one event) hold exactly one
// herd entry, running the current command.
func mergeEvent(groups []json.RawMessage, kind, event, herdBinary string) ([]json.RawMessage, error) {
	want := HookCommand(kind, herdBinary, event)
	found := false
	var out []json.RawMessage
	for i, graw := range groups {
		var g object
		if err := json.Unmarshal(graw, &g); err != nil {
			return nil, fmt.Errorf("entry %d is not an object: %w", i, err)
		}
		hraw, ok := g.get("hooks")
		if !ok || isNull(hraw) {
			out = append(out, graw)
			continue
		}
		var hs []json.RawMessage
		if err := json.Unmarshal(hraw, &hs); err != nil {
			return nil, fmt.Errorf(`entry %d: "hooks" is not an array: %w`, i, err)
		}
		var kept []json.RawMessage
		modified, dropped, ours, users := false, false, false, 0
		for _, h := range hs {
			var ho object
			if json.Unmarshal(h, &ho) != nil || !isHerdEntry(ho, event, herdBinary) {
				kept = append(kept, h)
				users++
				continue
			}
			if found { // a duplicate herd entry
				modified, dropped = true, true
				continue
			}
			found, ours = true, true
			if ho.getString("command") != want {
				ho.set("command", rawString(want))
				nh, err := marshal(ho)
				if err != nil {
					return nil, err
				}
				h, modified = nh, true
			}
			kept = append(kept, h)
		}
		// A group of herd's alone must match everything.
		if ours && users == 0 && !matchesAll(g) {
			g.del("matcher")
			modified = true
		}
		if !modified {
			out = append(out, graw)
			continue
		}
		if len(kept) == 0 && dropped {
			continue // the group held only duplicates of herd's entry
		}
		nh, err := marshal(kept)
		if err != nil {
			return nil, err
		}
		g.set("hooks", nh)
		ng, err := marshal(g)
		if err != nil {
			return nil, err
		}
		out = append(out, ng)
	}
	if !found {
		g := object{}
		if toolEvents[event] && kind == herd.AgentClaude {
			g.set("matcher", rawString("*"))
		}
		entry := object{{Key: "type", Value: rawString("command")}, {Key: "command", Value: rawString(want)}}
		eraw, err := marshal([]object{entry})
		if err != nil {
			return nil, err
		}
		g.set("hooks", eraw)
		graw, err := marshal(g)
		if err != nil {
			return nil, err
		}
		out = append(out, graw)
	}
	return out, nil
}

// marshal is json.Marshal without HTML escaping, so "a && b" in a user's
// hook stays readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// matchesAll reports whether matcher group g fires for every tool or
// notification: matcher absent, "" or "*".
func matchesAll(g object) bool {
	raw, ok := g.get("matcher")
	if !ok || isNull(raw) {
		return true
	}
	m := g.getString("matcher")
	return m == "" || m == "*"
}

// isHerdEntry reports whether hook entry h is one herd installed for event:
// a command "<binary> hook [--agent KIND] <event>" whose binary is this
// herd or is named herd*. Anything else belongs to the user.
func isHerdEntry(h object, event, herdBinary string) bool {
	if h.getString("type") != "command" {
		return false
	}
	words, ok := shellSplit(h.getString("command"))
	if !ok || len(words) < 3 || words[1] != "hook" || words[len(words)-1] != event {
		return false
	}
	switch len(words) {
	case 3:
	case 5:
		if words[2] != "--agent" {
			return false
		}
	default:
		return false
	}
	return words[0] == herdBinary || strings.HasPrefix(filepath.Base(words[0]), "herd")
}

// sameJSON reports whether a and b hold the same JSON value (a empty counts
// as different from anything).
func sameJSON(a, b []byte) (bool, error) {
	if len(bytes.TrimSpace(a)) == 0 {
		return false, nil
	}
	va, err := decodeAny(a)
	if err != nil {
		return false, err
	}
	vb, err := decodeAny(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(va, vb), nil
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over path.
func writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("agents: write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	return nil
}

func mkdirFor(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	return nil
}
