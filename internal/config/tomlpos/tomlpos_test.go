package tomlpos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIndexPositions(t *testing.T) {
	doc := `top = 1
[probe]
interval = "1s"
[[role]]
name = "a"
restart = { policy = "never",
  max_restarts = 2 }
command = [
  "x",
  "y",
]
[role.restart]
reset_after = "1m"
[[role]]
name = "b"
env.K = "v"
[a.b]
c = 1
`
	pos, err := Index([]byte(doc))
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	want := map[string]int{
		"top":                          1,
		"probe":                        2,
		"probe.interval":               3,
		"role":                         4,
		"role[0]":                      4,
		"role[0].name":                 5,
		"role[0].restart":              6,
		"role[0].restart.policy":       6,
		"role[0].restart.max_restarts": 7,
		"role[0].command":              8,
		"role[0].command[0]":           9,
		"role[0].command[1]":           10,
		"role[0].restart.reset_after":  13,
		"role[1]":                      14,
		"role[1].name":                 15,
		"role[1].env":                  16,
		"role[1].env.K":                16,
		"a.b":                          17,
		"a.b.c":                        18,
	}
	if diff := cmp.Diff(want, pos.lines); diff != "" {
		t.Errorf("expected key lines (-want +got):\n%s", diff)
	}
	// Keys reported by the decoder without array indexes, or by position.
	names := []struct {
		key       string
		line, col int
		want      string
	}{
		{"role.name", 15, 1, "role[1].name"},
		{"role.restart.reset_after", 13, 1, "role[0].restart.reset_after"},
		{"role.max_restarts", 7, 3, "role[0].restart.max_restarts"},
		{"nowhere", 99, 1, "nowhere"},
	}
	for _, n := range names {
		if got := pos.Name(n.key, n.line, n.col); got != n.want {
			t.Errorf("[%s at %d:%d] expected %q, got %q", n.key, n.line, n.col, n.want, got)
		}
	}
}

func TestIndexPositionsSyntaxError(t *testing.T) {
	if _, err := Index([]byte("[probe\n")); err == nil {
		t.Errorf("[unclosed table] expected an error, got none")
	}
}
