package herdtest

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

// AwaitExec waits until the process started as pid shows the environment
// of its new program. exec.Cmd.Start returns once the exec began (its
// close-on-exec pipe closed), before the kernel has set the new
// environment up: an environ read in between comes back empty, and an
// identity read then has no marker. Every test that reads a marker of a
// process it has just started waits here first (herd's launch waits for
// its marker the same way). A process already gone or a zombie ends the
// wait: the test sees how.
func AwaitExec(tb testing.TB, pid int) {
	tb.Helper()
	WaitEvery(tb, fmt.Sprintf("pid %d to show its environment after its exec", pid), 5*time.Second, time.Millisecond, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || len(b) > 0 {
			return true
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state is the first field after the command's closing
		// parenthesis (the command itself may hold one).
		i := bytes.LastIndexByte(st, ')')
		return i < 0 || bytes.HasPrefix(st[i+1:], []byte(" Z"))
	})
}
