package diag

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fproc describes one process of a fixture /proc tree.
type fproc struct {
	pid, ppid    int
	comm         string
	state        string // stat letter
	status       string // "State:" value of status; "" writes no status file
	utime, stime uint64
	cutime       uint64
	threads      int
	rssPages     int
	start        uint64
	fds          []string // fd link targets, fd numbers assigned from 0
	wchan        string
	children     []int // written to task/<pid>/children when non-nil
}

// writeProc writes p's stat, status, wchan and fd links under root.
func writeProc(t *testing.T, root string, p fproc) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(p.pid))
	mustMkdir(t, filepath.Join(dir, "fd"))
	if p.state == "" {
		p.state = "S"
	}
	if p.threads == 0 {
		p.threads = 1
	}
	// Fields after comm: state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime vsize rss rsslim, then 29 more numbers.
	stat := fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194304 100 0 0 0 %d %d %d 0 20 0 %d 0 %d 1000000 %d 18446744073709551615%s\n",
		p.pid, p.comm, p.state, p.ppid, p.pid, p.pid, p.utime, p.stime, p.cutime, p.threads, p.start, p.rssPages,
		strings.Repeat(" 0", 29))
	mustWrite(t, filepath.Join(dir, "stat"), stat)
	if p.status != "" {
		mustWrite(t, filepath.Join(dir, "status"), fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%s\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\n",
			p.comm, p.status, p.pid, p.pid, p.ppid))
	}
	mustWrite(t, filepath.Join(dir, "wchan"), p.wchan)
	for i, target := range p.fds {
		if err := os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if p.children != nil {
		task := filepath.Join(dir, "task", strconv.Itoa(p.pid))
		mustMkdir(t, task)
		var b strings.Builder
		for _, c := range p.children {
			fmt.Fprintf(&b, "%d ", c)
		}
		mustWrite(t, filepath.Join(task, "children"), b.String())
	}
}

const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

// tcpRow is one row of /proc/net/tcp with state st (hex) and inode ino.
func tcpRow(sl int, st string, ino uint64) string {
	return fmt.Sprintf("%4d: 0100007F:1F90 0100007F:C350 %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 20 4 30 10 -1\n", sl, st, ino)
}

// tcp6Row is one row of /proc/net/tcp6 with state st (hex) and inode ino.
func tcp6Row(sl int, st string, ino uint64) string {
	return fmt.Sprintf("%4d: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C350 %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 20 4 30 10 -1\n", sl, st, ino)
}

// writeNet writes the net/tcp and net/tcp6 tables seen by pid.
func writeNet(t *testing.T, root string, pid int, tcp, tcp6 []string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid), "net")
	mustMkdir(t, dir)
	mustWrite(t, filepath.Join(dir, "tcp"), tcpHeader+strings.Join(tcp, ""))
	mustWrite(t, filepath.Join(dir, "tcp6"), tcpHeader+strings.Join(tcp6, ""))
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// busyNamespace is a namespace table full of other processes' ESTABLISHED sockets.
func busyNamespace() []string {
	var rows []string
	for i := range 20 {
		rows = append(rows, tcpRow(i, "01", uint64(90000+i)))
	}
	return rows
}

