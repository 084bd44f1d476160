package diag

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// tcpEstablished is the kernel's TCP_ESTABLISHED state, column "st" of /proc/net/tcp.
const tcpEstablished = 0x01

// maxTCPTable bounds how much of a namespace's socket table is read.
const maxTCPTable = 256 << 20

// socketInode extracts INODE from an fd link target "socket:[INODE]".
func socketInode(target string) (uint64, bool) {
	s, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(s, 10, 64)
	if err != nil || ino == 0 {
		return 0, false
	}
	return ino, true
}

// countEstablishedFile is countEstablished over the table file at path.
func countEstablishedFile(path string, inodes map[uint64]struct{}) (n, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return countEstablished(io.LimitReader(f, maxTCPTable), inodes)
}

// countEstablished reads a /proc/<pid>/net/tcp or tcp6 table and counts the
// ESTABLISHED rows whose inode is in inodes, each inode at most once. The
// table covers the whole network namespace, so the inode filter is what makes
// the count the tree's own. Lines that do not parse are skipped and counted.
func countEstablished(r io.Reader, inodes map[uint64]struct{}) (n, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	counted := map[uint64]bool{}
	header := true
	for sc.Scan() {
		line := sc.Text()
		if header {
			header = false
			if strings.Contains(line, "local_address") {
				continue
			}
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		st, ino, ok := parseTCPLine(line)
		if !ok {
			skipped++
			continue
		}
		if st != tcpEstablished || counted[ino] {
			continue
		}
		if _, mine := inodes[ino]; mine {
			counted[ino] = true
			n++
		}
	}
	return n, skipped, sc.Err()
}

// parseTCPLine returns the state and inode of one table row:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
func parseTCPLine(line string) (st uint64, ino uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 10 || !strings.HasSuffix(f[0], ":") ||
		!strings.Contains(f[1], ":") || !strings.Contains(f[2], ":") {
		return 0, 0, false
	}
	st, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil {
		return 0, 0, false
	}
	ino, err = strconv.ParseUint(f[9], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return st, ino, true
}
