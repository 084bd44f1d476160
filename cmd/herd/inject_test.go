package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitInjectArgs(t *testing.T) {
	type split struct {
		Name, Text string
		NoEnter    bool
	}
	tests := []struct {
		name    string
		args    []string
		want    split
		wantErr string
	}{
		{"plain", []string{"w-0", "run the tests"}, split{"w-0", "run the tests", false}, ""},
		{"flag-looking text", []string{"w-0", "-v please"}, split{"w-0", "-v please", false}, ""},
		{"help is text", []string{"w-0", "--help"}, split{"w-0", "--help", false}, ""},
		{"a lone dash is text", []string{"w-0", "-"}, split{"w-0", "-", false}, ""},
		{"dash separator", []string{"w-0", "--", "--x"}, split{"w-0", "--x", false}, ""},
		{"dash then no-enter is text", []string{"w-0", "--", "--no-enter"}, split{"w-0", "--no-enter", false}, ""},
		{"trailing no-enter", []string{"w-0", "hi", "--no-enter"}, split{"w-0", "hi", true}, ""},
		{"lone no-enter is text", []string{"w-0", "--no-enter"}, split{"w-0", "--no-enter", false}, ""},
		{"no text", []string{"w-0"}, split{}, "want NAME and TEXT"},
		{"nothing", nil, split{}, "want NAME and TEXT"},
		{"unquoted text", []string{"w-0", "run", "the", "tests"}, split{}, "got 3"},
		{"other trailing flag", []string{"w-0", "hi", "--enter"}, split{}, "flags go before NAME"},
	}
	for _, tt := range tests {
		name, text, noEnter, err := splitInjectArgs(tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("[%s] expected error containing %q, got %v", tt.name, tt.wantErr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%s] expected no error, got %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, split{name, text, noEnter}); diff != "" {
			t.Errorf("[%s] expected … got … (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestReadInjectText(t *testing.T) {
	big := strings.Repeat("x", maxInjectText)
	tests := []struct {
		name, in, want, wantErr string
	}{
		{"one newline dropped", "hello\n", "hello", ""},
		{"crlf dropped", "hello\r\n", "hello", ""},
		{"only the last newline", "a\nb\n\n", "a\nb\n", ""},
		{"no newline", "-v please", "-v please", ""},
		{"lone cr kept", "a\r", "a\r", ""},
		{"empty", "", "", ""},
		{"at the limit", big, big, ""},
		{"over the limit", big + "yz", "", "limit"},
	}
	for _, tt := range tests {
		got, err := readInjectText(strings.NewReader(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("[%s] expected error containing %q, got %v", tt.name, tt.wantErr, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("[%s] expected %d bytes, nil … got %d bytes, %v", tt.name, len(tt.want), len(got), err)
		}
	}
}
