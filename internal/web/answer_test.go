package web

import (
	"testing"
	"time"

	"herd/internal/web/inbox"
)

func TestAnswerCovers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := answer{incarnation: "i1", since: t0, at: t0.Add(time.Minute)}
	for _, c := range []struct {
		name string
		it   inbox.Item
		want bool
	}{
		{"the need answered", inbox.Item{Incarnation: "i1", Since: t0}, true},
		{"a new need after the answer", inbox.Item{Incarnation: "i1", Since: t0.Add(2 * time.Minute)}, false},
		{"another incarnation", inbox.Item{Incarnation: "i2", Since: t0}, false},
	} {
		if got := a.covers(c.it); got != c.want {
			t.Errorf("[%s] expected %v … got %v", c.name, c.want, got)
		}
	}
}
