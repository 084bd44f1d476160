package storetest

import (
	"slices"
	"testing"

	"herd"
	"herd/internal/store"
)

// appendAll appends events in one transaction and returns them with their ids.
func appendAll(t *testing.T, s store.Store, events []herd.Event) []herd.Event {
	t.Helper()
	out := make([]herd.Event, len(events))
	copy(out, events)
	update(t, s, func(tx store.Tx) error {
		for i := range out {
			if err := tx.AppendEvent(&out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

func testAppendEventSetsID(t *testing.T, s store.Store) {
	first := appendAll(t, s, []herd.Event{
		{Time: at(0), Host: "h", Session: "a-0", Incarnation: "i1", Kind: herd.EventSpawned,
			Reason: herd.ReasonUser, Message: "launched"},
		{Time: at(1), Session: "a-0", Kind: herd.EventExited},
	})
	second := appendAll(t, s, []herd.Event{{Time: at(2), Session: "a-0", Kind: herd.EventCrashed}})
	all := append(first, second...)
	for i, e := range all {
		if e.ID <= 0 || (i > 0 && e.ID <= all[i-1].ID) {
			t.Errorf("[event %d] expected a positive id above the previous one, got ids %d", i, e.ID)
		}
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Events(store.EventFilter{})
		if err != nil {
			return err
		}
		diff(t, "events", all, got)
		for _, e := range got {
			checkUTC(t, "event", &e.Time)
		}
		return nil
	})
}

func testEventFilters(t *testing.T, s store.Store) {
	ev := appendAll(t, s, []herd.Event{
		{Time: at(0), Session: "a-0", Kind: herd.EventSpawned, Host: "h1"},  // 0
		{Time: at(1), Session: "b-0", Kind: herd.EventSpawned, Host: "h2"},  // 1
		{Time: at(2), Session: "a-0", Kind: herd.EventCrashed},              // 2
		{Time: at(3), Session: "a-0", Kind: herd.EventBackoff},              // 3
		{Time: at(3), Session: "b-0", Kind: herd.EventCrashed},              // 4
		{Time: at(5), Session: "a-0", Kind: herd.EventSpawned},              // 5
		{Time: at(6), Session: "c-0", Kind: herd.EventActivity, Host: "h1"}, // 6
	})
	cases := []struct {
		name string
		f    store.EventFilter
		want []int // indexes into ev
	}{
		{"no filter", store.EventFilter{}, []int{0, 1, 2, 3, 4, 5, 6}},
		{"session", store.EventFilter{Session: "a-0"}, []int{0, 2, 3, 5}},
		{"kind", store.EventFilter{Kind: herd.EventCrashed}, []int{2, 4}},
		{"session and kind", store.EventFilter{Session: "a-0", Kind: herd.EventSpawned}, []int{0, 5}},
		{"since is inclusive", store.EventFilter{Since: at(3)}, []int{3, 4, 5, 6}},
		{"since in another zone", store.EventFilter{Since: at(3).UTC()}, []int{3, 4, 5, 6}},
		{"after id", store.EventFilter{AfterID: ev[4].ID}, []int{5, 6}},
		{"after last id", store.EventFilter{AfterID: ev[6].ID}, nil},
		{"limit keeps the newest", store.EventFilter{Limit: 3}, []int{4, 5, 6}},
		{"limit above count", store.EventFilter{Limit: 100}, []int{0, 1, 2, 3, 4, 5, 6}},
		{"limit with session", store.EventFilter{Session: "a-0", Limit: 2}, []int{3, 5}},
		{"limit with after id", store.EventFilter{AfterID: ev[1].ID, Limit: 2}, []int{5, 6}},
		{"since and kind", store.EventFilter{Since: at(1), Kind: herd.EventSpawned}, []int{1, 5}},
		{"unknown session", store.EventFilter{Session: "zzz"}, nil},
		{"host", store.EventFilter{Host: "h1"}, []int{0, 6}},
		{"host and kind", store.EventFilter{Host: "h2", Kind: herd.EventSpawned}, []int{1}},
		{"unknown host", store.EventFilter{Host: "h9"}, nil},
		{"page keeps the oldest", store.EventFilter{Page: 3}, []int{0, 1, 2}},
		{"page after id", store.EventFilter{AfterID: ev[2].ID, Page: 2}, []int{3, 4}},
		{"page with session", store.EventFilter{Session: "a-0", Page: 3}, []int{0, 2, 3}},
	}
	view(t, s, func(tx store.Tx) error {
		for _, c := range cases {
			got, err := tx.Events(c.f)
			if err != nil {
				t.Errorf("[%s] unexpected error %v", c.name, err)
				continue
			}
			var want []herd.Event
			for _, i := range c.want {
				want = append(want, ev[i])
			}
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			diff(t, c.name, want, got)
		}
		// The cursor below the n newest events a filter selects.
		cursors := []struct {
			name string
			f    store.EventFilter
			n    int
			want int64
		}{
			{"newest 3", store.EventFilter{}, 3, ev[3].ID},
			{"newest 2 of a session", store.EventFilter{Session: "a-0"}, 2, ev[2].ID},
			{"more than match", store.EventFilter{Kind: herd.EventCrashed}, 5, 0},
			{"more than match after id", store.EventFilter{AfterID: ev[4].ID}, 5, ev[4].ID},
		}
		for _, c := range cursors {
			got, err := tx.NewestEventsAfter(c.f, c.n)
			if err != nil || got != c.want {
				t.Errorf("[cursor %s] expected %d, got %d (%v)", c.name, c.want, got, err)
			}
		}
		return nil
	})
}

func testEventData(t *testing.T, s store.Store) {
	in := map[string]any{
		"int":    3,
		"float":  1.5,
		"string": "x",
		"bool":   true,
		"null":   nil,
		"list":   []any{1, "a"},
		"object": map[string]any{"k": int64(2)},
	}
	// JSON numbers come back as float64, lists as []any, objects as
	// map[string]any.
	want := map[string]any{
		"int":    float64(3),
		"float":  1.5,
		"string": "x",
		"bool":   true,
		"null":   nil,
		"list":   []any{float64(1), "a"},
		"object": map[string]any{"k": float64(2)},
	}
	ev := appendAll(t, s, []herd.Event{
		{Time: at(0), Session: "a-0", Kind: herd.EventSummary, Data: in},
		{Time: at(1), Session: "a-0", Kind: herd.EventSummary},
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Events(store.EventFilter{})
		if err != nil {
			return err
		}
		if len(got) != 2 {
			t.Fatalf("[events] expected 2, got %d", len(got))
		}
		diff(t, "event data", want, got[0].Data)
		if got[1].Data != nil {
			t.Errorf("[nil data] expected nil, got %#v", got[1].Data)
		}
		if got[0].ID != ev[0].ID {
			t.Errorf("[id] expected %d, got %d", ev[0].ID, got[0].ID)
		}
		return nil
	})

	// Data that is not JSON is an error, not a panic, and is not stored.
	err := s.Update(ctx(t), func(tx store.Tx) error {
		return tx.AppendEvent(&herd.Event{Kind: herd.EventSummary, Data: map[string]any{"f": func() {}}})
	})
	if err == nil {
		t.Errorf("[unencodable data] expected an error, got nil")
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Events(store.EventFilter{})
		if err != nil {
			return err
		}
		if len(got) != 2 {
			t.Errorf("[after unencodable data] expected 2 events, got %d", len(got))
		}
		return nil
	})
}

// testOddText writes strings with NUL and invalid UTF-8, as agents' output
// and hook reports may carry: the write must succeed, and each string read
// back either as written or with U+FFFD for the offending bytes.
func testOddText(t *testing.T, s store.Store) {
	odd := "a\x00b\xffc\xe2\x82"
	inc := openIncarnation("i-odd", "w-0", "h", at(0))
	inc.AgentSessionID = odd
	e := herd.Event{Time: at(0), Session: "w-0", Kind: herd.EventActivity, Message: odd,
		Data: map[string]any{"text": odd}}
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		if err := tx.PutKV("odd", odd); err != nil {
			return err
		}
		return tx.AppendEvent(&e)
	})
	clean := "a\uFFFDb\uFFFDc\uFFFD"
	check := func(what, got string) {
		t.Helper()
		if got != odd && got != clean {
			t.Errorf("[%s] expected %q or %q, got %q", what, odd, clean, got)
		}
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Incarnation("i-odd")
		if err != nil {
			return err
		}
		check("agent session id", got.AgentSessionID)
		v, _, err := tx.KV("odd")
		if err != nil {
			return err
		}
		check("kv value", v)
		evs, err := tx.Events(store.EventFilter{Session: "w-0"})
		if err != nil {
			return err
		}
		if len(evs) != 1 {
			t.Fatalf("[events] expected 1, got %d", len(evs))
		}
		check("event message", evs[0].Message)
		// JSON marks each invalid byte with U+FFFD; NUL survives escaped.
		if want := "a\x00b\uFFFDc\uFFFD\uFFFD"; evs[0].Data["text"] != want {
			t.Errorf("[event data] expected %q, got %q", want, evs[0].Data["text"])
		}
		return nil
	})
}

