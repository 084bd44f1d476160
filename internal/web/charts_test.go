package web

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/resources"
)

func TestCrashes(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
	evs := []herd.Event{
		{Session: "w-0", Kind: herd.EventCrashed, Time: at(-1)}, // before the window
		{Session: "w-0", Kind: herd.EventCrashed, Time: at(0)},
		{Session: "w-1", Kind: herd.EventCrashed, Time: at(59)},
		{Session: "w-1", Kind: herd.EventRestarted, Time: at(60)},
		{Session: "my-role-12", Kind: herd.EventCrashed, Time: at(179)},
		{Session: "w-0", Kind: herd.EventCrashed, Time: at(180)}, // after the last bucket
		{Session: "w-0", Kind: herd.EventStopped, Time: at(5)},   // not counted
	}
	got := Crashes(evs, start, time.Hour, 3)
	want := []RoleCrashes{
		{Role: "my-role", Crashed: []int{0, 0, 1}, Restarted: []int{0, 0, 0}},
		{Role: "w", Crashed: []int{2, 0, 0}, Restarted: []int{0, 1, 0}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("[crashes] expected … got (-want +got):\n%s", d)
	}
	for in, want := range map[string]string{"w-0": "w", "a-b-3": "a-b", "odd": "odd", "x-y": "x-y", "-1": "-1"} {
		if got := RoleOf(in); got != want {
			t.Errorf("[role of %q] expected %q … got %q", in, want, got)
		}
	}
}

// fakeResources serves fixed samples.
type fakeResources map[string][]resources.Point

func (f fakeResources) Series(name string) []resources.Point { return f[name] }
func (f fakeResources) Every() time.Duration                 { return 30 * time.Second }

// TestChartsJSON: the charts' endpoints answer their JSON.
func TestChartsJSON(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Second)
	cpu := 12.5
	c := newTestConsole(t, func(o *Options, _ string) {
		o.Resources = fakeResources{"w-0": {{At: t0, RSSBytes: 1 << 20}, {At: t0.Add(30 * time.Second), CPUPercent: &cpu, RSSBytes: 2 << 20}}}
	})
	c.back.mu.Lock()
	c.back.events = []herd.Event{{ID: 1, Session: "w-0", Kind: herd.EventCrashed, Time: time.Now().UTC()},
		{ID: 2, Session: "w-0", Kind: herd.EventRestarted, Time: time.Now().UTC()}}
	c.back.mu.Unlock()
	bearer := map[string]string{"Authorization": "Bearer the-token"}

	var rs ResourceSeries
	if got := c.call(t, &http.Client{}, "GET", "/api/v1/sessions/w-0/resources", bearer, nil, &rs); got != 200 {
		t.Fatalf("[resources] expected 200 … got %d", got)
	}
	if rs.Every != "30s" || len(rs.Points) != 2 || rs.Points[0].CPUPercent != nil || *rs.Points[1].CPUPercent != 12.5 || rs.Points[1].RSSBytes != 2<<20 {
		t.Errorf("[resources] expected the two samples … got %+v", rs)
	}
	var none ResourceSeries
	c.call(t, &http.Client{}, "GET", "/api/v1/sessions/w-9/resources", bearer, nil, &none)
	if none.Points == nil || len(none.Points) != 0 {
		t.Errorf("[resources of another] expected an empty list … got %+v", none.Points)
	}

	var ch CrashChart
	if got := c.call(t, &http.Client{}, "GET", "/api/v1/crashes", bearer, nil, &ch); got != 200 {
		t.Fatalf("[crashes] expected 200 … got %d", got)
	}
	if ch.Bucket != "1h0m0s" || len(ch.Roles) != 1 || len(ch.Roles[0].Crashed) != crashBuckets ||
		ch.Roles[0].Crashed[crashBuckets-1] != 1 || ch.Roles[0].Restarted[crashBuckets-1] != 1 {
		t.Errorf("[crashes] expected one crash and one restart in the last bucket … got %+v", ch)
	}
}
