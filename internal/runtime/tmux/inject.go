package tmux

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/runtime"
)

// Inject types text into the pane herd launched for inc, never whichever
// pane a user attached to the session made active.
func (r *Runtime) Inject(ctx context.Context, inc herd.Incarnation, text string, enter bool) error {
	return r.InjectCleared(ctx, inc, nil, text, enter, runtime.Submit{})
}

// InjectCleared is Inject after pressing the keys clear (tmux key names,
// see agents.ClearKeys) in the same pane, so leftover input is not glued
// to the text. With enter, the Enter comes once the pane has taken the
// text and sub.Settle has passed; where sub.Holds can read the agent's
// input line, the text must then leave it: Enter is pressed once more if
// it did not, and ErrNotSubmitted returned if it still did not.
func (r *Runtime) InjectCleared(ctx context.Context, inc herd.Incarnation, clear []string, text string, enter bool, sub runtime.Submit) error {
	pane, err := r.agentPane(ctx, inc)
	if err != nil {
		return err
	}
	if err := r.client.SendKeysPane(ctx, pane, clear...); err != nil {
		return err
	}
	if sub.Paste && !enter {
		return r.client.PastePane(ctx, pane, text)
	}
	if text == "" || !enter {
		return r.client.SendTextPane(ctx, pane, text, enter)
	}
	// The text, then Enter once the pane has taken it: a TUI (Claude
	// Code) takes keys that arrive together for a paste and drops an
	// Enter that comes with them; Gemini CLI makes an Enter within 30 ms
	// of a typed key a newline.
	before, _ := r.client.CapturePane(ctx, pane, 0)
	if err := r.putText(ctx, pane, text, sub.Paste); err != nil {
		return err
	}
	r.waitTyped(ctx, pane, before, sub.Holds)
	for press := 1; ; press++ {
		if err := pause(ctx, sub.Settle); err != nil {
			return err
		}
		if err := r.client.SendTextPane(ctx, pane, "", true); err != nil {
			return err
		}
		if sub.Holds == nil || r.waitSent(ctx, pane, sub.Holds) {
			return nil
		}
		if press == submitPresses {
			return fmt.Errorf("tmux: session %s: %w (pressed %d times)", inc.Session, runtime.ErrNotSubmitted, press)
		}
	}
}

// putText types text into pane, or pastes it.
func (r *Runtime) putText(ctx context.Context, pane, text string, paste bool) error {
	if paste {
		return r.client.PastePane(ctx, pane, text)
	}
	return r.client.SendTextPane(ctx, pane, text, false)
}

// submitPresses is how many times Enter is pressed for one inject whose
// text stays on the input line.
const submitPresses = 2

// typedWait bounds the wait for a pane to show typed text; a pane that
// does not show it within it gets its Enter anyway.
const typedWait = 2 * time.Second

// sentWait bounds the wait for typed text to leave the input line after
// an Enter.
const sentWait = 2 * time.Second

// waitTyped polls the pane until it shows the typed text on the input
// line (holds says so), or, when holds cannot tell or is nil, shows
// something other than before; or typedWait or ctx's end.
func (r *Runtime) waitTyped(ctx context.Context, pane string, before []byte, holds func(string) (bool, bool)) {
	r.poll(ctx, pane, typedWait, func(out []byte) bool {
		if holds != nil {
			if typed, known := holds(string(out)); known {
				return typed
			}
		}
		return !bytes.Equal(out, before)
	})
}

// waitSent polls the pane until the text has left the input line (or
// the screen no longer shows one), and reports whether it did within
// sentWait.
func (r *Runtime) waitSent(ctx context.Context, pane string, holds func(string) (bool, bool)) bool {
	return r.poll(ctx, pane, sentWait, func(out []byte) bool {
		typed, known := holds(string(out))
		return !typed || !known
	})
}

// poll captures the pane every 25 ms until done says so (true), or
// within or ctx ends (false). A capture that fails is not done.
func (r *Runtime) poll(ctx context.Context, pane string, within time.Duration, done func([]byte) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if out, err := r.client.CapturePane(ctx, pane, 0); err == nil && done(out) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// pause waits d, or returns ctx's error if it ends first.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
