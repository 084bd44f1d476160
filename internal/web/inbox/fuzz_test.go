package inbox

import (
	"strings"
	"testing"
)

// FuzzReadDialog: any screen an agent's pane shows (the agent draws it as
// it likes) is read without a panic; a dialog read from it offers only
// options whose key is one digit, 1 to 9 (what an answer types), each
// labelled on one line by its number, and a question of at most a dozen
// lines; a screen with no numbered line has no dialog.
func FuzzReadDialog(f *testing.F) {
	for _, s := range []string{
		" Do you want to proceed?\n ❯ 1. Yes\n   2. Yes, and don't ask again\n   3. No, and tell Claude what to do differently (esc)\n",
		"╭──────────╮\n│ Allow execution of: 'ls'? │\n│ ● 1. Allow once │\n│   2. Allow for this session │\n╰──────────╯\n",
		"────────\n Trust this folder?\n › 1. Yes, continue\n   2. No, quit\n      (wrapped label)\n",
		"1. not marked\n2. either\n", "", "\n\n\n", "❯ 0. zero\n", "│││\n┃ ║ ❯ 9. x ║\n", "❯ 1.\t\xff\xfe label\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, screen string) {
		d, ok := ReadDialog(screen)
		if !ok {
			if len(d.Options) != 0 || d.Text != "" {
				t.Fatalf("no dialog, yet %+v", d)
			}
			return
		}
		if len(d.Options) == 0 {
			t.Fatalf("a dialog without options from %q", screen)
		}
		for _, o := range d.Options {
			if len(o.Key) != 1 || o.Key[0] < '1' || o.Key[0] > '9' {
				t.Fatalf("an option keyed %q from %q", o.Key, screen)
			}
			if !strings.HasPrefix(o.Label, o.Key+". ") || strings.Contains(o.Label, "\n") {
				t.Fatalf("option %s labelled %q from %q", o.Key, o.Label, screen)
			}
			if !strings.Contains(screen, o.Key+".") {
				t.Fatalf("option %s, which the screen never numbered: %q", o.Key, screen)
			}
		}
		if n := strings.Count(d.Text, "\n") + 1; n > 12 {
			t.Fatalf("a question of %d lines from %q", n, screen)
		}
		if len(d.Text) > len(screen) {
			t.Fatalf("a question of %d bytes from a screen of %d", len(d.Text), len(screen))
		}
	})
}
