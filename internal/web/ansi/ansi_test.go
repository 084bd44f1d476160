package ansi

import (
	"strings"
	"testing"
)

func TestANSIToHTML(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{`<img src=x onerror="alert(1)">`, "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"},
		{"a & b 'c'", "a &amp; b &#39;c&#39;"},
		{"\x1b[31mred\x1b[0m done", `<span class="fg1">red</span> done`},
		{"\x1b[1;92m<b>\x1b[m", `<span class="fg10 b">&lt;b&gt;</span>`},
		{"\x1b[38;5;4mblue\x1b[38;5;200mpink", `<span class="fg4">blue</span>pink`},
		{"\x1b[38;2;1;2;3mtrue\x1b[39m", "true"},
		{"\x1b[30mblack", `<span class="fg0">black</span>`},
		{"\x1b]0;title\x07after", "after"},
		{"\x1b]8;;http://x\x1b\\link", "link"},
		{"\x1b[2J\x1b[Hclear", "clear"},
		{"a\x1b", "a"},
		{"\x1b[31m\x1b]0;<script>\x07<script>", `<span class="fg1">&lt;script&gt;</span>`},
	} {
		if got := ANSIToHTML(c.in); got != c.want {
			t.Errorf("[%q] expected %q … got %q", c.in, c.want, got)
		}
	}
}

// TestANSIToHTMLNeverMarkup feeds hostile bytes around every escape form:
// no '<' of the agent's may survive unescaped.
func TestANSIToHTMLNeverMarkup(t *testing.T) {
	hostile := []string{"<script>x</script>", `"><img src=x onerror=alert(1)>`, "<svg/onload=alert(1)>", "\x1b[31;<mx", "\x1b[<script>m"}
	for _, h := range hostile {
		for _, pre := range []string{"", "\x1b[1m", "\x1b[", "\x1b]", "\x1b"} {
			out := ANSIToHTML(pre + h)
			stripped := strings.ReplaceAll(strings.ReplaceAll(out, "</span>", ""), "<span class=\"", "")
			if strings.ContainsAny(stripped, "<>") && strings.Contains(stripped, "<") {
				t.Errorf("[%q] expected no markup but spans … got %q", pre+h, out)
			}
		}
	}
}
