package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"herd"

	_ "modernc.org/sqlite" // Codex's log database
)

// procDiag describes what the processes of a session (those whose
// environment has HERD_SESSION=session) wait on: each thread's state and
// kernel wait channel, the files they hold open under under, and the
// kernel's file locks on those files. A real agent that stays at its
// banner is read with it, so that a failure says where it waits.
func procDiag(session, under string) string {
	want := []byte(herd.EnvSession + "=" + session + "\x00")
	entries, _ := os.ReadDir("/proc")
	var b strings.Builder
	inodes := map[string]string{} // inode -> path (/proc/locks names a file major:minor:inode)
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv0, _, _ := strings.Cut(string(cmd), "\x00")
		fmt.Fprintf(&b, "pid %d %s\n", pid, argv0)
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, task.Name()))
			wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, task.Name()))
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			state := "?"
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
				state = string(stat[i+2])
			}
			fmt.Fprintf(&b, "  task %s %s %s wchan=%s\n", task.Name(), strings.TrimSpace(string(comm)), state, wchan)
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err != nil || !strings.HasPrefix(target, under) {
				continue
			}
			fmt.Fprintf(&b, "  fd %s -> %s\n", fd.Name(), target)
			if ino, err := inodeOf(target); err == nil {
				inodes[ino] = target
			}
		}
	}
	locks, _ := os.ReadFile("/proc/locks")
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		// 1: POSIX ADVISORY WRITE 1234 08:01:5678 0 EOF (a blocked waiter has "->" after the number)
		for _, w := range f {
			if strings.Count(w, ":") == 2 {
				parts := strings.SplitN(w, ":", 3)
				if p, ok := inodes[parts[2]]; ok {
					fmt.Fprintf(&b, "lock %s  (%s)\n", line, p)
				}
			}
		}
	}
	return b.String()
}

// inodeOf is the inode number of path, as /proc/locks prints it.
func inodeOf(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", os.ErrInvalid
	}
	return strconv.FormatUint(st.Ino, 10), nil
}

// codexLogTail is the last n rows of Codex's log database in codexHome
// (every Codex process of that home writes its log there), oldest first,
// each with the process that wrote it; or why it could not be read.
func codexLogTail(codexHome string, n int) string {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(codexHome, "logs_2.sqlite")+"?mode=ro&_pragma=busy_timeout(2000)")
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	rows, err := db.Query(`SELECT ts, level, target, COALESCE(feedback_log_body, ''), COALESCE(process_uuid, '')
		FROM (SELECT * FROM logs ORDER BY id DESC LIMIT ?) ORDER BY id`, n)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var ts int64
		var level, target, body, proc string
		if err := rows.Scan(&ts, &level, &target, &body, &proc); err != nil {
			return err.Error()
		}
		if len(body) > 300 {
			body = body[:300] + "..."
		}
		fmt.Fprintf(&b, "%d %s %s %s %s\n", ts, proc, level, target, body)
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return b.String()
}
