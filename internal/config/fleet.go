package config

import "time"

// Fleet is the [fleet] table: several hosts' daemons sharing one
// PostgreSQL store.
type Fleet struct {
	// HostTimeout: a host whose daemon has not beaten for this long is
	// stale, and its live sessions show unknown everywhere (never dead,
	// never relaunched elsewhere).
	HostTimeout time.Duration
	// Lease: a daemon that could not renew its lease (the store out of
	// reach) for this long stops the agents of its failover roles
	// (reason fenced), and another host takes a failover slot only once
	// the lease of the host it ran on has ended, plus a margin, by the
	// database's clock. The same on every host of a fleet.
	Lease time.Duration
	// SSH is the argv prefix that runs `herd attach|logs` on another host:
	// the host name and herd's arguments are appended.
	SSH []string
}

type fileFleet struct {
	HostTimeout *string `toml:"host_timeout"`
	Lease       *string `toml:"lease"`
	SSH         any     `toml:"ssh"`
}

// defaultFleet holds the [fleet] defaults.
func defaultFleet() Fleet {
	return Fleet{HostTimeout: 30 * time.Second, Lease: 20 * time.Second, SSH: []string{"ssh", "-t"}}
}

// fleet overlays the [fleet] keys of f on c.Fleet.
func (b *builder) fleet(c *Config, f fileFleet) {
	b.positive(&c.Fleet.HostTimeout, f.HostTimeout, "fleet.host_timeout")
	if c.Fleet.HostTimeout > 0 && c.Fleet.HostTimeout < 3*time.Second {
		// Three beats per timeout, at most one a second: a shorter
		// timeout would call a healthy host stale between two beats.
		b.fail("fleet.host_timeout", "must be at least 3s (a daemon beats every second at most), got %q", *f.HostTimeout)
	}
	b.positive(&c.Fleet.Lease, f.Lease, "fleet.lease")
	if c.Fleet.Lease > 0 && c.Fleet.Lease < time.Second {
		// Renewed four times per lease, and a fenced stop must fit in
		// a quarter of it.
		b.fail("fleet.lease", "must be at least 1s, got %q", *f.Lease)
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
