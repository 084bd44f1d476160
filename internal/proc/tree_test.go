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

		// Tree: the root, then its descendants as Descendants orders
		// them, each with its parent and command name.
		tree, err := fs.Tree(10)
		want, _ := fs.Descendants(10)
		want = append([]int{10}, want...)
		var got []int
		for _, n := range tree {
			got = append(got, n.PID)
			if st, _ := fs.Stat(n.PID); n.PPID != st.PPID || n.Comm != st.Comm {
				t.Errorf("[%s] tree node %+v, stat %+v", name, n, st)
			}
		}
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("[%s] tree of 10 (-want +got):\n%s%v", name, diff, err)
		}
		if _, err := fs.Tree(77); !isNoProcess(err) {
			t.Errorf("[%s] expected ErrNoProcess from Tree on an absent root, got %v", name, err)
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

func TestTreeReal(t *testing.T) {
	fs := Real()
	cmd, _ := startCmd(t, "", false, "sh", "-c", "sleep 30; exec sleep 31")
	sh := cmd.Process.Pid

	var tree []Node
	waitFor(t, "sleep under sh", func() bool {
		var err error
		tree, err = fs.Tree(sh)
		if err != nil {
			t.Fatalf("tree: %v", err)
		}
		return len(tree) == 2 && tree[1].Comm == "sleep"
	})
	if tree[0].PID != sh || tree[0].Comm != "sh" || tree[1].PPID != sh || !slices.Equal(tree[1].Argv, []string{"sleep", "30"}) || tree[1].Exe == "" {
		t.Errorf("expected sh and its sleep child, got %+v", tree)
	}
	kids, err := fs.Children(sh)
	if err != nil || !slices.Equal(kids, []int{tree[1].PID}) {
		t.Errorf("expected children [%d], got %v, %v", tree[1].PID, kids, err)
	}
}
