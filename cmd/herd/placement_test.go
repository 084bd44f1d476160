package main

import (
	"testing"

	"herd/internal/api"
)

func TestPlacementText(t *testing.T) {
	cases := []struct {
		name        string
		p           *api.PlacementView
		short, long string
	}{
		{"unplaced", nil, "-", ""},
		{"spread anywhere", &api.PlacementView{Spread: true, Slots: map[string]string{"w-10": "b", "w-2": "a"}},
			"spread", "spread over every live host; slots: w-2=a, w-10=b"},
		{"listed hosts with failover", &api.PlacementView{Hosts: []string{"b", "a"}, Failover: true, Slots: map[string]string{}},
			"hosts=b,a failover", "on the first live host of b, a; failover; no slot assigned yet"},
		{"spread over listed", &api.PlacementView{Hosts: []string{"a", "c"}, Spread: true, Slots: map[string]string{"w-0": "c"}},
			"spread hosts=a,c", "spread over a, c; slots: w-0=c"},
	}
	for _, c := range cases {
		if got := placementShort(c.p); got != c.short {
			t.Errorf("[%s] expected column %q, got %q", c.name, c.short, got)
		}
		if c.p == nil {
			continue
		}
		if got := placementText(c.p); got != c.long {
			t.Errorf("[%s] expected describe line %q, got %q", c.name, c.long, got)
		}
	}
}
