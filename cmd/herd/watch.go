package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"herd/internal/redraw"
)

// watchLoop polls every interval until ctx is done. On a terminal it
// redraws the screen in place each time (ages move), without filling the
// terminal's scrollback (redraw.Frame). Elsewhere it prints the
// list only when it changed (key differs), separated by a blank line, with
// no terminal codes, so a pipe or a file gets one clean table per change.
func watchLoop(ctx context.Context, w io.Writer, term redraw.Terminal, interval time.Duration, poll func() (key []byte, render func(io.Writer) error, err error)) error {
	var last []byte
	for first := true; ; first = false {
		key, render, err := poll()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if term != nil || first || !bytes.Equal(key, last) {
			var b bytes.Buffer
			if err := render(&b); err != nil {
				return err
			}
			switch {
			case term != nil:
				io.WriteString(w, redraw.Frame(time.Now().Format("15:04:05")+"\n"+b.String(), term.Height(), first))
			case first:
				w.Write(b.Bytes())
			default:
				fmt.Fprint(w, "\n"+b.String())
			}
			last = key
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
