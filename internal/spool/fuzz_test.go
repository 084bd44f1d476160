package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"herd/internal/api"
)

// FuzzSpoolFile: any spool file (a hook writes it, anyone who can write
// the state directory may too) is read without a panic, line by line as
// a plain split reads it: each line of at most its bound that is a report
// is applied, in order, and every other line skipped and counted; the
// reports applied, written again, read back the same; and the line reader
// agrees with a plain split at any bound, over-long lines reported by
// their length.
func FuzzSpoolFile(f *testing.F) {
	for _, s := range []string{
		`{"session":"w-0","incarnation":"i1","event":"PreToolUse","payload":"e30=","at":"2026-01-01T00:00:00Z","agent":"claude"}` + "\n",
		`{"session":"w-0"}` + "\n\n" + `garbage` + "\n" + `{"session":"w-1","payload":"not base64"}` + "\n" + `{"session":"w-2"}`,
		"\n\n\n", "{}\r\n{}", "", `{"at":"2026-13-01T00:00:00Z"}` + "\n" + `[]` + "\n" + `null`,
	} {
		f.Add([]byte(s), uint8(8))
	}
	f.Fuzz(func(t *testing.T, file []byte, bound uint8) {
		var applied []api.ActivityReport
		in := &Ingester{Apply: func(_ context.Context, rep api.ActivityReport) error {
			applied = append(applied, rep)
			return nil
		}}
		var r Result
		if !in.readReports(context.Background(), bytes.NewReader(file), "w-0.jsonl", &r) {
			t.Fatal("a read with a live context ended early")
		}
		var lines []string // a plain split: an empty file has no line
		if len(file) > 0 {
			lines = strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
		}
		var want []api.ActivityReport
		skipped := 0
		for _, l := range lines {
			var rep api.ActivityReport
			switch {
			case len(l) > MaxLine:
				skipped++
			case l == "":
			case json.Unmarshal([]byte(l), &rep) != nil:
				skipped++
			default:
				want = append(want, rep)
			}
		}
		if r.Applied != len(applied) || r.Applied != len(want) || r.Skipped != skipped {
			t.Fatalf("applied %d (%d reports), skipped %d; a plain split: %d applied, %d skipped, of %q",
				r.Applied, len(applied), r.Skipped, len(want), skipped, file)
		}
		for i := range want {
			if a, b := marshal(t, applied[i]), marshal(t, want[i]); a != b {
				t.Fatalf("report %d applied as %s, the line says %s", i, a, b)
			}
		}
		// Written again as Append writes them, the reports read back
		// the same.
		var again bytes.Buffer
		for _, rep := range applied {
			again.WriteString(marshal(t, rep) + "\n")
		}
		var back []api.ActivityReport
		in.Apply = func(_ context.Context, rep api.ActivityReport) error {
			back = append(back, rep)
			return nil
		}
		var r2 Result
		in.readReports(context.Background(), &again, "w-0.jsonl", &r2)
		if r2.Skipped != 0 || len(back) != len(applied) {
			t.Fatalf("reports written again: %d of %d read back, %d skipped", len(back), len(applied), r2.Skipped)
		}
		for i := range back {
			if a, b := marshal(t, back[i]), marshal(t, applied[i]); a != b {
				t.Fatalf("report %d read back as %s, written as %s", i, a, b)
			}
		}
		// The line reader at a small bound, against a plain split.
		max := int(bound%64) + 1
		lr := newLineReader(bytes.NewReader(file), max)
		for i := 0; ; i++ {
			line, long, err := lr.next()
			if errors.Is(err, io.EOF) {
				if i != len(lines) {
					t.Fatalf("bound %d: %d lines read, a plain split has %d, of %q", max, i, len(lines), file)
				}
				break
			}
			if err != nil || i >= len(lines) {
				t.Fatalf("bound %d: line %d: %v (a plain split has %d lines)", max, i, err, len(lines))
			}
			if len(lines[i]) > max {
				if long != len(lines[i]) || line != nil {
					t.Fatalf("bound %d: line %d of %d bytes read as %q, long %d", max, i, len(lines[i]), line, long)
				}
			} else if long != 0 || string(line) != lines[i] {
				t.Fatalf("bound %d: line %d read as %q (long %d), a plain split has %q", max, i, line, long, lines[i])
			}
		}
	})
}

func marshal(t *testing.T, rep api.ActivityReport) string {
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
