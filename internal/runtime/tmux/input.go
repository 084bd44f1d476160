package tmux

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// maxSendKeys is the largest text typed with send-keys. A tmux command,
// arguments included, must fit one 16 KiB message to the server ("command
// too long"); larger text goes through a paste buffer fed on stdin.
const maxSendKeys = 8 << 10

// SendText types text into the session's active pane, literally: key names
// are not interpreted and text starting with '-' is not read as a flag. Text
// over a few KiB (or containing NUL) is loaded into a uniquely named paste
// buffer from stdin and pasted with newlines kept as they are, bracketed if
// the application asked for it; the buffer is deleted. With enter, an Enter
// key follows in a separate call, so an application that tells typing from
// pasting by timing does not read it as part of the text.
//
// The active pane is whichever pane a user attached to the session last
// selected (a split of the window, say); to reach a known pane, use
// SendTextPane.
func (c *Client) SendText(ctx context.Context, name, text string, enter bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	return c.sendText(ctx, target(name), text, enter)
}

// SendTextPane is SendText into the pane with id pane (%N, as ListPanes
// reports it), whatever pane of its session is active. A pane id is unique
// on its server but restarts from %0 with a new server: resolve it from a
// fresh listing just before use.
func (c *Client) SendTextPane(ctx context.Context, pane, text string, enter bool) error {
	if err := checkPaneID(pane); err != nil {
		return err
	}
	return c.sendText(ctx, pane, text, enter)
}

// PastePane pastes text into the pane with id pane through a paste
// buffer, line breaks kept as they are and bracketed if the application
// asked for bracketed paste: an agent that did takes the whole text as
// one input, its line breaks pressing no Enter.
func (c *Client) PastePane(ctx context.Context, pane, text string) error {
	if err := checkPaneID(pane); err != nil {
		return err
	}
	if text == "" {
		return nil
	}
	return c.paste(ctx, pane, text)
}

// keyNameRE is a tmux key name herd sends (C-u, Escape, End): never text.
var keyNameRE = regexp.MustCompile(`^(?:[CMS]-)*[A-Za-z0-9]+$`)

// SendKeysPane presses the named keys (tmux key names: "C-u", "Escape")
// in the pane with id pane, in one call.
func (c *Client) SendKeysPane(ctx context.Context, pane string, keys ...string) error {
	if err := checkPaneID(pane); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if !keyNameRE.MatchString(k) {
			return fmt.Errorf("tmux: %q is not a key name", k)
		}
	}
	_, err := c.run(ctx, nil, append([]string{"send-keys", "-t", pane}, keys...))
	return err
}

// sendText types text into the exact target tgt.
func (c *Client) sendText(ctx context.Context, tgt, text string, enter bool) error {
	if text != "" {
		var err error
		if len(text) > maxSendKeys || strings.ContainsRune(text, 0) {
			err = c.paste(ctx, tgt, text)
		} else {
			_, err = c.run(ctx, nil, []string{"send-keys", "-l", "-t", tgt, "--", text})
		}
		if err != nil {
			return err
		}
	}
	if enter {
		_, err := c.run(ctx, nil, []string{"send-keys", "-t", tgt, "Enter"})
		return err
	}
	return nil
}

// paste loads text into a fresh buffer from stdin and pastes it into the
// exact target tgt, in one tmux invocation (tmux waits for the load before
// running the paste).
func (c *Client) paste(ctx context.Context, tgt, text string) error {
	buf, err := bufferName()
	if err != nil {
		return err
	}
	_, err = c.run(ctx, strings.NewReader(text),
		[]string{"load-buffer", "-b", buf, "-"},
		[]string{"paste-buffer", "-d", "-p", "-r", "-b", buf, "-t", tgt},
	)
	if err != nil {
		// paste-buffer -d deletes only on success; do not leave a
		// copy of the text on the server.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_, derr := c.run(dctx, nil, []string{"delete-buffer", "-b", buf})
		cancel()
		if derr != nil && !strings.Contains(derr.Error(), "no buffer") && !errors.Is(derr, ErrNoServer) {
			return errors.Join(err, derr)
		}
		return err
	}
	return nil
}

func bufferName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("tmux: buffer name: %w", err)
	}
	return "herd-" + hex.EncodeToString(b[:]), nil
}

// Capture returns the text of the session's active pane, wrapped lines
// joined: the visible screen, plus up to lines lines of history when lines is
// positive, or all of the history when it is negative. It works on a dead pane too (remain-on-exit). The active pane is
// whichever pane a user selected last; to read a known pane, use CapturePane.
func (c *Client) Capture(ctx context.Context, name string, lines int) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return c.capture(ctx, target(name), lines, false)
}

// CapturePane is Capture of the pane with id pane (%N, as ListPanes reports
// it), whatever pane of its session is active.
func (c *Client) CapturePane(ctx context.Context, pane string, lines int) ([]byte, error) {
	if err := checkPaneID(pane); err != nil {
		return nil, err
	}
	return c.capture(ctx, pane, lines, false)
}

// CapturePaneEscapes is CapturePane with the text's colours and
// attributes as SGR escape sequences (capture-pane -e), for a reader that
// renders them. Screen readers that parse the text use CapturePane.
func (c *Client) CapturePaneEscapes(ctx context.Context, pane string, lines int) ([]byte, error) {
	if err := checkPaneID(pane); err != nil {
		return nil, err
	}
	return c.capture(ctx, pane, lines, true)
}

func (c *Client) capture(ctx context.Context, tgt string, lines int, escapes bool) ([]byte, error) {
	args := []string{"capture-pane", "-p", "-J", "-t", tgt}
	if escapes {
		args = append(args, "-e")
	}
	switch {
	case lines > 0:
		args = append(args, "-S", "-"+strconv.Itoa(lines))
	case lines < 0:
		args = append(args, "-S", "-") // the whole history
	}
	return c.run(ctx, nil, args)
}

// cleanupTimeout bounds best-effort cleanup calls made after a failure, which
// run even when the caller's context is done.
const cleanupTimeout = 2 * time.Second
