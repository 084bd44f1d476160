package sqltx

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
)

// TestDecodeExit: the exit column read by hand is what encoding/json
// reads, for what herd writes and for anything else a column may hold.
func TestDecodeExit(t *testing.T) {
	code, neg, sig := 1, -2, 9
	at := time.Date(2026, 11, 22, 21, 0, 0, 123456789, time.UTC)
	var written []string
	for _, e := range []herd.Exit{
		{Code: &code, Reason: herd.ReasonExitCode, At: at},
		{Signal: &sig, Reason: "signal", At: at.In(time.FixedZone("X", 7200))},
		{Code: &neg, Signal: &sig, Reason: "", At: time.Time{}},
		{Reason: herd.ReasonLaunchFailed, At: at, Message: "exec: \"nope\": not found"},
		{Reason: "ünïcode ✓", At: at, Message: "plain"},
		{Reason: "<&>", Message: "tab\there"},
	} {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, string(b))
	}
	others := []string{
		`{"reason":"exit_code","code":1,"signal":null,"at":"2026-11-22T21:00:00Z"}`, // another key order
		`{ "code": 1, "signal": null, "reason": "x", "at": "2026-11-22T21:00:00Z" }`,
		`{"code":1.5,"signal":null,"reason":"x","at":"2026-11-22T21:00:00Z"}`,
		`{"code":1,"signal":null,"reason":"x","at":"not a time"}`,
		`{"code":1,"signal":null,"reason":"x","at":"2026-11-22T21:00:00Z","extra":1}`,
		`{"code":1,"signal":null,"reason":"x\"y","at":"2026-11-22T21:00:00Z"}`,
		`{"code":99999999999999999999,"signal":null,"reason":"x","at":"2026-11-22T21:00:00Z"}`,
		`{"code":1,"signal":null,"reason":"x","at":"2026-11-22T21:00:00Z"`,
		`{"code":01,"signal":null,"reason":"x","at":"2026-11-22T21:00:00Z"}`,
		`{"code":-0,"signal":0,"reason":"x","at":"2026-11-22T21:00:00Z"}`,
		`{}`, `null`, `garbage`,
	}
	for _, s := range append(written, others...) {
		var want herd.Exit
		wantErr := json.Unmarshal([]byte(s), &want)
		var got herd.Exit
		err := decodeExit(s, &got)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("[%s] expected error %v … got %v", s, wantErr, err)
			continue
		}
		if err == nil {
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("[%s] differs from encoding/json (-json +got):\n%s", s, d)
			}
		}
	}
}
