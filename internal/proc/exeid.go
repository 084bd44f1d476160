package proc

import (
	"fmt"
	"os"
	"syscall"
)

// FileID names a file by its device and inode: two paths with the same
// FileID are one file.
type FileID struct {
	Dev, Ino uint64
}

// Zero reports whether id names no file.
func (id FileID) Zero() bool { return id == FileID{} }

// ExeID returns the identity of the file pid runs, whatever became of its
// path since (the kernel keeps the file of a running executable).
func (fs FS) ExeID(pid int) (FileID, error) {
	if pid <= 0 {
		return FileID{}, fmt.Errorf("proc: invalid pid %d", pid)
	}
	return FileIDOf(fs.path(pid, "exe"))
}

// FileIDOf returns the identity of the file at path, links followed.
func FileIDOf(path string) (FileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, fmt.Errorf("proc: stat %s: no device and inode", path)
	}
	return FileID{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}