// testEventTask: the events of one task are selected by the task its
// data names (a string), whatever their kind or session, and with the
// other filters.
func testEventTask(t *testing.T, s store.Store) {
	ev := appendAll(t, s, []herd.Event{
		{Time: at(0), Session: "a-0", Kind: herd.EventTaskQueued, Data: map[string]any{"task": "t-1"}},  // 0
		{Time: at(1), Session: "a-0", Kind: herd.EventRestarted, Data: map[string]any{"task": "t-1"}},   // 1
		{Time: at(1), Session: "b-0", Kind: herd.EventTaskQueued, Data: map[string]any{"task": "t-10"}}, // 2
		{Time: at(2), Session: "b-0", Kind: herd.EventSpawned, Data: map[string]any{"task": 7}},         // 3: not a task id
		{Time: at(3), Session: "a-0", Kind: herd.EventActivity},                                         // 4
		{Time: at(4), Session: "a-0", Kind: herd.EventTaskLanded, Data: map[string]any{"task": "t-1"}},  // 5
	})
	for _, c := range []struct {
		name string
		f    store.EventFilter
		want []int
	}{
		{"task", store.EventFilter{Task: "t-1"}, []int{0, 1, 5}},
		{"another task", store.EventFilter{Task: "t-10"}, []int{2}},
		{"task and kind", store.EventFilter{Task: "t-1", Kind: herd.EventRestarted}, []int{1}},
		{"task, newest", store.EventFilter{Task: "t-1", Limit: 1}, []int{5}},
		{"unknown task", store.EventFilter{Task: "t-2"}, nil},
	} {
		view(t, s, func(tx store.Tx) error {
			got, err := tx.Events(c.f)
			if err != nil {
				t.Errorf("[%s] unexpected error %v", c.name, err)
				return nil
			}
			var ids, want []int64
			for _, e := range got {
				ids = append(ids, e.ID)
			}
			for _, i := range c.want {
				want = append(want, ev[i].ID)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("[%s] expected events %v, got %v", c.name, want, ids)
			}
			return nil
		})
	}
}