func TestFixtureTCPEstablished(t *testing.T) {
	tests := []struct {
		name    string
		procs   []fproc
		tcp     []string
		tcp6    []string
		collect int
		want    int
	}{
		{
			name: "child without tcp sockets in a busy namespace counts zero",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"socket:[90001]"}},
				{pid: 11, ppid: 10, comm: "child", fds: []string{"/dev/null", "pipe:[5]", "anon_inode:[eventfd]", "socket:[70000]"}}, // a unix socket
			},
			tcp:     busyNamespace(),
			collect: 11,
			want:    0,
		},
		{
			name: "own socket counted once even when duplicated",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"/dev/null", "socket:[500]", "socket:[500]"}},
				{pid: 11, ppid: 10, comm: "child", fds: []string{"socket:[500]"}},
			},
			tcp:     append(busyNamespace(), tcpRow(99, "01", 500)),
			collect: 10,
			want:    1,
		},
		{
			name: "listening socket not counted",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"socket:[600]"}},
			},
			tcp:     append(busyNamespace(), tcpRow(99, "0A", 600)),
			collect: 10,
			want:    0,
		},
		{
			name: "tcp6 counted",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"socket:[700]", "socket:[701]"}},
			},
			tcp:     append(busyNamespace(), tcpRow(99, "01", 700)),
			tcp6:    []string{tcp6Row(0, "01", 701), tcp6Row(1, "01", 90005)},
			collect: 10,
			want:    2,
		},
		{
			name: "socket of a grandchild counted for the tree",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"/dev/null"}},
				{pid: 11, ppid: 10, comm: "sh"},
				{pid: 12, ppid: 11, comm: "curl", fds: []string{"socket:[800]"}},
				{pid: 13, ppid: 1, comm: "stranger", fds: []string{"socket:[801]"}},
			},
			tcp:     []string{tcpRow(0, "01", 800), tcpRow(1, "01", 801)},
			collect: 10,
			want:    1,
		},
		{
			name: "socket of a child found through the children file",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", children: []int{11}},
				{pid: 11, ppid: 10, comm: "curl", fds: []string{"socket:[850]"}, children: []int{}},
			},
			tcp:     []string{tcpRow(0, "01", 850)},
			collect: 10,
			want:    1,
		},
		{
			name: "garbled lines skipped",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"socket:[900]", "socket:[901]"}},
			},
			tcp: []string{
				"garbage\n",
				"   0: 0100007F:1F90 0100007F:C350 ZZ 00000000:00000000 00:00000000 00000000 1000 0 900 1\n",
				"   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 1000 0 notanumber 1\n",
				"   2: 0100007F:1F90\n",
				"\n",
				tcpRow(3, "01", 901),
			},
			collect: 10,
			want:    1,
		},
		{
			name: "socket missing from the tables",
			procs: []fproc{
				{pid: 10, ppid: 1, comm: "agent", fds: []string{"socket:[1000]"}},
			},
			tcp:     busyNamespace(),
			collect: 10,
			want:    0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range tt.procs {
				writeProc(t, root, p)
			}
			writeNet(t, root, tt.collect, tt.tcp, tt.tcp6)
			d, err := Collector{Root: root}.Collect(tt.collect, nil, time.Now())
			if err != nil {
				t.Fatalf("[%s] expected no error, got %v", tt.name, err)
			}
			if d.TCPEstablished != tt.want {
				t.Errorf("[%s] expected tcp_established %d, got %d", tt.name, tt.want, d.TCPEstablished)
			}
		})
	}
}

