package demo

import (
	"testing"

	"herd"
	"herd/internal/api"
)

func TestTold(t *testing.T) {
	all := func() []api.SessionView {
		return []api.SessionView{
			{Name: "healthy-0", State: herd.StateRunning},
			{Name: "crashloop-0", State: herd.StateFailed},
			{Name: "staller-0", State: herd.StateStalled},
			{Name: "waiter-0", State: herd.StateRunning, Activity: herd.ActivityWaiting},
		}
	}
	for _, c := range []struct {
		name   string
		change func([]api.SessionView) []api.SessionView
		want   bool
	}{
		{"every story shown", func(v []api.SessionView) []api.SessionView { return v }, true},
		{"crash loop still in backoff", func(v []api.SessionView) []api.SessionView { v[1].State = herd.StateBackoff; return v }, false},
		{"staller still running", func(v []api.SessionView) []api.SessionView { v[2].State = herd.StateRunning; return v }, false},
		{"waiter still working", func(v []api.SessionView) []api.SessionView { v[3].Activity = herd.ActivityWorking; return v }, false},
		{"a session missing", func(v []api.SessionView) []api.SessionView { return v[:3] }, false},
		{"no sessions", func([]api.SessionView) []api.SessionView { return nil }, false},
	} {
		if got := told(c.change(all())); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
}
