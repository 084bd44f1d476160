package slots

import (
	"strings"
	"testing"

	"herd"
)

// TestTurnText: an exec task's launch argument — the prompt; a later
// turn alone when the conversation goes on, else after the prompt; both
// within the kernel's limit of one argument.
func TestTurnText(t *testing.T) {
	long := strings.Repeat("p", herd.MaxExecTurn)
	for _, c := range []struct {
		name      string
		task      herd.Task
		continued bool
		want      string
	}{
		{"the prompt", herd.Task{Prompt: "do it"}, false, "do it"},
		{"the prompt, continued", herd.Task{Prompt: "do it"}, true, "do it"},
		{"a turn, continued", herd.Task{Prompt: "do it", Turn: "fix it"}, true, "fix it"},
		{"a turn, a new conversation", herd.Task{Prompt: "do it", Turn: "fix it"}, false, "do it\n\nfix it"},
	} {
		if got := turnText(c.task, c.continued); got != c.want {
			t.Errorf("[%s] expected %q, got %q", c.name, c.want, got)
		}
	}
	got := turnText(herd.Task{Prompt: long, Turn: "fix it"}, false)
	if len(got) > herd.MaxExecTurn || !strings.HasSuffix(got, "p\n[…]\n\nfix it") {
		t.Errorf("[too long] expected the prompt cut to fit %d bytes, the turn whole, got %d bytes ending %q", herd.MaxExecTurn, len(got), got[len(got)-20:])
	}
}
