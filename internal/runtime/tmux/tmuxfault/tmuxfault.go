// Package tmuxfault puts faults on tmux's control-mode connection, for
// tests: a proxy runs the real `tmux -C` client and garbles, truncates,
// reorders, delays, drops, lies in or holds its answers as a mode file
// says. It never runs in herd itself; a test installs a tmux wrapper
// (Install) whose -C invocations run the test binary as the proxy.
package tmuxfault

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Fault kinds, the first word of the mode file. The mode file may change
// at any time; the proxy reads it before each line it passes on.
const (
	// Garble puts a noise row before each listing row (a line with a
	// tab) and a noise line between answers.
	Garble = "garble"
	// Truncate cuts each listing row to 9 bytes.
	Truncate = "truncate"
	// Empty removes every listing row: the listing answers nothing.
	Empty = "empty"
	// Reorder holds a call's answer until the next call's has passed
	// (released alone after 300ms when no call follows).
	Reorder = "reorder"
	// Delay holds each call's answer for the mode's second word, a Go
	// duration (200ms when absent).
	Delay = "delay"
	// Drop drops the block that ends each call's answer: the call never
	// completes.
	Drop = "drop"
	// Hang passes nothing on while the mode lasts; what was held follows
	// once it ends.
	Hang = "hang"
	// Crash passes half of a call's answer on, then kills the client.
	Crash = "crash"
	// Lie replaces an answer that is a bare number (new-session's pane
	// pid) by the mode's second word.
	Lie = "lie"
)

// Kinds lists every fault kind.
var Kinds = []string{Garble, Truncate, Empty, Reorder, Delay, Drop, Hang, Crash, Lie}

// Environment of the proxy, set by the wrapper Install writes.
const (
	EnvProxy = "HERD_TMUXFAULT_PROXY" // "1": the process is the proxy
	EnvReal  = "HERD_TMUXFAULT_REAL"  // the real tmux binary
	EnvMode  = "HERD_TMUXFAULT_MODE"  // the mode file
	EnvLog   = "HERD_TMUXFAULT_LOG"   // one line per fault injected is appended here
)

// endPrefix starts the word herd's control connection prints after each
// call (display-message -p 'herd-ctl-<token>-<n>'): the proxy knows a
// call's answer ends at the block holding it.
const endPrefix = "herd-ctl-"

// noiseRow is a listing row no parser may read as a pane.
const noiseRow = "x\x01\t%zz\tnot a pane"

// RunIfProxy runs the proxy and exits when the process was started as one
// (EnvProxy set); a test binary calls it from an init function.
func RunIfProxy() {
	if os.Getenv(EnvProxy) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
}

// Install writes an executable tmux wrapper into dir: with -C it runs self
// (a binary calling RunIfProxy) as the proxy in front of real, or refuses
// control mode when self is "" (every call then takes a tmux process of
// its own); with any other command it runs before, a shell snippet (may
// be empty) that may fault the per-call path, then real. It returns the
// wrapper, the proxy's mode file (absent: no fault) and its fault log.
func Install(dir, real, self, before string) (bin, mode, log string, err error) {
	bin, mode, log = dir+"/tmux", dir+"/mode", dir+"/faults.log"
	control := fmt.Sprintf(`%s=1 %s=%q %s=%q %s=%q exec %q "$@"`, EnvProxy, EnvReal, real, EnvMode, mode, EnvLog, log, self)
	if self == "" {
		control = `echo "no control mode" >&2; exit 1`
	}
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in *" -C "*)
  %s ;;
