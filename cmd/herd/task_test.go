package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
	"herd/internal/tasks"
)

// runHerd runs the command tree in process with stdin, against the
// daemon of dir (none: a command that needs one fails, never starts one).
func runHerd(t *testing.T, dir string, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv(envNoAutostart, "1")
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetArgs(append([]string{"--state-dir", dir}, args...))
	root.SetIn(stdin)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestTaskArgErrors: what is wrong with a command line is said before
// any daemon is asked.
func TestTaskArgErrors(t *testing.T) {
	dir := t.TempDir()
	bigPrompt := strings.Repeat("x", herd.MaxTaskPrompt+1)
	bigComment := strings.Repeat("x", tasks.MaxComment+1)
	for _, x := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"task", "add"}, "", "task add: want ROLE and PROMPT (or - to read the prompt from stdin)"},
		{[]string{"task", "add", "worker"}, "", "task add: missing PROMPT after ROLE worker"},
		{[]string{"task", "add", "Worker!", "fix it"}, "", `task add: "Worker!" is not a role name`},
		{[]string{"task", "add", "worker", "fix", "it"}, "", "want one PROMPT argument after ROLE, got 2 (quote the prompt)"},
		{[]string{"task", "add", "worker", " "}, "", "task add: the prompt is empty"},
		{[]string{"task", "add", "worker", "-"}, "\n", "task add: the prompt is empty"},
		{[]string{"task", "add", "worker", "-"}, bigPrompt, "task add: the prompt on stdin is over the 1048576-byte limit"},
		{[]string{"task", "add", "--check", " ", "worker", "x"}, "", "task add: --check: the command is empty"},
		{[]string{"get", "tasks", "--state", "reviewing"}, "", `get tasks: --state: "reviewing" is not a task state (want queued, assigned,`},
		{[]string{"get", "tasks", "--state", "review,landed", "--state", "done"}, "", `"done" is not a task state`},
		{[]string{"get", "tasks", "--role", "a/b"}, "", `get tasks: --role: "a/b" is not a role name`},
		{[]string{"get", "tasks", "-o", "table"}, "", `get tasks: unknown output format "table"`},
		{[]string{"get", "tasks", "t-1", "w-0"}, "", `get tasks: "w-0" is not a task id (want t-<n>, e.g. t-3)`},
		{[]string{"describe", "task", "t-0"}, "", `describe task: "t-0" is not a task id`},
		{[]string{"describe", "task"}, "", "describe task: want one task ID (e.g. t-3), got 0 arguments"},
		{[]string{"task", "cancel"}, "", "task cancel: want one task ID"},
		{[]string{"task", "approve", "t-3", "t-4"}, "", "task approve: want one task ID (e.g. t-3), got 2 arguments"},
		{[]string{"task", "retry", "../v1/roles"}, "", `task retry: "../v1/roles" is not a task id`},
		{[]string{"task", "diff", "3"}, "", `task diff: "3" is not a task id`},
		{[]string{"task", "comment", "t-3"}, "", "task comment: want ID and TEXT"},
		{[]string{"task", "comment", "t-x", "hi"}, "", `task comment: "t-x" is not a task id`},
		{[]string{"task", "comment", "t-3", ""}, "", "task comment: the text is empty"},
		{[]string{"task", "comment", "t-3", "-"}, bigComment, "task comment: the text on stdin is over the 65536-byte limit"},
		{[]string{"task", "comment", "t-3", bigComment}, "", "task comment: the text is 65537 bytes, limit 65536"},
	} {
		out, errOut, err := runHerd(t, dir, strings.NewReader(x.stdin), x.args...)
		name := strings.Join(x.args, " ")
		if len(name) > 60 {
			name = name[:60] + "..."
		}
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("[%s] expected error %q … got %v", name, x.want, err)
		}
		if err != nil && strings.Contains(err.Error(), "no herd daemon") {
			t.Errorf("[%s] expected refused before asking a daemon … got %v", name, err)
		}
		if out != "" || errOut != "" {
			t.Errorf("[%s] expected no output … got %q %q", name, out, errOut)
		}
	}
}

// TestTaskHelp: `herd task` alone lists its subcommands.
func TestTaskHelp(t *testing.T) {
	out, _, err := runHerd(t, t.TempDir(), nil, "task")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"add", "approve", "cancel", "comment", "diff", "retry"} {
		if !strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("expected %q listed … got %q", sub, out)
		}
	}
}

// fakeDaemon answers the socket of a state directory with h; it returns
// the directory.
func fakeDaemon(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "herd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return dir
}

