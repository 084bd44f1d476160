package usage

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// cpuTime is the CPU (user and system) this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchTurn is what one session appends in a round: a prompt, a tool
// result of some kilobytes, and an assistant message over two lines.
func benchTurn(i int) string {
	id := "msg_" + strconv.Itoa(i)
	tool := strings.Repeat("x", 3000)
	return `{"type":"user","timestamp":"2026-11-20T10:00:00Z","message":{"role":"user","content":[{"type":"tool_result","content":"` + tool + `"}]}}` + "\n" +
		fmt.Sprintf(`{"type":"assistant","timestamp":"2026-11-20T10:00:01Z","message":{"id":%q,"model":"claude-sonnet-4-5","content":[{"type":"text","text":"%s"}],"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":20000,"output_tokens":1}}}`, id, strings.Repeat("y", 400)) + "\n" +
		fmt.Sprintf(`{"type":"assistant","timestamp":"2026-11-20T10:00:02Z","message":{"id":%q,"model":"claude-sonnet-4-5","content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":20000,"output_tokens":250}}}`, id) + "\n"
}

// BenchmarkLedgerVsRereading: 100 sessions, each appending a turn a
// round to a transcript of 50 MB (HERD_BENCH_SESSIONS and
// HERD_BENCH_TRANSCRIPT_MB change both), read by the ledger (a stat per
// file, the appended bytes only) and by a naive reader that reads and
// parses every file whole each round; both measured in this one run, as
// CPU per minute at the ledger's default interval. Run it with
// -benchtime=1x: one iteration is the whole comparison.
func BenchmarkLedgerVsRereading(b *testing.B) {
	sessions := envInt(b, "HERD_BENCH_SESSIONS", 100)
	mb := envInt(b, "HERD_BENCH_TRANSCRIPT_MB", 50)
	dir := b.TempDir()
	st, err := sqlite.Open(b.Context(), filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	pdir := filepath.Join(home, ".claude", "projects", agents.ClaudeProjectDir(work))
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		b.Fatal(err)
	}
	// One 50 MB history, written into every transcript.
	var hist strings.Builder
	for i := 0; hist.Len() < mb<<20; i++ {
		hist.WriteString(benchTurn(-i - 1))
	}
	paths := make([]string, sessions)
	err = st.Update(b.Context(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: sessions, Command: []string{"claude"}, Workdir: work, Agent: herd.AgentClaude, Runtime: herd.RuntimeTmux}); err != nil {
			return err
		}
		for i := range sessions {
			name := herd.SessionName("w", i)
			sid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			inc := herd.Incarnation{ID: "inc-" + name, Session: name, Host: "h", RuntimeKind: herd.RuntimeTmux, Argv: []string{"claude"},
				Workdir: work, StartedAt: time.Now().UTC(), AgentSessionID: sid}
			if err := tx.PutSession(herd.Session{Name: name, Role: "w", Index: i, Host: "h", State: herd.StateRunning, Incarnation: inc.ID, RuntimeKind: herd.RuntimeTmux}); err != nil {
				return err
			}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			paths[i] = filepath.Join(pdir, sid+".jsonl")
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, []byte(hist.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	appendTurn := func(round int) {
		for _, p := range paths {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.WriteString(benchTurn(round))
			f.Close()
		}
	}
	l := New(Options{Store: st, Host: "h", Home: home, Log: slog.New(slog.DiscardHandler)})
	roundsPerMin := float64(time.Minute / DefaultInterval)

	for b.Loop() {
		// The ledger's first look reads every history once.
		c0, w0 := cpuTime(b), time.Now()
		if err := l.Once(b.Context()); err != nil {
			b.Fatal(err)
		}
		catchUp, catchUpWall := cpuTime(b)-c0, time.Since(w0)

		const ledgerRounds = 12
		var ledgerCPU time.Duration
		for r := range ledgerRounds {
			appendTurn(r)
			c := cpuTime(b)
			if err := l.Once(b.Context()); err != nil {
				b.Fatal(err)
			}
			ledgerCPU += cpuTime(b) - c
		}
		quiet := cpuTime(b)
		if err := l.Once(b.Context()); err != nil { // nothing grew: a stat per file
			b.Fatal(err)
		}
		quietCPU := cpuTime(b) - quiet

		const naiveRounds = 2
		var naiveCPU time.Duration
		var naiveTokens Tokens
		for r := range naiveRounds {
			appendTurn(ledgerRounds + r)
			c := cpuTime(b)
			naiveTokens = Tokens{}
			for _, p := range paths {
				naiveTokens = naiveTokens.Add(rereadAll(b, p))
			}
			naiveCPU += cpuTime(b) - c
		}
		// Both saw the same usage (the ledger has not read the naive
		// rounds' appends yet).
		if err := l.Once(b.Context()); err != nil {
			b.Fatal(err)
		}
		rep, err := l.Report(b.Context(), Query{})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Total.Tokens != naiveTokens {
			b.Fatalf("the ledger counted %+v, re-reading %+v", rep.Total.Tokens, naiveTokens)
		}
		perMinLedger := time.Duration(float64(ledgerCPU) / ledgerRounds * roundsPerMin)
		perMinNaive := time.Duration(float64(naiveCPU) / naiveRounds * roundsPerMin)
		b.ReportMetric(float64(perMinLedger.Milliseconds()), "ledger-cpu-ms/min")
		b.ReportMetric(float64(perMinNaive.Milliseconds()), "reread-cpu-ms/min")
		b.ReportMetric(float64(perMinNaive)/float64(perMinLedger), "ratio")
		b.Logf("%d sessions × %d MB transcripts, a turn appended per round, a round every %v:", sessions, mb, DefaultInterval)
		b.Logf("  ledger first look (reads every history once): %v CPU, %v wall", catchUp.Round(time.Millisecond), catchUpWall.Round(time.Millisecond))
		b.Logf("  ledger: %v CPU per round, %v per minute; a round where nothing grew: %v", (ledgerCPU / ledgerRounds).Round(time.Microsecond), perMinLedger.Round(time.Millisecond), quietCPU.Round(time.Microsecond))
		b.Logf("  re-reading every file: %v CPU per round, %v per minute", (naiveCPU / naiveRounds).Round(time.Millisecond), perMinNaive.Round(time.Millisecond))
		b.Logf("  re-reading costs %.0f× the ledger", float64(perMinNaive)/float64(perMinLedger))
	}
}

// rereadAll is the naive reader: the whole file, every usage line parsed.
func rereadAll(b *testing.B, path string) Tokens {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var st State
	var t Tokens
	for sc.Scan() {
		if !Relevant(ClaudeTranscript, sc.Bytes()) {
			continue
		}
		recs, _ := ParseLine(ClaudeTranscript, sc.Bytes(), &st)
		for _, r := range recs {
			t = t.Add(r.Tokens)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return t
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a number > 0", name, v)
	}
	return n
}
