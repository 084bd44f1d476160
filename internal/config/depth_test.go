package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"herd/internal/config/tomlpos"
)

// nested returns n opening brackets, then n closing ones.
func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

func TestParseRejectsDeepNestingQuickly(t *testing.T) {
	role := "[[role]]\nname = \"a\"\n"
	cases := []struct {
		name     string
		doc      string
		wantLine int
		wantKey  string
		wantMsg  string
	}{
		{"array 9000 deep", role + "command = " + nested("[", "]", 9000) + "\n",
			3, "role[0].command", "nest more than 32 levels"},
		{"array one level too deep", role + "command = " + nested("[", "]", tomlpos.MaxDepth+1) + "\n",
			3, "role[0].command", "nest more than 32 levels"},
		// go-toml keeps no position for arrays: the key's line is named.
		{"deep array continued on a later line", role + "command = [\"x\",\n  " + nested("[", "]", 9000) + "]\n",
			3, "role[0].command", "nest more than 32 levels"},
		{"inline tables 9000 deep", role + "env = " + nested("{a=", "}", 9000)[:len(nested("{a=", "}", 9000))-9000] + "1" + strings.Repeat("}", 9000) + "\n",
			3, "role[0].env", "nest more than 32 levels"},
		{"dotted key of 9000 parts", role + strings.TrimSuffix(strings.Repeat("k.", 9000), ".") + " = 1\n",
			3, "role[0].k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k", "more than 32 dotted parts"},
		{"table header of 9000 parts", "[" + strings.TrimSuffix(strings.Repeat("t.", 9000), ".") + "]\n",
			1, "t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t", "more than 32 dotted parts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			cfg, err := Parse([]byte(c.doc), "herd.toml", "/base")
			took := time.Since(start)
			if cfg != nil || err == nil {
				t.Fatalf("[%s] expected an error, got config %v", c.name, cfg)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("[%s] expected a *config.Error, got %T %v", c.name, err, err)
			}
			if e.Line != c.wantLine || e.Key != c.wantKey || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("[%s] expected line %d key %q message with %q, got line %d key %q: %.300s",
					c.name, c.wantLine, c.wantKey, c.wantMsg, e.Line, e.Key, err)
			}
			if len(err.Error()) > 400 {
				t.Errorf("[%s] expected a short message, got %d bytes", c.name, len(err.Error()))
			}
			// Before the bound, the 9000-deep array took about 10 s; under
			// -race on a loaded machine the linear walk stays far below 1 s.
			if took > time.Second {
				t.Errorf("[%s] expected the rejection within 1s, took %v", c.name, took)
			}
		})
	}
}

func TestParseAcceptsNestingUpToTheLimit(t *testing.T) {
	// A value exactly tomlpos.MaxDepth deep passes the indexer; the decoder then
	// reports its type, not its depth.
	deep := "[[role]]\nname = \"a\"\ncommand = " + nested("[", "]", tomlpos.MaxDepth) + "\n"
	_, err := Parse([]byte(deep), "herd.toml", "/base")
	var de *tomlpos.DepthError
	if err == nil || errors.As(err, &de) {
		t.Errorf("expected a type error and no depth error at exactly %d levels, got %v", tomlpos.MaxDepth, err)
	}
}

// BenchmarkParseDeepArray measures rejecting the 18 KB file with an array
// nested 9,000 deep. Before the depth bound: about 9.6 s per file (the
// indexer built and regexp-scanned a path as long as the depth for every
// level); after: about 8 ms, nearly all of it go-toml parsing the
// expression before the walk can look at it.
func BenchmarkParseDeepArray(b *testing.B) {
	doc := []byte("[[role]]\nname = \"a\"\ncommand = " + nested("[", "]", 9000) + "\n")
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Parse(doc, "herd.toml", "/base"); err == nil {
			b.Fatal("expected an error")
		}
	}
}
