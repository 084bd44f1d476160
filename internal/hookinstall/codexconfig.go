package hookinstall

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
	hooksKeyRE    = regexp.MustCompile(`^\s*hooks\s*=`)
	dottedHooksRE = regexp.MustCompile(`^\s*features\.hooks\s*=`)
)

// codexNotifyLine is the notify line herd wants in Codex's config.
func codexNotifyLine(herdBinary string) string {
	q := strconv.Quote
	return "notify = [" + strings.Join([]string{q(herdBinary), q("hook"), q("--agent"), q("codex"), q("notify")}, ", ") + "]"
}

// installCodexConfig turns the hooks feature on in a project's
// .codex/config.toml ([features] hooks = true; Codex 0.169 calls the older
// codex_hooks deprecated). Codex reads a project's config only once the
// project is trusted.
func installCodexConfig(path string) (bool, []string, error) {
	return editCodexConfig(path, func(lines []string) ([]string, []string) {
		return setCodexHooksFeature(lines), nil
	})
}

// InstallCodexNotify sets Codex's notify program to `herd hook --agent
// codex notify` in the user's config.toml at path ($CODEX_HOME/config.toml,
// by default ~/.codex/config.toml): Codex ignores notify in a project's
// config. A notify program of the user's own is kept (Codex runs only
// one), with a note; herd's hooks carry the same events.
func InstallCodexNotify(path, herdBinary string) (Installed, error) {
	res := Installed{Files: []string{path}}
	if err := CheckHerdBinary(herdBinary); err != nil {
		return res, err
	}
	changed, notes, err := editCodexConfig(path, func(lines []string) ([]string, []string) {
		return setCodexNotify(lines, herdBinary)
	})
	res.Changed, res.Notes = changed, notes
	return res, err
}

// editCodexConfig edits a Codex config.toml as text, so the user's
// comments and layout stay, and checks that the result is still TOML.
func editCodexConfig(path string, edit func([]string) ([]string, []string)) (changed bool, notes []string, err error) {
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
	lines, notes = edit(lines)
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

// setCodexHooksFeature makes [features] hooks = true.
func setCodexHooksFeature(lines []string) []string {
	inTop := true
	for i, l := range lines {
		if tableRE.MatchString(l) {
			inTop = false
		}
		if inTop && dottedHooksRE.MatchString(l) {
			lines[i] = "features.hooks = true"
			return lines
		}
	}
	for i, l := range lines {
		if !featuresRE.MatchString(l) {
			continue
		}
		j := i + 1
		for ; j < len(lines) && !tableRE.MatchString(lines[j]); j++ {
			if hooksKeyRE.MatchString(lines[j]) {
				lines[j] = "hooks = true"
				return lines
			}
		}
		return insertAt(lines, i+1, "hooks = true")
	}
	if len(lines) > 0 {
		lines = append(lines, "")
	}
	return append(lines, "[features]", "hooks = true")
}

func insertAt(lines []string, i int, l string) []string {
	lines = append(lines, "")
	copy(lines[i+1:], lines[i:])
	lines[i] = l
	return lines
}
