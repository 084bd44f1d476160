package top

import (
	"context"
	"fmt"
	"slices"

	tea "charm.land/bubbletea/v2"

	"herd"
	"herd/internal/api"
)

// key handles a key press in the table, the logs or a prompt.
func (m *Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	s := k.String()
	if s == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.mode {
	case modeFilter, modeInject:
		return m.typing(k)
	case modeConfirm:
		return m.confirmKey(s)
	case modeLogs:
		m.logsKey(s)
		return m, nil
	}
	rows := m.rows()
	cur := slices.IndexFunc(rows, func(v api.SessionView) bool { return v.Name == m.selected })
	if s == "q" {
		return m, tea.Quit
	}
	m.tableKey(s, rows, cur)
	if cur < 0 {
		return m, nil
	}
	return m.sessionKey(s, rows[cur])
}

// confirmKey answers the confirmation of a stop or restart.
func (m *Model) confirmKey(s string) (tea.Model, tea.Cmd) {
	m.mode = modeTable
	if s == "y" || s == "Y" {
		name, src, act := m.target, m.src, m.src.Stop
		m.status = "stopping " + name + "..."
		if m.verb == "restart" {
			act, m.status = src.Restart, "restarting "+name+"..."
		}
		return m, m.call(func(ctx context.Context) tea.Msg {
			text, err := act(ctx, name)
			return resultMsg{text, err}
		})
	}
	m.status = m.verb + " cancelled"
	return m, nil
}

// logsKey scrolls the log view, or leaves it.
func (m *Model) logsKey(s string) {
	switch s {
	case "esc", "q", "enter":
		m.mode, m.logs, m.scroll = modeTable, nil, 0
	case "up", "k":
		m.scroll = min(m.scroll+1, max(len(m.logs)-1, 0))
	case "down", "j":
		m.scroll = max(m.scroll-1, 0)
	case "pgup":
		m.scroll = min(m.scroll+m.logRows(), max(len(m.logs)-1, 0))
	case "pgdown":
		m.scroll = max(m.scroll-m.logRows(), 0)
	}
}

// tableKey moves the selection, sorts and filters the table; cur is the
// selected row's index in rows (-1: none).
func (m *Model) tableKey(s string, rows []api.SessionView, cur int) {
	switch s {
	case "up", "k":
		if cur > 0 {
			m.selected = rows[cur-1].Name
		}
	case "down", "j":
		if cur+1 < len(rows) {
			m.selected = rows[cur+1].Name
		}
	case "home", "g":
		if len(rows) > 0 {
			m.selected = rows[0].Name
		}
	case "end", "G":
		if len(rows) > 0 {
			m.selected = rows[len(rows)-1].Name
		}
	case "s":
		m.sortBy = (m.sortBy + 1) % len(sortKeys)
		m.status = "sorted by " + sortKeys[m.sortBy]
	case "S":
		m.desc = !m.desc
	case "/":
		m.mode, m.input = modeFilter, m.filter
	case "esc":
		m.filter, m.status = "", ""
		m.keepSelection()
	}
}

// sessionKey acts on the selected session v.
func (m *Model) sessionKey(s string, v api.SessionView) (tea.Model, tea.Cmd) {
	switch s {
	case "enter":
		if v.RuntimeKind == herd.RuntimeTmux && v.State.Live() && m.opts.Attach != nil {
			m.status = "attached to " + v.Name + "; back here on detach (C-b d)"
			return m, tea.ExecProcess(m.opts.Attach(v.Name), func(err error) tea.Msg {
				if err != nil {
					return resultMsg{err: fmt.Errorf("attach %s: %w", v.Name, err)}
				}
				return resultMsg{text: "detached from " + v.Name}
			})
		}
		return m, m.openLogs(v.Name)
	case "l":
		return m, m.openLogs(v.Name)
	case "x":
		m.mode, m.target, m.verb = modeConfirm, v.Name, "stop"
	case "R":
		m.mode, m.target, m.verb = modeConfirm, v.Name, "restart"
	case "r":
		name, src := v.Name, m.src
		m.status = "resuming " + name + "..."
		return m, m.call(func(ctx context.Context) tea.Msg {
			text, err := src.Resume(ctx, name)
			return resultMsg{text, err}
		})
	case "i":
		m.mode, m.target, m.input = modeInject, v.Name, ""
	}
	return m, nil
}

func (m *Model) openLogs(name string) tea.Cmd {
	m.mode, m.target, m.logs, m.scroll = modeLogs, name, []string{"loading..."}, 0
	return m.fetchLogs(name)
}

// typing edits the filter or the text to inject.
func (m *Model) typing(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		if m.mode == modeFilter {
			m.filter = ""
		}
		m.mode, m.input = modeTable, ""
		m.keepSelection()
		return m, nil
	case "enter":
		if m.mode == modeFilter {
			m.filter, m.mode = m.input, modeTable
			m.keepSelection()
			return m, nil
		}
		name, text, src := m.target, m.input, m.src
		m.mode, m.input = modeTable, ""
		if text == "" {
			m.status = "nothing to inject"
			return m, nil
		}
		m.status = "injecting into " + name + "..."
		return m, m.call(func(ctx context.Context) tea.Msg {
			res, err := src.Inject(ctx, name, text)
			return resultMsg{res, err}
		})
	case "backspace":
		if r := []rune(m.input); len(r) > 0 {
			m.input = string(r[:len(r)-1])
		}
	default:
		if k.Text != "" {
			m.input += k.Text
		}
	}
	if m.mode == modeFilter {
		// The table narrows as the filter is typed.
		m.filter = m.input
		m.keepSelection()
	}
	return m, nil
}
