// Package redraw draws a text over a terminal's screen in place, for the live views of get -w and the demo.
package redraw

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Terminal control sequences of the in-place redraw.
const (
	clearScreen = "\033[H\033[2J" // home, erase the screen
	home        = "\033[H"
	eraseLine   = "\033[K" // the rest of the line
	eraseBelow  = "\033[J" // the rest of the screen
)

// Terminal is a terminal to draw on.
type Terminal interface {
	// Height is the screen's height in lines, asked again at each redraw
	// since the window can be resized; 0 when not known.
	Height() int
}

// tty is a terminal behind a file descriptor.
type tty struct{ f *os.File }

var _ Terminal = tty{}

func (t tty) Height() int {
	ws, err := unix.IoctlGetWinsize(int(t.f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Row)
}

// Of returns w's terminal, or nil when w is not one (a pipe, a file).
func Of(w io.Writer) Terminal {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return tty{f}
}

// Frame is text drawn over the screen from its top. The first frame clears
// the screen; the next ones overwrite it line by line, each line erasing
// what an older, longer one left and the lines below the last erased, so a
// terminal's scrollback does not fill with a copy per redraw (clearing
// pushes the screen into it). A text taller than the screen (height, 0 when
// unknown) is cut to fit, its last line saying how many lines are not
// shown: the screen would scroll, and the next frame would not land in place.
func Frame(text string, height int, first bool) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if height > 2 && len(lines) > height-1 {
		more := len(lines) - (height - 2)
		lines = append(lines[:height-2], fmt.Sprintf("... %d more lines (a taller window shows them)", more))
	}
	var b strings.Builder
	if first {
		b.WriteString(clearScreen)
	} else {
		b.WriteString(home)
	}
	for _, l := range lines {
		b.WriteString(l + eraseLine + "\n")
	}
	b.WriteString(eraseBelow)
	return b.String()
}
