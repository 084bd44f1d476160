package yamlenc

import (
	"testing"
	"time"
)

func TestMarshal(t *testing.T) {
	type child struct {
		PID  int    `json:"pid"`
		Comm string `json:"comm"`
	}
	type obj struct {
		Name     string            `json:"name"`
		Code     *int              `json:"code"`
		Attached bool              `json:"attached"`
		At       time.Time         `json:"at"`
		Argv     []string          `json:"argv"`
		Env      map[string]string `json:"env"`
		Kids     []child           `json:"kids"`
		Text     string            `json:"text"`
	}
	at := time.Date(2026, 11, 22, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"empty list", []int{}, "[]\n"},
		{"nil list", []int(nil), "null\n"},
		{"empty map", map[string]int{}, "{}\n"},
		{"scalar", "worker-0", "worker-0\n"},
		{"reserved word quoted", "yes", "\"yes\"\n"},
		{"number-like quoted", "007", "\"007\"\n"},
		{"object", obj{
			Name: "worker-0", At: at, Argv: []string{"claude", "--resume", "a b"},
			Env: map[string]string{"B": "2", "A": "x: y"}, Kids: []child{{PID: 7, Comm: "git"}},
			Text: "line\nnext",
		}, `argv:
- claude
- "--resume"
- "a b"
at: "2026-11-22T15:04:05Z"
attached: false
code: null
env:
  A: "x: y"
  B: "2"
kids:
- comm: git
  pid: 7
name: worker-0
text: "line\nnext"
`},
		{"list of objects", []map[string]any{{"name": "a", "n": 1, "sub": map[string]any{"k": true}}, {}}, `- "n": 1
  name: a
  sub:
    k: true
- {}
`},
		{"nested lists", [][]int{{1, 2}, {}}, `-
  - 1
  - 2
- []
`},
	} {
		got, err := Marshal(tc.in)
		if err != nil {
			t.Errorf("[%s] expected no error, got %v", tc.name, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("[%s] expected\n%s\ngot\n%s", tc.name, tc.want, got)
		}
	}
}

func TestMarshalError(t *testing.T) {
	if _, err := Marshal(func() {}); err == nil {
		t.Errorf("expected an error for a value JSON cannot encode")
	}
}