func TestFixtureTreeAggregates(t *testing.T) {
	root := t.TempDir()
	procs := []fproc{
		{pid: 10, ppid: 1, comm: "agent", status: "S (sleeping)", utime: 150, stime: 50, cutime: 100,
			threads: 4, rssPages: 100, start: 4242, wchan: "do_epoll_wait",
			fds: []string{"/dev/null", "pipe:[1]", "socket:[77]"}},
		{pid: 12, ppid: 10, comm: "node worker", state: "R", utime: 10, threads: 2, rssPages: 50, fds: []string{"/dev/null"}},
		{pid: 11, ppid: 10, comm: "sh", utime: 5, rssPages: 10},
		{pid: 13, ppid: 11, comm: "grep", utime: 5, rssPages: 10, fds: []string{"a", "b"}},
		{pid: 20, ppid: 1, comm: "stranger", utime: 100000, threads: 50, rssPages: 100000, fds: []string{"x"}},
	}
	for _, p := range procs {
		writeProc(t, root, p)
	}
	writeNet(t, root, 10, []string{tcpRow(0, "01", 77)}, nil)
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

	got, err := Collector{Root: root}.Collect(10, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	want := Diagnostics{
		SampledAt:      now,
		ProcState:      "S (sleeping)",
		CPUSeconds:     3.2,
		RSSBytes:       170 * page,
		Threads:        8,
		FDs:            6,
		TCPEstablished: 1,
		Children:       []Child{{PID: 11, Comm: "sh"}, {PID: 12, Comm: "node worker"}},
		WChan:          "do_epoll_wait",
		PID:            10,
		StartTime:      4242,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[tree aggregates] expected … got … (-want +got):\n%s", diff)
	}

	// A leaf without a status file falls back to the stat letter, and has no children.
	leaf, err := Collector{Root: root}.Collect(12, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.ProcState != "R (running)" || len(leaf.Children) != 0 || leaf.Children == nil || leaf.WChan != "" {
		t.Errorf("[leaf] expected state R (running), empty non-nil children, no wchan, got %q %#v %q",
			leaf.ProcState, leaf.Children, leaf.WChan)
	}

	// A second sample of the same process computes the delta.
	next := now.Add(2 * time.Second)
	mustWrite(t, filepath.Join(root, "10", "stat"), strings.Replace(readFile(t, filepath.Join(root, "10", "stat")), " 150 50 100 ", " 250 50 100 ", 1))
	got2, err := Collector{Root: root}.Collect(10, &got, next)
	if err != nil {
		t.Fatal(err)
	}
	if got2.CPUDelta == nil || !near(*got2.CPUDelta, 1.0) || got2.CPUPercent == nil || !near(*got2.CPUPercent, 50) {
		t.Errorf("[second sample] expected delta 1.0 s and 50%%, got %v %v", fmtPtr(got2.CPUDelta), fmtPtr(got2.CPUPercent))
	}
	if p := CPUProgress(got2); p != ProgressYes {
		t.Errorf("[second sample] expected progress %q, got %q", ProgressYes, p)
	}
}

func TestFixtureCollectErrors(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, fproc{pid: 10, ppid: 1, comm: "agent"})
	mustMkdir(t, filepath.Join(root, "30"))
	mustWrite(t, filepath.Join(root, "30", "stat"), "30 no parens here")
	mustMkdir(t, filepath.Join(root, "31"))
	mustWrite(t, filepath.Join(root, "31", "stat"), "31 (short) S 1")
	writeProc(t, root, fproc{pid: 32, ppid: 1, comm: "agent", fds: []string{"socket:[5]"}})
	mustWrite(t, filepath.Join(root, "32", "net"), "not a directory")

	tests := []struct {
		name string
		root string
		pid  int
	}{
		{"pid zero", root, 0},
		{"negative pid", root, -5},
		{"missing pid", root, 99},
		{"stat without comm", root, 30},
		{"truncated stat", root, 31},
		{"missing root", filepath.Join(root, "nope"), 10},
		{"net not a directory", root, 32},
	}
	for _, tt := range tests {
		_, err := Collector{Root: tt.root}.Collect(tt.pid, nil, time.Now())
		if err == nil || !strings.HasPrefix(err.Error(), "diag: ") {
			t.Errorf("[%s] expected a diag: error, got %v", tt.name, err)
		}
	}

	// Missing net tables are not an error: the kernel may lack IPv6, or the
	// tree may hold no sockets at all.
	d, err := Collector{Root: root}.Collect(10, nil, time.Now())
	if err != nil || d.TCPEstablished != 0 {
		t.Errorf("[no net tables] expected 0 and no error, got %d %v", d.TCPEstablished, err)
	}
	// Unparseable siblings in the scan are skipped, not fatal.
	writeProc(t, root, fproc{pid: 33, ppid: 10, comm: "kid"})
	d, err = Collector{Root: root}.Collect(10, nil, time.Now())
	if err != nil || len(d.Children) != 1 || d.Children[0].PID != 33 {
		t.Errorf("[garbled siblings] expected child 33 and no error, got %+v %v", d.Children, err)
	}
}

func TestFixtureParentCycle(t *testing.T) {
	root := t.TempDir()
	// Impossible on a real kernel, but a corrupt tree must not loop forever.
	writeProc(t, root, fproc{pid: 10, ppid: 11, comm: "a"})
	writeProc(t, root, fproc{pid: 11, ppid: 10, comm: "b"})
	d, err := Collector{Root: root}.Collect(10, nil, time.Now())
	if err != nil || len(d.Children) != 1 || d.Threads != 2 {
		t.Errorf("[cycle] expected one child and two threads, got %+v threads=%d err=%v", d.Children, d.Threads, err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func fmtPtr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}

func TestFixtureProcState(t *testing.T) {
	tests := []struct {
		name   string
		letter string
		status string
		want   string
	}{
		{"known letter", "D", "", "D (disk sleep)"},
		{"known letter ignores status", "Z", "Z (zombie)", "Z (zombie)"},
		{"unknown letter worded by status", "K", "K (wakekill)", "K (wakekill)"},
		{"unknown letter without status", "K", "", "K"},
	}
	for _, tt := range tests {
		root := t.TempDir()
		writeProc(t, root, fproc{pid: 10, ppid: 1, comm: "agent", state: tt.letter, status: tt.status})
		d, err := Collector{Root: root}.Collect(10, nil, time.Now())
		if err != nil || d.ProcState != tt.want {
			t.Errorf("[%s] expected %q, got %q (err %v)", tt.name, tt.want, d.ProcState, err)
		}
	}
}
