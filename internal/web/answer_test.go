package web

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/store"
	"herd/internal/verbs"
	"herd/internal/web/inbox"
)

func TestAnswerCovers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := store.Answer{Incarnation: "i1", Since: t0, At: t0.Add(time.Minute)}
	for _, c := range []struct {
		name string
		it   inbox.Item
		want bool
	}{
		{"the need answered", inbox.Item{Incarnation: "i1", Since: t0}, true},
		{"a new need after the answer", inbox.Item{Incarnation: "i1", Since: t0.Add(2 * time.Minute)}, false},
		{"another incarnation", inbox.Item{Incarnation: "i2", Since: t0}, false},
	} {
		if got := covers(a, c.it); got != c.want {
			t.Errorf("[%s] expected %v … got %v", c.name, c.want, got)
		}
	}
}

// TestOptionInput: choosing an option types what confirms it in each
// agent's dialog: the digit where the digit answers, the digit and Enter
// where it only moves the selection (Codex's startup screens).
func TestOptionInput(t *testing.T) {
	digit := verbs.InjectRequest{Name: "s-0", Text: "2", NoClear: true}
	digitEnter := verbs.InjectRequest{Name: "s-0", Text: "2", Enter: true, NoClear: true}
	for _, c := range []struct {
		agent, kind string
		want        verbs.InjectRequest
	}{
		{herd.AgentClaude, inbox.KindPermission, digit},
		{herd.AgentClaude, inbox.KindQuestion, digit},
		{herd.AgentClaude, inbox.KindStartup, digit},
		{herd.AgentCodex, inbox.KindPermission, digit},
		{herd.AgentCodex, inbox.KindStartup, digitEnter},
		{herd.AgentGemini, inbox.KindPermission, digit},
		{herd.AgentGemini, inbox.KindStartup, digit},
		{herd.AgentGeneric, inbox.KindPermission, digitEnter},
		{herd.AgentCodex, inbox.KindBlocked, verbs.InjectRequest{Name: "s-0", Text: "continue", Enter: true}},
	} {
		got := optionInput(inbox.Item{Session: "s-0", Agent: c.agent, Kind: c.kind}, "2")
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s %s] input (-expected +got):\n%s", c.agent, c.kind, diff)
		}
	}
}
