package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHooksLinkRepointedAtStart: the hooks' stable binary an earlier
// daemon made (here: pointing at a binary gone since, an upgrade) points
// at this daemon's executable as soon as it starts; a state dir without
// one gets none.
func TestHooksLinkRepointedAtStart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := escDir(t)
	link := filepath.Join(dir, "bin", "herd")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone", "herd"), link); err != nil {
		t.Fatal(err)
	}
	env := escStart(t, dir, escConfig(), nil)
	escWait(t, "the link re-pointed", 5*time.Second, func() bool {
		cur, err := os.Readlink(link)
		return err == nil && cur == exe
	})
	env.stop()

	bare := escDir(t)
	env = escStart(t, bare, escConfig(), nil)
	env.stop()
	if _, err := os.Lstat(filepath.Join(bare, "bin", "herd")); !os.IsNotExist(err) {
		t.Errorf("expected no hooks link made for a state dir without one, got %v", err)
	}
}
