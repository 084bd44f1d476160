package selector

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var keys = []string{"role", "state", "host"}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Selector
		wantErr string
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "role=worker", want: Selector{{Key: "role", Value: "worker"}}},
		{in: "role==worker", want: Selector{{Key: "role", Value: "worker"}}},
		{in: "role=worker, state!=failed", want: Selector{{Key: "role", Value: "worker"}, {Key: "state", Value: "failed", Not: true}}},
		{in: "host=", want: Selector{{Key: "host", Value: ""}}},
		{in: "role", wantErr: "want key=value"},
		{in: "=x", wantErr: "want key=value"},
		{in: "role=a=b", wantErr: "want key=value"},
		{in: "role=a,", wantErr: "want key=value"},
		{in: "colour=red", wantErr: `selector key "colour": want one of role, state, host`},
	} {
		got, err := Parse(tc.in, keys)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("[%q] expected error containing %q, got %v", tc.in, tc.wantErr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%q] expected no error, got %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("[%q] selector (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestMatch(t *testing.T) {
	labels := map[string]string{"role": "worker", "state": "running"}
	for _, tc := range []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"role=worker", true},
		{"role=batch", false},
		{"role!=batch", true},
		{"role=worker,state=running", true},
		{"role=worker,state=failed", false},
		{"role=worker,state!=running", false},
		{"host=", true}, // a missing label is empty
		{"host!=", false},
	} {
		sel, err := Parse(tc.sel, keys)
		if err != nil {
			t.Fatalf("[%q] parse: %v", tc.sel, err)
		}
		if got := sel.Match(labels); got != tc.want {
			t.Errorf("[%q] expected %v, got %v", tc.sel, tc.want, got)
		}
		if tc.sel != "" && !strings.Contains(tc.sel, " ") && sel.String() != tc.sel {
			t.Errorf("[%q] expected String to round-trip, got %q", tc.sel, sel.String())
		}
	}
}
