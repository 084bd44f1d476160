package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/errs"
	"herd/internal/runtime"
)

// fakeTmux records what an inject typed or pasted.
type fakeTmux struct {
	typed []string
	paste []bool
}

var _ ClearInjector = (*fakeTmux)(nil)

func (f *fakeTmux) Inject(ctx context.Context, inc herd.Incarnation, text string, enter bool) error {
	return errors.New("expected InjectCleared")
}

func (f *fakeTmux) InjectCleared(ctx context.Context, inc herd.Incarnation, clear []string, text string, enter bool, sub runtime.Submit) error {
	f.typed = append(f.typed, text)
	f.paste = append(f.paste, sub.Paste)
	return nil
}

// TestInjectLineBreaks: text with a line break is refused (400) unless
// the request asks for multi-line input, which is pasted; a forwarded
// inject carries the ask to the other host, and is refused here first.
func TestInjectLineBreaks(t *testing.T) {
	ctx := context.Background()
	rows := fleet()
	rows.sessions["w-0"] = herd.Session{Name: "w-0", Role: "w", Host: "a", State: herd.StateRunning, RuntimeKind: herd.RuntimeTmux, Incarnation: "i1"}
	var forwarded []herd.Command
	fw := forwardFunc(func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
		forwarded = append(forwarded, c)
		return `{"message":"sent"}`, nil
	})
	tm := &fakeTmux{}
	sl := &fakeSlots{}
	v := New(Options{Host: "a", Sessions: sl, Roles: sl, Kicker: sl, Reaper: &fakeReaper{}, Reader: rows, Forward: fw,
		Tmux: tm, HostTimeout: 3 * time.Second, CallTimeout: time.Second})
	for _, x := range []struct {
		name, session, text string
		multiline           bool
		refused             bool
	}{
		{"one line", "w-0", "run the tests", false, false},
		{"newline", "w-0", "first\nsecond", false, true},
		{"carriage return", "w-0", "yes\r", false, true},
		{"crlf, other host", "w-2", "a\r\nb", false, true},
		{"multiline", "w-0", "first\nsecond\r\nthird", true, false},
		{"multiline, other host", "w-2", "first\nsecond", true, false},
	} {
		_, err := v.Inject(ctx, InjectRequest{Name: x.session, Text: x.text, Enter: true, Multiline: x.multiline})
		switch {
		case x.refused && (!errs.IsBadInput(err) || !strings.Contains(err.Error(), "--multiline")):
			t.Errorf("[%s] expected a BadInput naming --multiline … got %v", x.name, err)
		case !x.refused && err != nil:
			t.Errorf("[%s] expected it sent … got %v", x.name, err)
		}
	}
	if len(tm.typed) != 2 || tm.paste[0] || !tm.paste[1] || tm.typed[1] != "first\nsecond\r\nthird" {
		t.Errorf("[local] expected one line typed and the multi-line text pasted … got %q %v", tm.typed, tm.paste)
	}
	if len(forwarded) != 1 || forwarded[0].Args["multiline"] != "true" || forwarded[0].Args["text"] != "first\nsecond" {
		t.Fatalf("[forwarded] expected only the multi-line ask forwarded, with multiline … got %+v", forwarded)
	}
	if got := injectRequest("w-2", forwarded[0].Args, "a"); !got.Multiline {
		t.Errorf("[forwarded, read back] expected Multiline … got %+v", got)
	}
}
