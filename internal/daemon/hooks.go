package daemon

import (
	"os"
	"path/filepath"

	"herd/internal/hookinstall"
)

// repointHooks points the hooks' stable binary (<state-dir>/bin/herd, the
// command every hook herd wired runs) at this daemon's executable when
// an earlier launch made it: agents still running from before an upgrade
// whose old binary is gone report again at once, not after the next
// launch.
func (d *Daemon) repointHooks(socket string) {
	link := filepath.Join(filepath.Dir(socket), "bin", "herd")
	if _, err := os.Lstat(link); err != nil {
		return
	}
	cmd := mcpCommand()
	if len(cmd) == 0 {
		return
	}
	if _, err := hookinstall.StableBinary(filepath.Dir(socket), cmd[0]); err != nil {
		d.log.Warn("hooks: the stable binary not re-pointed", "link", link, "err", err)
	}
}
