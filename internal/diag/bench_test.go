package diag

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCollect100 measures one watchdog tick over 100 sleeping agents:
// each iteration collects all 100 sequentially.
func BenchmarkCollect100(b *testing.B) {
	requireProc(b)
	pids := make([]int, 0, 100)
	for range 100 {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.Skipf("no sleep binary: %v", err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	c := Collector{}
	prev := make([]*Diagnostics, len(pids))
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		now := time.Now()
		for i, pid := range pids {
			d, err := c.Collect(pid, prev[i], now)
			if err != nil {
				b.Fatal(err)
			}
			prev[i] = &d
		}
	}
	b.StopTimer()
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		b.Fatal(err)
	}
	cpu := time.Duration(syscall.TimevalToNsec(after.Utime) - syscall.TimevalToNsec(before.Utime) +
		syscall.TimevalToNsec(after.Stime) - syscall.TimevalToNsec(before.Stime))
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/tick")
}
