package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MinMemoryMax is the smallest memory_max accepted: below it no agent
// starts, so a smaller value is a typo (a missing unit).
const MinMemoryMax = 1 << 20

// sizeUnits are the suffixes of a size, powers of 1024 as in systemd's
// MemoryMax and the cgroup files: "64M" is 64 MiB.
var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
	"M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
	"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
	"T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40,
}

// ParseSize parses a memory size such as "64M", "1.5G", "512MiB" or
// "1048576" (bytes) into bytes. Units are powers of 1024 and case does
// not matter.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	}
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf(`invalid size %q: use a number with an optional unit K, M, G or T, e.g. "64M"`, s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf(`invalid size %q: use a number with an optional unit K, M, G or T, e.g. "64M"`, s)
	}
	bytes := v * float64(mult)
	if bytes >= math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return int64(bytes), nil
}
