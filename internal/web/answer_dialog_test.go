package web

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/internal/verbs"
	"herd/internal/web/auth"
)

// TestFreeTextWaitsForTheDialogToClose: a reply in words to a permission
// dialog is typed only once the Esc has taken the dialog off the screen
// (read back, the captured Claude Code screens); a dialog that stays is
// 409 and the words are never typed, so they cannot reach the dialog and
// its Enter cannot confirm "Yes". A screen that cannot be read for a
// while (a busy machine) is waited for, not taken for the dialog staying;
// the words wait, too, for the turn the dialog was part of to end.
func TestFreeTextWaitsForTheDialogToClose(t *testing.T) {
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "agents", "testdata", "claude", "2.1.330", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dialog, prompt, running := fixture("screen-permission.txt"), fixture("screen-after-esc.txt"), fixture("screen-spinner-start.txt")
	for _, tc := range []struct {
		name   string
		closes bool
		// unreadable: after the Esc, every read of the screen fails for
		// longer than dialogCloseWait (tmux slower than the call timeout
		// on a busy machine), then reads the dialog gone.
		unreadable bool
		want       int
	}{
		{"the dialog closes on Esc", true, false, http.StatusOK},
		{"the dialog stays", false, false, http.StatusConflict},
		{"the screen unreadable past the wait, then read", true, true, http.StatusOK},
	} {
		// stillRuns: the dialog gone, the turn still runs for a second.
		stillRuns := tc.name == "the dialog closes on Esc"
		var ended, typedAt time.Time
		t.Run(tc.name, func(t *testing.T) {
			c := newTestConsole(t)
			c.back.mu.Lock()
			c.back.screen = dialog
			c.back.mu.Unlock()
			if tc.closes {
				c.verbs.onInject = func(req verbs.InjectRequest) {
					if req.Text != "\x1b" {
						c.back.mu.Lock()
						typedAt = time.Now()
						c.back.mu.Unlock()
					}
					if req.Text == "\x1b" {
						c.back.mu.Lock()
						c.back.screen = prompt
						if stillRuns {
							c.back.screen = running
							time.AfterFunc(time.Second, func() {
								c.back.mu.Lock()
								defer c.back.mu.Unlock()
								c.back.screen, ended = prompt, time.Now()
							})
						}
						if tc.unreadable {
							c.back.screenErr = errors.New("tmux capture-pane: context deadline exceeded")
							time.AfterFunc(dialogCloseWait+time.Second, func() {
								c.back.mu.Lock()
								defer c.back.mu.Unlock()
								c.back.screenErr = nil
							})
						}
						c.back.mu.Unlock()
					}
				}
			}
			cl, csrf := c.browser(t, auth.ScopeOperate)
			code := c.call(t, cl, "POST", "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrf},
				AnswerRequest{Text: "no, use ls instead"}, nil)
			if code != tc.want {
				t.Errorf("expected %d … got %d", tc.want, code)
			}
			c.back.mu.Lock()
			if stillRuns && (ended.IsZero() || typedAt.Before(ended)) {
				t.Errorf("expected the words typed once the turn had ended … got them at %v, the turn ended at %v", typedAt, ended)
			}
			c.back.mu.Unlock()
			c.verbs.mu.Lock()
			defer c.verbs.mu.Unlock()
			var typed []string
			for _, in := range c.verbs.injected {
				typed = append(typed, in.Text)
			}
			switch {
			case tc.closes && (len(typed) != 2 || typed[0] != "\x1b" || typed[1] != "no, use ls instead"):
				t.Errorf("expected Esc, then the words … got %q", typed)
			case !tc.closes && (len(typed) != 1 || typed[0] != "\x1b"):
				t.Errorf("expected the Esc alone, the words never typed … got %q", typed)
			}
		})
	}
}
