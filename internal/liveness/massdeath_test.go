package liveness

import (
	"math"
	"testing"

	"herd"
)

func TestMassDeath(t *testing.T) {
	tests := []struct {
		name               string
		observed, unproven int
		fraction           float64
		want               bool
	}{
		{"nothing dead", 10, 0, 0.5, false},
		{"one of ten", 10, 1, 0.5, false},
		{"exactly half is not more than half", 10, 5, 0.5, false},
		{"six of ten", 10, 6, 0.5, true},
		{"eight of ten (80 %)", 10, 8, 0.5, true},
		{"all of five", 5, 5, 0.5, true},
		{"three of five", 5, 3, 0.5, true},
		{"all of four: too few sessions", 4, 4, 0.5, false},
		{"one of one", 1, 1, 0.5, false},
		{"no sessions", 0, 0, 0.5, false},
		{"fraction 1 never trips", 10, 10, 1, false},
		{"low fraction", 10, 2, 0.1, true},
		{"a third, exactly", 9, 3, 1.0 / 3, false},
		{"a third, one more", 9, 4, 1.0 / 3, true},
		{"fraction 0 is the default", 10, 6, 0, true},
		{"fraction 0 is the default, at half", 10, 5, 0, false},
		{"negative fraction is the default", 10, 6, -1, true},
		{"fraction above 1 is the default", 10, 6, 2, true},
		{"NaN fraction is the default", 10, 6, math.NaN(), true},
		{"negative counts", -3, -1, 0.5, false},
	}
	for _, tt := range tests {
		if got := MassDeath(tt.observed, tt.unproven, tt.fraction); got != tt.want {
			t.Errorf("[%s] MassDeath(%d, %d, %v): expected %v … got %v", tt.name, tt.observed, tt.unproven, tt.fraction, tt.want, got)
		}
	}
}

func TestBreakMassDeath(t *testing.T) {
	crash := Verdict{State: herd.StateCrashed, Runtime: herd.Dead, Process: herd.Dead, Action: Crash,
		Exit: herd.Exit{Reason: herd.ReasonPaneGone}}
	running := Verdict{State: herd.StateRunning, Runtime: herd.Alive, Process: herd.Alive, Action: None}
	held := Verdict{State: herd.StateUnknown, Runtime: herd.Unknown, Process: herd.Dead, Action: Reprobe}
	tests := []struct {
		name       string
		obs        []Observed
		wantHeld   int
		wantAction []Action
	}{
		{"80 % of ten dead by the listing: all held back",
			append(repeat(Observed{Verdict: crash}, 8), repeat(Observed{Verdict: running}, 2)...),
			8, append(repeat(Reprobe, 8), None, None)},
		{"proven deaths are exempt and not counted",
			append(append(repeat(Observed{Verdict: crash, Proven: true}, 6), repeat(Observed{Verdict: crash}, 1)...), repeat(Observed{Verdict: running}, 3)...),
			0, append(repeat(Crash, 7), None, None, None)},
		{"proven deaths kept while the rest is held back",
			append(append(repeat(Observed{Verdict: crash, Proven: true}, 2), repeat(Observed{Verdict: crash}, 6)...), repeat(Observed{Verdict: running}, 2)...),
			6, append(append(repeat(Crash, 2), repeat(Reprobe, 6)...), None, None)},
		{"two of ten: ordinary crashes",
			append(repeat(Observed{Verdict: crash}, 2), repeat(Observed{Verdict: running}, 8)...),
			0, append(repeat(Crash, 2), repeat(None, 8)...)},
		{"four of four: too few to judge",
			repeat(Observed{Verdict: crash}, 4),
			0, repeat(Crash, 4)},
	}
	for _, tt := range tests {
		got := BreakMassDeath(tt.obs, 0.5)
		if got != tt.wantHeld {
			t.Errorf("[%s] expected %d held back … got %d", tt.name, tt.wantHeld, got)
		}
		for i, o := range tt.obs {
			if o.Verdict.Action != tt.wantAction[i] {
				t.Errorf("[%s] session %d: expected %s … got %s", tt.name, i, tt.wantAction[i], o.Verdict.Action)
			}
			if o.Verdict.Action == Reprobe && o.Verdict != held {
				t.Errorf("[%s] session %d: expected the held-back verdict %+v … got %+v", tt.name, i, held, o.Verdict)
			}
		}
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}
