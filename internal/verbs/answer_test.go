package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"herd"
)

// fakeAnswerer records answers.
type fakeAnswerer struct{ got []AnswerRequest }

func (f *fakeAnswerer) Answer(_ context.Context, req AnswerRequest) (Result, error) {
	f.got = append(f.got, req)
	if len(f.got) > 1 {
		return Result{}, errors.New("already answered")
	}
	return Result{Message: "sent"}, nil
}

// TestAnswerAcrossHosts: an answer for another host's session is decided
// by that host's console (forwarded, with its since), so two consoles
// answering at once get one delivery.
func TestAnswerAcrossHosts(t *testing.T) {
	ctx := context.Background()
	rows := fleet()
	b, _ := host("b", rows, noForward(t))
	bAns := &fakeAnswerer{}
	b.Answerer = bAns
	var sent []herd.Command
	a, _ := host("a", rows, forwardFunc(func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
		sent = append(sent, c)
		return b.Execute(ctx, c)
	}))
	aAns := &fakeAnswerer{}
	a.Answerer = aAns
	since := time.Date(2026, 1, 1, 10, 0, 0, 123456789, time.UTC)

	res, err := a.Answer(ctx, AnswerRequest{Name: "w-2", Option: "1", Since: since, Who: "browser:1 from 10.0.0.1"})
	if err != nil || res.Message != "sent (on host b)" {
		t.Fatalf("[forwarded] expected b's answer … got %+v, %v", res, err)
	}
	if len(sent) != 1 || sent[0].Kind != herd.CommandAnswer || len(bAns.got) != 1 || len(aAns.got) != 0 {
		t.Fatalf("[forwarded] expected one answer command run by b … sent %+v, b %+v, a %+v", sent, bAns.got, aAns.got)
	}
	if g := bAns.got[0]; g.Name != "w-2" || g.Option != "1" || !g.Since.Equal(since) || g.From != "a" || g.Who != "browser:1 from 10.0.0.1" {
		t.Errorf("[forwarded] expected the request intact … got %+v", g)
	}
	// A second console's answer to the same need: b refuses it.
	if _, err := a.Answer(ctx, AnswerRequest{Name: "w-2", Text: "no", Since: since}); err == nil || !strings.Contains(err.Error(), "already answered") {
		t.Errorf("[second] expected b's refusal … got %v", err)
	}
	// This host's own session: its own console, nothing forwarded.
	if _, err := a.Answer(ctx, AnswerRequest{Name: "w-0", Option: "2"}); err != nil || len(aAns.got) != 1 || len(sent) != 2 {
		t.Errorf("[local] expected a's console to answer … got %v, a %+v, %d sent", err, aAns.got, len(sent))
	}
	// A host without a console cannot answer.
	b.Answerer = nil
	if _, err := a.Answer(ctx, AnswerRequest{Name: "w-2", Option: "1"}); err == nil || !strings.Contains(err.Error(), "serves no console") {
		t.Errorf("[no console] expected %v … got %v", ErrNoConsole, err)
	}
}
