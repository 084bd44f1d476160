package sqlite

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestTimingOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			st := time.Now()
			s, err := Open(testCtx(t), path)
			t.Logf("%d %v %v", i, time.Since(st), err)
			if err == nil { s.Close() }
		})
	}
	wg.Wait()
}
