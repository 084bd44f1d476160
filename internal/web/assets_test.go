package web

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestAssetsPutTextOnly: the console's scripts never hand a string to the
// browser's HTML parser or to a JavaScript compiler (what an agent or a
// person wrote goes in as text: textContent, attributes, dataset), and
// its pages hold no inline script, handler or style, which the CSP would
// refuse anyway.
func TestAssetsPutTextOnly(t *testing.T) {
	jsSinks := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
		"createContextualFragment", "DOMParser", "srcdoc", `setTimeout("`, `setInterval("`, "javascript:"}
	inline := regexp.MustCompile(`<script(\s[^>]*)?>[^<]|<script>|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)
	checked := 0
	err := fs.WalkDir(static(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static(), p)
		if err != nil {
			return err
		}
		src := string(b)
		switch path.Ext(p) {
		case ".js":
			checked++
			for _, s := range jsSinks {
				if strings.Contains(src, s) {
					t.Errorf("[%s] expected no %s … it has one", p, s)
				}
			}
		case ".html":
			checked++
			if m := inline.FindString(src); m != "" {
				t.Errorf("[%s] expected no inline script, handler or style … got %q", p, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 8 {
		t.Errorf("[assets] expected the pages and scripts checked … checked %d", checked)
	}
}
