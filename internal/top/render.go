package top

import (
	"fmt"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/cells"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// column is one column of the table: a header, a width, and a cell.
type column struct {
	title string
	width int
	right bool
	cell  func(m *Model, v api.SessionView, now time.Time) string
}

var columns = []column{
	{"NAME", 18, false, func(_ *Model, v api.SessionView, _ time.Time) string { return v.Name }},
	{"STATE", 12, false, func(_ *Model, v api.SessionView, _ time.Time) string { return cells.State(v) }},
	{"ACTIVITY", 9, false, func(_ *Model, v api.SessionView, _ time.Time) string { return cells.Activity(v) }},
	{"CPU%", 6, true, func(m *Model, v api.SessionView, _ time.Time) string {
		if d, ok := m.diags[v.Name]; ok && d.OK && v.State.Live() {
			return fmt.Sprintf("%.1f", d.CPU)
		}
		return "-"
	}},
	{"RSS", 8, true, func(m *Model, v api.SessionView, _ time.Time) string {
		if d, ok := m.diags[v.Name]; ok && d.OK && v.State.Live() {
			return cells.Bytes(d.RSS)
		}
		return "-"
	}},
	{"TCP", 4, true, func(m *Model, v api.SessionView, _ time.Time) string {
		if d, ok := m.diags[v.Name]; ok && d.OK && v.State.Live() {
			return fmt.Sprint(d.TCP)
		}
		return "-"
	}},
	{"AGE", 7, true, func(_ *Model, v api.SessionView, now time.Time) string {
		return cells.AgeText(v, now)
	}},
	{"COST", 8, true, func(_ *Model, v api.SessionView, _ time.Time) string {
		if v.Usage == (api.Usage{}) {
			return "-"
		}
		return v.Usage.Cost()
	}},
	{"RESTARTS", 8, true, func(_ *Model, v api.SessionView, _ time.Time) string { return fmt.Sprint(v.Restarts) }},
	{"LAST-EXIT", 0, false, func(_ *Model, v api.SessionView, now time.Time) string { return cells.LastExit(v.Exit, now) }},
}

// Render draws the screen as text (View wraps it for Bubble Tea).
func (m *Model) Render() string {
	if m.mode == modeLogs {
		return m.renderLogs()
	}
	now := m.opts.Now()
	var b strings.Builder
	b.WriteString(m.title(now) + "\n")
	b.WriteString(headerStyle.Render(m.line(func(c column) string { return c.title })) + "\n")
	rows := m.rows()
	// Title, header, and two lines at the bottom: status and keys.
	room := max(m.height-4, 1)
	first := 0
	for i, v := range rows {
		if v.Name == m.selected && i >= room {
			first = i - room + 1
		}
	}
	shown := 0
	for _, v := range rows[first:] {
		if shown == room {
			break
		}
		line := m.line(func(c column) string { return c.cell(m, v, now) })
		switch {
		case v.Name == m.selected:
			line = cursorStyle.Render(line)
		default:
			line = styleFor(v).Render(line)
		}
		b.WriteString(line + "\n")
		shown++
	}
	switch {
	case !m.loaded && m.err == nil:
		b.WriteString("loading...\n")
		shown++
	case m.loaded && len(rows) == 0 && m.filter != "":
		b.WriteString("No sessions match the filter.\n")
		shown++
	case m.loaded && len(rows) == 0:
		b.WriteString("No sessions found.\n")
		shown++
	}
	for ; shown < room; shown++ {
		b.WriteString("\n")
	}
	b.WriteString(m.statusLine() + "\n")
	b.WriteString(dimStyle.Render(m.help()))
	return b.String()
}

func (m *Model) title(now time.Time) string {
	counts := map[herd.State]int{}
	for _, v := range m.sessions {
		counts[v.State]++
	}
	parts := []string{fmt.Sprintf("herd top  %d sessions", len(m.sessions))}
	for _, st := range []herd.State{herd.StateRunning, herd.StateStalled, herd.StateUnknown, herd.StateBackoff, herd.StateFailed, herd.StateStopped} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, counts[st]))
		}
	}
	sort := "sort " + sortKeys[m.sortBy]
	if m.desc {
		sort += " (reversed)"
	}
	parts = append(parts, sort)
	if m.filter != "" {
		parts = append(parts, "filter "+m.filter)
	}
	parts = append(parts, now.Format("15:04:05"))
	return titleStyle.Render(strings.Join(parts, "  "))
}

func (m *Model) statusLine() string {
	switch m.mode {
	case modeFilter:
		return "/" + m.input + "█"
	case modeInject:
		return "inject into " + m.target + ": " + m.input + "█"
	case modeConfirm:
		return warnStyle.Render(m.verb + " " + m.target + "? (y/n)")
	}
	if m.err != nil {
		return badStyle.Render("error: " + m.err.Error())
	}
	return m.status
}

func (m *Model) help() string {
	switch m.mode {
	case modeFilter:
		return "type to filter  enter keep  esc clear"
	case modeInject:
		return "enter send (with Enter)  esc cancel"
	case modeConfirm:
		return "y " + m.verb + "  any other key cancels"
	}
	return "↑↓ move  enter attach/logs  l logs  x stop  R restart  r resume  i inject  s sort  S reverse  / filter  q quit"
}

// line lays out one row of the table within the width.
func (m *Model) line(text func(column) string) string {
	var b strings.Builder
	for i, c := range columns {
		s := text(c)
		if i > 0 {
			b.WriteString(" ")
		}
		if c.width == 0 {
			b.WriteString(s)
			continue
		}
		s = ansi.Truncate(s, c.width, "…")
		pad := strings.Repeat(" ", max(c.width-lipgloss.Width(s), 0))
		if c.right {
			b.WriteString(pad + s)
		} else {
			b.WriteString(s + pad)
		}
	}
	return ansi.Truncate(b.String(), max(m.width, 20), "…")
}

func (m *Model) renderLogs() string {
	var b strings.Builder
	b.WriteString(titleStyle.Render("herd top  logs of "+m.target) + "\n")
	rows := m.logRows()
	end := max(len(m.logs)-m.scroll, 0)
	start := max(end-rows, 0)
	shown := 0
	for _, l := range m.logs[start:end] {
		b.WriteString(ansi.Truncate(l, max(m.width, 20), "…") + "\n")
		shown++
	}
	for ; shown < rows; shown++ {
		b.WriteString("\n")
	}
	b.WriteString(dimStyle.Render("↑↓ pgup pgdn scroll  esc back  (refreshed every second)"))
	return b.String()
}

func styleFor(v api.SessionView) lipgloss.Style {
	switch v.State {
	case herd.StateFailed, herd.StateCrashed, herd.StateBackoff:
		return badStyle
	case herd.StateStalled, herd.StateUnknown:
		return warnStyle
	case herd.StateRunning:
		if v.Attention() {
			return warnStyle
		}
		return goodStyle
	}
	return lipgloss.NewStyle()
}
