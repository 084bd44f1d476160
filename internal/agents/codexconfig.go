package agents

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

var (
	tableRE       = regexp.MustCompile(`^\s*\[`)
	notifyRE      = regexp.MustCompile(`^\s*notify\s*=`)
	featuresRE    = regexp.MustCompile(`^\s*\[features\]\s*(#.*)?$`)
	codexHooksRE  = regexp.MustCompile(`^\s*codex_hooks\s*=`)
	dottedHooksRE = regexp.MustCompile(`^\s*features\.codex_hooks\s*=`)
)

// codexNotifyLine is the notify line herd wants in Codex's config.
func codexNotifyLine(herdBinary string) string {
	q := func(s string) string { return strconv.Quote(s) }
	return "notify = [" + strings.Join([]string{q(herdBinary), q("hook"), q("--agent"), q("codex"), q("notify")}, ", ") + "]"
}

// installCodexConfig edits Codex's config.toml as text, so the user's
// comments and layout stay: it turns the codex_hooks feature on and sets
// notify to herd's program unless the user has one of their own (Codex
// runs a single notify program; herd does not replace it, its hooks
// carry the same news).
func installCodexConfig(path, herdBinary string) (changed bool, notes []string, err error) {
	old, mode, err := readSettings(path)
	if err != nil {
		return false, nil, err
	}
	var probe map[string]any
	if err := toml.Unmarshal(old, &probe); err != nil {
		return false, nil, fmt.Errorf("agents: %s: invalid TOML: %w", path, err)
	}
	text := strings.TrimRight(string(old), "\n")
	var lines []string
	if text != "" {
		lines = strings.Split(text, "\n")
	}
	lines, notes = setCodexNotify(lines, herdBinary)
	lines = setCodexHooksFeature(lines)
	updated := strings.Join(lines, "\n") + "\n"
	if err := toml.Unmarshal([]byte(updated), &probe); err != nil {
		return false, nil, fmt.Errorf("agents: %s: edit would make invalid TOML: %w", path, err)
	}
	if updated == string(old) {
		return false, notes, nil
	}
	if err := mkdirFor(path); err != nil {
		return false, nil, err
	}
	if err := writeAtomic(path, []byte(updated), mode); err != nil {
		return false, nil, err
	}
	return true, notes, nil
}

// setCodexNotify sets the top-level notify key (before the first table).
func setCodexNotify(lines []string, herdBinary string) ([]string, []string) {
	want := codexNotifyLine(herdBinary)
	top := len(lines)
	for i, l := range lines {
		if tableRE.MatchString(l) {
			top = i
			break
		}
		if notifyRE.MatchString(l) {
			if strings.Contains(l, `"hook"`) && strings.Contains(l, `"codex"`) && strings.Contains(l, "herd") {
				lines[i] = want
				return lines, nil
			}
			return lines, []string{fmt.Sprintf("codex notify is already set (%s); herd leaves it, its hooks carry the same events", strings.TrimSpace(l))}
		}
	}
	return insertAt(lines, top, want), nil
}

// setCodexHooksFeature makes [features] codex_hooks = true.
func setCodexHooksFeature(lines []string) []string {
	inTop := true
	for i, l := range lines {
		if tableRE.MatchString(l) {
			inTop = false
		}
		if inTop && dottedHooksRE.MatchString(l) {
			lines[i] = "features.codex_hooks = true"
			return lines
		}
	}
	for i, l := range lines {
		if !featuresRE.MatchString(l) {
			continue
		}
		j := i + 1
		for ; j < len(lines) && !tableRE.MatchString(lines[j]); j++ {
			if codexHooksRE.MatchString(lines[j]) {
				lines[j] = "codex_hooks = true"
				return lines
			}
		}
		return insertAt(lines, i+1, "codex_hooks = true")
	}
	if len(lines) > 0 {
		lines = append(lines, "")
	}
	return append(lines, "[features]", "codex_hooks = true")
}

func insertAt(lines []string, i int, l string) []string {
	lines = append(lines, "")
	copy(lines[i+1:], lines[i:])
	lines[i] = l
	return lines
}
