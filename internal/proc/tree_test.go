package proc

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tree builds the fixture
//
//	1 ─┬─ 10 ─┬─ 30 ── 50
//	   │      └─ 20
//	   └─ 5 ── 40
//
// with children files when withChildren, else stat files only.
func tree(t *testing.T, withChildren bool) fakeProc {
	f := newFakeProc(t)
	procs := []fakeStat{
		{pid: 1, comm: "init"},
		{pid: 5, ppid: 1, comm: "bash"},
		{pid: 10, ppid: 1, comm: "sh"},
		{pid: 20, ppid: 10, comm: "node", argv: "/opt/bin/codex\x00--yolo\x00"},
		{pid: 30, ppid: 10, comm: "a-very-long-age", argv: "node\x00"},
		{pid: 40, ppid: 5, comm: "claude"},
		{pid: 50, ppid: 30, comm: "claude"},
	}
	for _, p := range procs {
		f.proc(p)
	}
	f.file(99, "stat", "garbled") // skipped by scans
	f.file(0, "stat", "")         // not a process
	if withChildren {
		f.file(1, "task/1/children", "10 5 ")
		f.file(5, "task/5/children", "40 ")
		f.file(10, "task/10/children", "30 ")
		f.file(10, "task/11/children", "20 ") // a second thread's child
		f.file(20, "task/20/children", "")
		f.file(30, "task/30/children", "50 ")
		f.file(40, "task/40/children", "")
		f.file(50, "task/50/children", "")
	}
	return f
}

func TestTreeFixture(t *testing.T) {
	for _, withChildren := range []bool{true, false} {
		name := map[bool]string{true: "children files", false: "stat scan"}[withChildren]
		fs := tree(t, withChildren).fs()

		kids, err := fs.Children(10)
		if err != nil || !slices.Equal(kids, []int{20, 30}) {
			t.Errorf("[%s] expected children [20 30], got %v, %v", name, kids, err)
		}
		kids, err = fs.Children(50)
		if err != nil || len(kids) != 0 {
			t.Errorf("[%s] expected no children of a leaf, got %v, %v", name, kids, err)
		}
		desc, err := fs.Descendants(1)
		if diff := cmp.Diff([]int{5, 10, 40, 20, 30, 50}, desc); err != nil || diff != "" {
			t.Errorf("[%s] descendants breadth-first (-want +got):\n%s%v", name, diff, err)
		}
		if _, err := fs.Children(77); !isNoProcess(err) {
			t.Errorf("[%s] expected ErrNoProcess for an absent pid, got %v", name, err)
		}
		if _, err := fs.Descendants(77); !isNoProcess(err) {
			t.Errorf("[%s] expected ErrNoProcess for an absent pid, got %v", name, err)
		}

		cases := []struct {
			root  int
			names []string
			want  int
		}{
			{1, []string{"claude"}, 40},             // breadth-first: 40 is shallower than 50
			{10, []string{"claude"}, 50},            // under the wrapper only
			{10, []string{"codex"}, 20},             // argv[0] basename
			{10, []string{"sh"}, 10},                // root itself
			{10, []string{"a-very-long-agent"}, 30}, // comm truncated to 15 bytes
			{10, []string{"", "gemini"}, 0},
			{10, nil, 0},
		}
		for _, c := range cases {
			pid, found, err := fs.FindAgent(c.root, c.names)
			if err != nil || found != (c.want != 0) || pid != c.want {
				t.Errorf("[%s] FindAgent(%d, %q): expected %d, got %d found=%v err=%v", name, c.root, c.names, c.want, pid, found, err)
			}
		}
		if _, _, err := fs.FindAgent(77, []string{"claude"}); !isNoProcess(err) {
			t.Errorf("[%s] expected ErrNoProcess from FindAgent on an absent root, got %v", name, err)
		}
	}

	if _, err := (FS{Root: filepath.Join(t.TempDir(), "missing")}).Children(1); err == nil || isNoProcess(err) {
		t.Errorf("[no root] expected an error other than ErrNoProcess, got %v", err)
	}
}

func TestDescendantsCycle(t *testing.T) {
	f := newFakeProc(t)
	f.proc(fakeStat{pid: 2, ppid: 3, comm: "a"})
	f.proc(fakeStat{pid: 3, ppid: 2, comm: "b"})
	f.file(2, "task/2/children", "3")
	f.file(3, "task/3/children", "2")
	desc, err := f.fs().Descendants(2)
	if err != nil || !slices.Equal(desc, []int{3}) {
		t.Errorf("expected [3], got %v, %v", desc, err)
	}
}

func TestFindAgentReal(t *testing.T) {
	fs := Real()
	cmd, _ := startCmd(t, "", false, "sh", "-c", "sleep 30; exec sleep 31")
	sh := cmd.Process.Pid

	var agent int
	waitFor(t, "sleep under sh", func() bool {
		pid, found, err := fs.FindAgent(sh, []string{"sleep"})
		if err != nil {
			t.Fatalf("find agent: %v", err)
		}
		agent = pid
		return found
	})
	if agent == sh {
		t.Fatalf("expected the sleep child, got the shell itself (%d)", sh)
	}
	st, err := fs.Stat(agent)
	if err != nil || st.PPID != sh || st.Comm != "sleep" {
		t.Errorf("expected a sleep child of %d, got %+v, %v", sh, st, err)
	}
	kids, err := fs.Children(sh)
	if err != nil || !slices.Equal(kids, []int{agent}) {
		t.Errorf("expected children [%d], got %v, %v", agent, kids, err)
	}
	if pid, found, err := fs.FindAgent(sh, []string{"sh"}); err != nil || !found || pid != sh {
		t.Errorf("expected the shell itself, got %d found=%v err=%v", pid, found, err)
	}
	if _, found, err := fs.FindAgent(sh, []string{"claude"}); err != nil || found {
		t.Errorf("expected no claude, got found=%v err=%v", found, err)
	}
}
