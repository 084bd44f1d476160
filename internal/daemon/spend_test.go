package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileSpending: the spend file is read again when it changes; a file
// missing or garbled spends nothing.
func TestFileSpending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.json")
	f := &fileSpending{path: path, log: slog.New(slog.DiscardHandler)}
	if got := f.RoleCostSince("w", time.Time{}); got != 0 {
		t.Errorf("[missing] expected 0, got %v", got)
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"w": 2.5, "x": 1}`)
	if got := f.RoleCostSince("w", time.Time{}); got != 2.5 {
		t.Errorf("[read] expected 2.5, got %v", got)
	}
	if got := f.RoleCostSince("gone", time.Time{}); got != 0 {
		t.Errorf("[no such role] expected 0, got %v", got)
	}
	write(`{"w": 7.25}`) // another size: read again whatever the clock's resolution
	if got := f.RoleCostSince("w", time.Time{}); got != 7.25 {
		t.Errorf("[changed] expected 7.25, got %v", got)
	}
	write(`{"w": 3`)
	if got := f.RoleCostSince("w", time.Time{}); got != 0 {
		t.Errorf("[garbled] expected 0, got %v", got)
	}
}
