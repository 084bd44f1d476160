package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzFrames: whatever a client writes, the guard never panics, passes on
// only lines checkFrame accepts, whole, and answers every other line with
// one JSON-RPC error.
func FuzzFrames(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `hello`, "\xff\xfe", `[]`, `{"jsonrpc":"1.0","id":3}`,
		`[{"jsonrpc":"2.0","id":4,"method":"tools/list"},{"jsonrpc":"9"}]`, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\nx\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		g := &frameGuard{in: newReader(strings.NewReader(in)), out: &out}
		passed, err := io.ReadAll(g)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, line := range strings.SplitAfter(string(passed), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			if code, _, why := checkFrame([]byte(line)); code != 0 {
				t.Fatalf("passed on a line the check refuses (%s): %q", why, line)
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			var reply struct {
				JSONRPC string `json:"jsonrpc"`
				Error   struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &reply); err != nil || reply.JSONRPC != "2.0" ||
				(reply.Error.Code != codeParseError && reply.Error.Code != codeInvalidRequest) {
				t.Fatalf("a refusal that is not a JSON-RPC error: %q (%v)", line, err)
			}
		}
	})
}
