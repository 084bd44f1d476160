package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
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

// TestInjectMultilineFlag: --multiline asks the daemon for multi-line
// input, for one session and for many; without it the ask is absent.
func TestInjectMultilineFlag(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "herd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		asked []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked = append(asked, r.URL.Path+" "+string(b))
		mu.Unlock()
		io.WriteString(w, `{"message":"sent","deliveries":[{"session":"w-0","delivered":true}]}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	for _, args := range [][]string{
		{"inject", "--multiline", "w-0", "one\ntwo"},
		{"inject", "w-0", "one line"},
		{"inject", "--multiline", "--role", "w", "one\ntwo"},
	} {
		root := newRoot()
		root.SetArgs(append([]string{"--state-dir", dir}, args...))
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		if err := root.Execute(); err != nil {
			t.Fatalf("[%v] %v", args, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 || !strings.Contains(asked[0], `"multiline":true`) || strings.Contains(asked[1], "multiline") ||
		!strings.HasPrefix(asked[2], "/v1/inject ") || !strings.Contains(asked[2], `"multiline":true`) {
		t.Errorf("expected multiline asked with the flag only … got %q", asked)
	}
}
