package verbs

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    unix.Signal
		wantErr string
	}{
		{"TERM", unix.SIGTERM, ""},
		{"SIGTERM", unix.SIGTERM, ""},
		{"term", unix.SIGTERM, ""},
		{"hup", unix.SIGHUP, ""},
		{"USR1", unix.SIGUSR1, ""},
		{"9", unix.SIGKILL, ""},
		{"2", unix.SIGINT, ""},
		{"0", 0, "want 1 to 64"},
		{"65", 0, "want 1 to 64"},
		{"-9", 0, "want 1 to 64"},
		{"", 0, "not a signal name"},
		{"SIGBOGUS", 0, "not a signal name"},
		{"kill -9", 0, "not a signal name"},
	}
	for _, tt := range tests {
		got, err := ParseSignal(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("[%q] expected an error with %q … got %v, %v", tt.in, tt.wantErr, got, err)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("[%q] expected %v … got %v, %v", tt.in, tt.want, got, err)
		}
	}
}

func TestParseGrace(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"", true}, {"10s", true}, {"1h", true}, {"0s", false}, {"-1s", false}, {"2h", false}, {"soon", false}} {
		_, err := ParseGrace("stop", tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("[%q] expected ok=%v … got %v", tc.in, tc.ok, err)
		}
	}
}
