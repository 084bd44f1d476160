package sqltx

import "testing"

func TestBind(t *testing.T) {
	cases := []struct {
		name     string
		numbered bool
		query    string
		want     string
	}{
		{"question marks kept", false, "SELECT a FROM t WHERE a = ? AND b = ?", "SELECT a FROM t WHERE a = ? AND b = ?"},
		{"numbered", true, "SELECT a FROM t WHERE a = ? AND b = ?", "SELECT a FROM t WHERE a = $1 AND b = $2"},
		{"no parameter", true, "SELECT 1", "SELECT 1"},
		{"ten and more", true, "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"},
		{"non-ASCII kept", true, "SELECT 'é' WHERE x = ?", "SELECT 'é' WHERE x = $1"},
	}
	for _, c := range cases {
		tx := &tx{d: Dialect{Numbered: c.numbered}}
		if got := tx.bind(c.query); got != c.want {
			t.Errorf("[%s] expected %q, got %q", c.name, c.want, got)
		}
	}
}

func TestText(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"plain", "hello", "hello"},
		{"utf-8", "héllo ✓", "héllo ✓"},
		{"nul", "a\x00b", "a\uFFFDb"},
		{"invalid byte", "a\xffb", "a\uFFFDb"},
		{"truncated sequence at the end", "ok\xe2\x82", "ok\uFFFD"},
		{"empty", "", ""},
	}
	for _, c := range cases {
		if got := Text(c.in); got != c.want {
			t.Errorf("[%s] expected %q, got %q", c.name, c.want, got)
		}
	}
}
