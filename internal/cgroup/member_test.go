package cgroup

import "testing"

func TestBelow(t *testing.T) {
	cases := []struct{ path, subtree, want string }{
		{"/herd/inc-1", "/herd", "inc-1"},
		{"/herd/inc-1/sub", "/herd", "inc-1"},
		{"/herd", "/herd", ""},
		{"/herdish/inc-1", "/herd", ""},
		{"/user.slice/x/herd/inc-2", "/user.slice/x/herd", "inc-2"},
		{"/other/inc-1", "/herd", ""},
		{"/herd/inc-1", "", ""},
	}
	for _, c := range cases {
		if got := below(c.path, c.subtree); got != c.want {
			t.Errorf("[%s under %s] expected %q, got %q", c.path, c.subtree, c.want, got)
		}
	}
}
