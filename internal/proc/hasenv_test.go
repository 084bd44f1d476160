package proc

import (
	"strings"
	"testing"
)

// TestHasEnv: HasEnv and EnvValue read an environment block as Environ does (the
// first key= entry wins, entries without '=' are skipped, a key that only
// prefixes another does not match), without building the map.
func TestHasEnv(t *testing.T) {
	cases := []struct {
		name, block string
		want        bool
	}{
		{"set", "PATH=/bin\x00HERD_INCARNATION=inc-1\x00", true},
		{"last entry without NUL", "PATH=/bin\x00HERD_INCARNATION=inc-1", true},
		{"another value", "HERD_INCARNATION=inc-12\x00", false},
		{"first entry wins", "HERD_INCARNATION=inc-2\x00HERD_INCARNATION=inc-1\x00", false},
		{"a longer key", "HERD_INCARNATION_X=inc-1\x00", false},
		{"a key it ends", "XHERD_INCARNATION=inc-1\x00", false},
		{"not a K=V entry", "HERD_INCARNATION\x00HERD_INCARNATION=inc-1\x00", true},
		{"empty", "", false},
		{"a block larger than the read buffer", strings.Repeat("PAD=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\x00", 1000) + "HERD_INCARNATION=inc-1\x00", true},
	}
	f := newFakeProc(t)
	for i, c := range cases {
		pid := 100 + i
		f.file(pid, "environ", c.block)
		got, err := f.fs().HasEnv(pid, "HERD_INCARNATION", "inc-1")
		if err != nil || got != c.want {
			t.Errorf("[%s] expected %v, got %v (%v)", c.name, c.want, got, err)
		}
		env, _ := f.fs().Environ(pid)
		if (env["HERD_INCARNATION"] == "inc-1") != c.want {
			t.Errorf("[%s] expected HasEnv to agree with Environ (%q)", c.name, env["HERD_INCARNATION"])
		}
		v, set, err := f.fs().EnvValue(pid, "HERD_INCARNATION")
		wantV, wantSet := env["HERD_INCARNATION"]
		if err != nil || v != wantV || set != wantSet {
			t.Errorf("[%s] expected EnvValue %q %v as Environ reads it, got %q %v (%v)", c.name, wantV, wantSet, v, set, err)
		}
	}
	if _, err := f.fs().HasEnv(999, "HERD_INCARNATION", "inc-1"); err == nil {
		t.Errorf("[no process] expected an error")
	}
	if _, _, err := f.fs().EnvValue(999, "HERD_INCARNATION"); err == nil {
		t.Errorf("[no process, EnvValue] expected an error")
	}
}
