package bench

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"herd"
)

// reportLaunchGaps reports the mean time between launches over the first
// and the last 100 spawned events of a fleet of n (a third of n each when
// smaller): equal figures mean each launch costs the same whatever the
// number of agents already running (linear), a growing one that each
// launch pays for those before it.
func reportLaunchGaps(b *testing.B, d *daemon, n int) {
	var events []herd.Event
	q := map[string][]string{"kind": {herd.EventSpawned}, "limit": {strconv.Itoa(2 * n)}}
	if err := d.client.Do(context.Background(), "GET", "/v1/events", q, nil, &events); err != nil {
		b.Fatal(err)
	}
	var at []time.Time
	for _, e := range events {
		at = append(at, e.Time)
	}
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	k := min(100, len(at)/3)
	if k < 2 {
		return
	}
	first := at[k-1].Sub(at[0]) / time.Duration(k-1)
	last := at[len(at)-1].Sub(at[len(at)-k]) / time.Duration(k-1)
	b.ReportMetric(float64(first.Microseconds())/1000, "launch-first100-ms")
	b.ReportMetric(float64(last.Microseconds())/1000, "launch-last100-ms")
}