esac
%s
exec %q "$@"
`, control, before, real)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		return "", "", "", fmt.Errorf("tmuxfault: %w", err)
	}
	return bin, mode, log, nil
}

// Injected counts the faults in a fault log, by kind.
func Injected(log string) map[string]int {
	b, _ := os.ReadFile(log)
	n := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		n[l]++
	}
	return n
}

// Main is the proxy: it runs the real client with args, its stdin and
// stderr the proxy's own, and passes its output on through the faults.
// It returns the client's exit code.
func Main(args []string) int {
	p := &proxy{mode: os.Getenv(EnvMode), log: os.Getenv(EnvLog)}
	cmd := exec.Command(os.Getenv(EnvReal), args...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tmuxfault:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "tmuxfault:", err)
		return 1
	}
	p.kill = func() { _ = cmd.Process.Kill() }
	units := make(chan unit, 1024)
	written := make(chan struct{})
	go p.read(out, units)
	go func() {
		p.write(os.Stdout, units)
		close(written)
	}()
	err = cmd.Wait()
	// The server may hold the client's output open after the client
	// exited: what is read by now is passed on, the rest is not waited for.
	select {
	case <-written:
	case <-time.After(200 * time.Millisecond):
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// proxy is one run of the proxy.
type proxy struct {
	mode string // the mode file
	log  string // the fault log
	kill func() // kills the real client
}

// unit is lines passed on together: one call's whole answer (call set),
// or lines outside any call.
type unit struct {
	lines []string
	call  bool
}

// current reads the mode file: the kind and its argument, "" when absent.
func (p *proxy) current() (kind, arg string) {
	b, err := os.ReadFile(p.mode)
	if err != nil {
		return "", ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", ""
	}
	if len(f) > 1 {
		arg = f[1]
	}
	return f[0], arg
}

// injected logs one fault of kind.
func (p *proxy) injected(kind string) {
	f, err := os.OpenFile(p.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, kind)
	f.Close()
}

// read splits the client's output into units: lines outside blocks alone
// while no call's answer is open, else everything up to and including the
// block that holds a call's end word. Listing faults apply block by block.
func (p *proxy) read(r io.Reader, units chan<- unit) {
	defer close(units)
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		open  []string // the answer being gathered
		block []string // the block being read, %begin included
	)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if len(open) > 0 || len(block) > 0 {
				units <- unit{lines: append(open, block...)}
			}
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case block != nil:
			block = append(block, line)
			head := strings.TrimPrefix(block[0], "%begin ")
			if line != "%end "+head && line != "%error "+head {
				continue
			}
			body := block[1 : len(block)-1]
			end := len(body) == 1 && strings.HasPrefix(body[0], endPrefix)
			ours := strings.HasSuffix(head, " 1") // written on stdin; not the attach
			if !ours && len(open) == 0 {
				units <- unit{lines: block}
				block = nil
				continue
			}
			if ours && !end {
				block = p.faultBlock(block)
			}
			open = append(open, block...)
			block = nil
			if end {
				units <- unit{lines: open, call: true}
				open = nil
			}
		case strings.HasPrefix(line, "%begin "):
			block = []string{line}
		case len(open) == 0:
			units <- unit{lines: []string{line}}
		default:
			open = append(open, line)
		}
	}
}

// faultBlock applies the listing faults to one answer block (its %begin
// and %end lines included).
func (p *proxy) faultBlock(block []string) []string {
	kind, arg := p.current()
	body := block[1 : len(block)-1]
	var out []string
	hit := false
	for _, l := range body {
		row := strings.Contains(l, "\t")
		switch {
		case kind == Garble && row:
			out, hit = append(out, noiseRow, l), true
		case kind == Truncate && row:
			out, hit = append(out, l[:min(9, len(l))]), true
		case kind == Empty && row:
			hit = true
		case kind == Lie && arg != "" && len(body) == 1 && isNumber(l):
			out, hit = append(out, arg), true
		default:
			out = append(out, l)
		}
	}
	if !hit {
		return block
	}
	p.injected(kind)
	return append(append([]string{block[0]}, out...), block[len(block)-1])
}

// write passes units on, with the faults on whole answers.
func (p *proxy) write(w io.Writer, units <-chan unit) {
	bw := bufio.NewWriter(w)
	emit := func(u unit) {
		p.holdWhileHung()
		for _, l := range u.lines {
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
		bw.Flush()
	}
	for u := range units {
		if !u.call {
			emit(u)
			continue
		}
		kind, arg := p.current()
		switch kind {
		case Garble:
			p.injected(kind)
			emit(unit{lines: []string{"garbage \x01 outside any block"}})
		case Delay:
			d, err := time.ParseDuration(arg)
			if err != nil {
				d = 200 * time.Millisecond
			}
			p.injected(kind)
			time.Sleep(d)
		case Drop:
			// The end word's block: %begin, the word, %end.
			p.injected(kind)
			u.lines = u.lines[:len(u.lines)-3]
		case Crash:
			p.injected(kind)
			emit(unit{lines: u.lines[:len(u.lines)/2]})
			p.kill()
			return
		case Reorder:
			select {
			case next, ok := <-units:
				if ok {
					p.injected(kind) // first: the client may kill the proxy once it sees
					emit(next)
				}
			case <-time.After(300 * time.Millisecond):
			}
		}
		emit(u)
	}
}

// holdWhileHung waits while the mode is Hang, logging the hang once.
func (p *proxy) holdWhileHung() {
	logged := false
	for {
		if kind, _ := p.current(); kind != Hang {
			return
		}
		if !logged {
			p.injected(Hang)
			logged = true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil && s != ""
}
