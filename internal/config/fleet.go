package config

import "time"

// Fleet is the [fleet] table: several hosts' daemons sharing one
// PostgreSQL store.
type Fleet struct {
	// HostTimeout: a host whose daemon has not beaten for this long is
	// stale, and its live sessions show unknown everywhere (never dead,
	// never relaunched elsewhere).
	HostTimeout time.Duration
	// SSH is the argv prefix that runs `herd attach|logs` on another host:
	// the host name and herd's arguments are appended.
	SSH []string
}

type fileFleet struct {
	HostTimeout *string `toml:"host_timeout"`
	SSH         any     `toml:"ssh"`
}

// defaultFleet holds the [fleet] defaults.
func defaultFleet() Fleet {
	return Fleet{HostTimeout: 30 * time.Second, SSH: []string{"ssh", "-t"}}
}

// fleet overlays the [fleet] keys of f on c.Fleet.
func (b *builder) fleet(c *Config, f fileFleet) {
	b.positive(&c.Fleet.HostTimeout, f.HostTimeout, "fleet.host_timeout")
	if c.Fleet.HostTimeout > 0 && c.Fleet.HostTimeout < 3*time.Second {
		// Three beats per timeout, at most one a second: a shorter
		// timeout would call a healthy host stale between two beats.
		b.fail("fleet.host_timeout", "must be at least 3s (a daemon beats every second at most), got %q", *f.HostTimeout)
	}
	if f.SSH == nil {
		return
	}
	argv, p := argvOf(f.SSH, "ssh")
	if p == nil {
		if ps := argvProblems(argv, "ssh"); len(ps) > 0 {
			p = &ps[0]
		}
	}
	if p != nil {
		b.report("", "fleet.", *p)
		return
	}
	c.Fleet.SSH = argv
}
