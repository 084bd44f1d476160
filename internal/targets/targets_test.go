package targets

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
)

func TestResolve(t *testing.T) {
	views := []api.SessionView{
		{Name: "w-0", Role: "w", State: herd.StateRunning, Activity: herd.ActivityIdle, RuntimeKind: "tmux", Host: "a"},
		{Name: "w-1", Role: "w", State: herd.StateStopped, Activity: herd.ActivityIdle, RuntimeKind: "tmux", Host: "a"},
		{Name: "w-2", Role: "w", State: herd.StateRunning, Activity: herd.ActivityWorking, RuntimeKind: "tmux", Host: "b", Archived: true},
		{Name: "r-0", Role: "r", State: herd.StateRunning, Activity: herd.ActivityWorking, RuntimeKind: "exec", Host: "b"},
		{Name: "x-9", State: herd.StateUnknown, Unmanaged: true},
	}
	live := func(v api.SessionView) bool { return v.State.Live() }
	cases := []struct {
		name          string
		t             api.Targets
		keep          func(api.SessionView) bool
		names, missed []string
		err           bool
	}{
		{name: "nothing", t: api.Targets{}, err: true},
		{name: "names and all", t: api.Targets{Names: []string{"w-0"}, All: true}, err: true},
		{name: "bad selector", t: api.Targets{Selector: "colour=red"}, err: true},
		{name: "names", t: api.Targets{Names: []string{"r-0", "w-0", "nope", "w-0"}}, names: []string{"r-0", "w-0"}, missed: []string{"nope"}},
		{name: "archived by name", t: api.Targets{Names: []string{"w-2"}}, names: []string{"w-2"}},
		{name: "role", t: api.Targets{Role: "w"}, names: []string{"w-0", "w-1"}},
		{name: "role live", t: api.Targets{Role: "w"}, keep: live, names: []string{"w-0"}},
		{name: "all", t: api.Targets{All: true}, names: []string{"r-0", "w-0", "w-1"}},
		{name: "selector", t: api.Targets{Selector: "activity=working"}, names: []string{"r-0"}},
		{name: "selector not", t: api.Targets{Selector: "runtime!=exec,host=a"}, names: []string{"w-0", "w-1"}},
		{name: "role and selector", t: api.Targets{Role: "w", Selector: "state=stopped"}, names: []string{"w-1"}},
		{name: "names and role", t: api.Targets{Names: []string{"r-0"}, Role: "w"}, keep: live, names: []string{"r-0", "w-0"}},
		{name: "unknown role", t: api.Targets{Role: "zz"}},
	}
	for _, tc := range cases {
		names, missed, err := Resolve(views, tc.t, tc.keep)
		if (err != nil) != tc.err {
			t.Errorf("[%s] expected error %v, got %v", tc.name, tc.err, err)
			continue
		}
		if d := cmp.Diff(tc.names, names); d != "" {
			t.Errorf("[%s] names (-expected +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(tc.missed, missed); d != "" {
			t.Errorf("[%s] missing (-expected +got):\n%s", tc.name, d)
		}
	}
}
