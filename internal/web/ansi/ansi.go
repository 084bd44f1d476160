// Package ansi turns an agent's terminal text with SGR colour sequences
// into runs of one rendition or into escaped HTML. The console's pages and
// its JSON API call it. It never emits a byte of the agent's text unescaped
// as markup, and it keeps no state.
package ansi

import (
	"html"
	"strconv"
	"strings"
)

// Segment is a run of screen text with one rendition: Class names its
// CSS classes (fg0-15, bg0-15, b, dim, i, u), "" for none.
type Segment struct {
	Text  string `json:"t"`
	Class string `json:"c,omitempty"`
}

// Segments splits terminal text with SGR colour sequences into runs of
// one rendition. Colours and attributes become classes (256 colours above
// 15 and true colours none); every other escape sequence is removed. The
// text is the agent's, unescaped: render it as text, never as markup.
func Segments(s string) []Segment {
	var out []Segment
	st := sgr{fg: -1, bg: -1}
	cls := ""
	add := func(t string) {
		if t == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].Class == cls {
			out[n-1].Text += t
			return
		}
		out = append(out, Segment{Text: t, Class: cls})
	}
	i, start := 0, 0
	for i < len(s) {
		if s[i] != 0x1b {
			i++
			continue
		}
		add(s[start:i])
		n, params, final := scanEscape(s[i:])
		i += n
		start = i
		if final == 'm' {
			st.apply(params)
			cls = st.classes()
		}
	}
	add(s[start:])
	return out
}

// ANSIToHTML renders terminal text as HTML: Segments as spans, every
// byte of the text escaped, so nothing the agent printed becomes markup.
func ANSIToHTML(s string) string {
	var b strings.Builder
	for _, seg := range Segments(s) {
		if seg.Class == "" {
			b.WriteString(html.EscapeString(seg.Text))
			continue
		}
		b.WriteString(`<span class="` + seg.Class + `">` + html.EscapeString(seg.Text) + `</span>`)
	}
	return b.String()
}

// scanEscape reads one escape sequence at the start of s: its length, a
// CSI sequence's parameters and final byte (0 for other sequences).
func scanEscape(s string) (n int, params string, final byte) {
	if len(s) < 2 {
		return len(s), "", 0
	}
	switch s[1] {
	case '[': // CSI: parameters, intermediates, a final byte 0x40-0x7e
		for j := 2; j < len(s); j++ {
			if c := s[j]; c >= 0x40 && c <= 0x7e {
				return j + 1, s[2:j], c
			}
		}
		return len(s), "", 0
	case ']', 'P', '_', '^': // OSC, DCS...: up to BEL or ST
		for j := 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return j + 1, "", 0
			}
			if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
				return j + 2, "", 0
			}
		}
		return len(s), "", 0
	}
	return 2, "", 0
}

// sgr is the current graphic rendition.
type sgr struct {
	fg, bg            int // -1 default, 0-15
	bold, dim, it, ul bool
}

func (g *sgr) reset() { *g = sgr{fg: -1, bg: -1} }

// apply reads one SGR parameter list.
func (g *sgr) apply(params string) {
	if params == "" {
		g.reset()
		return
	}
	ps := strings.Split(params, ";")
	for k := 0; k < len(ps); k++ {
		p, err := strconv.Atoi(ps[k])
		if err != nil {
			continue
		}
		switch {
		case p == 0:
			g.reset()
		case p == 1:
			g.bold = true
		case p == 2:
			g.dim = true
		case p == 3:
			g.it = true
		case p == 4:
			g.ul = true
		case p == 22:
			g.bold, g.dim = false, false
		case p == 23:
			g.it = false
		case p == 24:
			g.ul = false
		case p >= 30 && p <= 37:
			g.fg = p - 30
		case p == 39:
			g.fg = -1
		case p >= 40 && p <= 47:
			g.bg = p - 40
		case p == 49:
			g.bg = -1
		case p >= 90 && p <= 97:
			g.fg = p - 90 + 8
		case p >= 100 && p <= 107:
			g.bg = p - 100 + 8
		case p == 38 || p == 48:
			// 256-colour (5;n) or true colour (2;r;g;b): a 256 colour
			// below 16 is kept, any other is shown as the default.
			if k+1 < len(ps) && ps[k+1] == "5" && k+2 < len(ps) {
				n, err := strconv.Atoi(ps[k+2])
				if err != nil || n >= 16 {
					n = -1
				}
				g.setColor(p, n)
				k += 2
			} else if k+1 < len(ps) && ps[k+1] == "2" {
				g.setColor(p, -1)
				k += 4
			}
		}
	}
}

// setColor sets the foreground (param 38) or background (48) colour.
func (g *sgr) setColor(param, n int) {
	if param == 38 {
		g.fg = n
	} else {
		g.bg = n
	}
}

// classes names the rendition's CSS classes.
func (g *sgr) classes() string {
	var c []string
	if g.fg >= 0 {
		c = append(c, "fg"+strconv.Itoa(g.fg))
	}
	if g.bg >= 0 {
		c = append(c, "bg"+strconv.Itoa(g.bg))
	}
	if g.bold {
		c = append(c, "b")
	}
	if g.dim {
		c = append(c, "dim")
	}
	if g.it {
		c = append(c, "i")
	}
	if g.ul {
		c = append(c, "u")
	}
	return strings.Join(c, " ")
}