// TestTaskCommands: each command sends its request and prints what the
// daemon answered, as a person reads it.
func TestTaskCommands(t *testing.T) {
	var (
		mu    sync.Mutex
		asked []string
	)
	dir := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		switch {
		case r.URL.Path == "/v1/tasks" && r.Method == "POST":
			io.WriteString(w, `{"id":"t-3","state":"queued"}`)
		case r.URL.Path == "/v1/tasks":
			json.NewEncoder(w).Encode([]herd.Task{{ID: "t-1", Role: "worker", State: herd.TaskReview, Title: "one"},
				{ID: "t-2", Role: "worker", State: herd.TaskNeedsYou, Title: "two"}})
		case r.URL.Path == "/v1/tasks/t-3/approve":
			io.WriteString(w, `{"id":"t-3","state":"landed"}`)
		case r.URL.Path == "/v1/tasks/t-3/comment":
			io.WriteString(w, `{"id":"t-3","state":"changes","reason":"changes_requested"}`)
		case r.URL.Path == "/v1/tasks/t-3/diff":
			io.WriteString(w, `{"task":"t-3","base":"main","branch":"herd/t-3","diff":"+a\u001b[2J\n","truncated":true}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"task not found"}`)
		}
	})
	cwd, _ := os.Getwd()
	for _, x := range []struct {
		args             []string
		stdin            string
		wantOut, wantErr string
		wantAsked        string
	}{
		{[]string{"task", "add", "worker", "--repo", "sub", "--check", " go  test ./... ", "--base", "main", "-"}, "fix it\n", "t-3\n", "",
			`POST /v1/tasks {"role":"worker","repo":"` + filepath.Join(cwd, "sub") + `","base":"main","check":["go","test","./..."],"prompt":"fix it"}`},
		{[]string{"task", "add", "worker", "--", "-v: document it"}, "", "t-3\n", "", `POST /v1/tasks {"role":"worker","prompt":"-v: document it"}`},
		{[]string{"get", "tasks", "--state", "review", "--state", "needs_you", "--role", "worker", "t-2", "--no-headers"}, "", "", "",
			"GET /v1/tasks?role=worker&state=review%2Cneeds_you "},
		{[]string{"task", "approve", "t-3"}, "", "task t-3 is now landed\n", "", "POST /v1/tasks/t-3/approve {}"},
		{[]string{"task", "comment", "t-3", "-"}, "use a mutex\n", "task t-3 is now changes (changes_requested)\n", "",
			`POST /v1/tasks/t-3/comment {"text":"use a mutex"}`},
		{[]string{"task", "diff", "t-3"}, "", "+a\x1b[2J\n", "(the diff is cut at 7 bytes; see it whole with git diff main...herd/t-3 in the task's repository)\n",
			"GET /v1/tasks/t-3/diff "},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		out, errOut, err := runHerd(t, dir, strings.NewReader(x.stdin), x.args...)
		name := strings.Join(x.args, " ")
		if err != nil {
			t.Errorf("[%s] %v", name, err)
			continue
		}
		if x.wantOut != "" && out != x.wantOut {
			t.Errorf("[%s] expected stdout %q … got %q", name, x.wantOut, out)
		}
		if errOut != x.wantErr {
			t.Errorf("[%s] expected stderr %q … got %q", name, x.wantErr, errOut)
		}
		mu.Lock()
		if len(asked) != 1 || asked[0] != x.wantAsked {
			t.Errorf("[%s] expected the daemon asked %q … got %q", name, x.wantAsked, asked)
		}
		mu.Unlock()
		if strings.HasPrefix(name, "get tasks") && (!strings.HasPrefix(out, "t-2 ") || strings.Contains(out, "t-1")) {
			t.Errorf("[%s] expected the row of t-2 alone … got %q", name, out)
		}
	}
	_, _, err := runHerd(t, dir, nil, "task", "cancel", "t-9")
	if err == nil || err.Error() != "task t-9 not found" {
		t.Errorf("[not found] expected 'task t-9 not found' … got %v", err)
	}
}

func TestEscapeText(t *testing.T) {
	for _, x := range []struct{ in, keep, want string }{
		{"plain title, ünïcode ✓", "", "plain title, ünïcode ✓"},
		{"\x1b[31mred\x1b[0m", "", `\x1b[31mred\x1b[0m`},
		{"a\tb\r\nc", "", `a\tb\r\nc`},
		{"a\tb\r\nc", "\n\t", "a\tb\\r\nc"},
		{"bell\x07 del\x7f c1\u009b", "", `bell\x07 del\x7f c1\u009b`},
		{"evil\u202eexe.txt", "", `evil\u202eexe.txt`},
		{"bad \xff\xfe utf-8", "", `bad \xff\xfe utf-8`},
		{"", "", ""},
	} {
		if got := escapeText(x.in, x.keep); got != x.want {
			t.Errorf("[%q keep %q] expected %q … got %q", x.in, x.keep, x.want, got)
		}
	}
}

