package ansi

import (
	"regexp"
	"strings"
	"testing"
)

// span is the only markup ANSIToHTML may write.
var span = regexp.MustCompile(`<span class="[a-z0-9 -]*">|</span>`)

// FuzzANSIToHTML: whatever bytes an agent prints, the HTML has no markup
// but spans of classes, and every span opened is closed.
func FuzzANSIToHTML(f *testing.F) {
	for _, s := range []string{"\x1b[31mred\x1b[0m", "<script>x</script>", "\x1b[31;<mx", "\x1b]8;;javascript:alert(1)\x07x\x1b]8;;\x07",
		"\x1b]52;c;aGk=\x07", "\xff\xfe\x1b[1m", "\x1b[38;2;1;2;3m&amp;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := ANSIToHTML(in)
		rest := span.ReplaceAllString(out, "")
		if strings.ContainsAny(rest, "<>\"") {
			t.Fatalf("markup beyond spans in %q: %q", in, out)
		}
		if strings.Count(out, "<span") != strings.Count(out, "</span>") {
			t.Fatalf("unbalanced spans for %q: %q", in, out)
		}
	})
}
