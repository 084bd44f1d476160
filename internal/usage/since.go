package usage

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ParseSince reads how far back a report looks: a Go duration ("90m",
// "24h") or a number of days ("7d"), more than 0 (herd usage --since, the
// console's since=).
func ParseSince(s string) (time.Duration, error) {
	var (
		d   time.Duration
		err error
	)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if days, err = strconv.Atoi(n); err == nil {
			d = time.Duration(days) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil {
		return 0, errors.New("want a duration such as 90m, 24h or 7d")
	}
	if d <= 0 {
		return 0, errors.New("want how far back to look, more than 0")
	}
	return d, nil
}