// TestPrintTasks: the table has its columns, and a title (or any text
// cell) with bytes a terminal acts on reaches it escaped, its columns
// intact.
func TestPrintTasks(t *testing.T) {
	now := time.Now()
	list := []herd.Task{
		{ID: "t-1", Role: "worker", State: herd.TaskReview, Session: "worker-0", Commits: 2, CreatedAt: now.Add(-90 * time.Second),
			Title:  "\xff\u202e\x1b]0;pwned\x07tab\there\r\n" + strings.Repeat("long ", 20),
			Branch: "herd/t-1", Base: "main", Reason: "check\x1b[31m failed", Repo: "/src/a\tpp"},
		{ID: "t-2", Role: "worker", State: herd.TaskQueued, Prompt: "first line of the prompt\nsecond"},
	}
	var b bytes.Buffer
	if err := printTasks(&b, list, printOpts{wide: true, now: now}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == 0xfffd) {
			t.Fatalf("expected no control byte but line ends … got %q in %q", r, out)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("expected a header and 2 rows … got %q", out)
	}
	if diff := cmp.Diff([]string{"ID", "ROLE", "STATE", "SESSION", "COMMITS", "AGE", "TITLE", "BRANCH", "BASE", "REASON", "REPO"}, strings.Fields(lines[0])); diff != "" {
		t.Errorf("[header] (-want +got):\n%s", diff)
	}
	row := strings.Fields(lines[1])
	if diff := cmp.Diff([]string{"t-1", "worker", "review", "worker-0", "2", "1m30s"}, row[:6]); diff != "" {
		t.Errorf("[row 1] (-want +got):\n%s", diff)
	}
	for _, want := range []string{`\xff\u202e\x1b]0;pwned\x07tab\there\r\nlong`, "...", `check\x1b[31m`, `/src/a\tpp`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("[row 1] expected %q … got %q", want, lines[1])
		}
	}
	if !strings.Contains(lines[2], "first line of the prompt") || strings.Contains(lines[2], "second") {
		t.Errorf("[row 2] expected the prompt's first line as its title … got %q", lines[2])
	}
}

// TestPrintTaskDetail: every field, the check's result and output, the
// prompt cut at its 40th line with a note, the events; all of it escaped
// but for the line ends of the prompt and the output.
func TestPrintTaskDetail(t *testing.T) {
	now := time.Now()
	var prompt strings.Builder
	for i := range 45 {
		fmt.Fprintf(&prompt, "line %d\x1b[1m\n", i+1)
	}
	d := api.TaskDetail{Task: herd.Task{ID: "t-3", Title: "fix\x1b[2J it", Role: "worker", State: herd.TaskReview, Session: "worker-0",
		Branch: "herd/t-3", Base: "main", Repo: "/src/app", Commits: 2, Check: []string{"go", "test", "./..."}, CreatedAt: now,
		UpdatedAt: now, Prompt: prompt.String(), CheckLog: "/state/t-3.log", CheckTail: "ok  herd\t0.1s\n\x1b]0;x\x07done\n", ApprovedBy: "alice"},
		Events: []herd.Event{{Time: now, Kind: herd.EventTaskChecked, Reason: "passed", Message: "check\rpassed"}}}
	var b bytes.Buffer
	printTaskDetail(&b, d, now)
	out := b.String()
	for _, r := range out {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			t.Fatalf("expected no control byte but line ends and tabs … got %q in %q", r, out)
		}
	}
	for _, want := range []string{
		"ID:", "t-3", `fix\x1b[2J it`, "review", "worker-0", "herd/t-3", "/src/app", "Check:", "go test ./...",
		"exit 0 (passed)", "/state/t-3.log", "Approved by:", "alice",
		"Check output (tail):\n  ok  herd\t0.1s\n  \\x1b]0;x\\x07done\n",
		"Prompt:\n  line 1\\x1b[1m\n", "  line 40\\x1b[1m\n  (5 more lines; 'herd describe task t-3 -o json' shows it whole)\n",
		"task_checked", `check\rpassed`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("expected %q … got\n%s", want, out)
		}
	}
	if strings.Contains(out, "line 41") {
		t.Errorf("expected the prompt cut at 40 lines … got\n%s", out)
	}
}
