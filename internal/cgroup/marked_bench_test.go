package cgroup

import (
	"testing"

	"herd"
	"herd/internal/proc"
)

// BenchmarkMarkerScan: one scan of every process on this machine for a
// marker nobody carries, as a stop's sweep or a crash cleanup pass runs
// it: each environment block read into a reused buffer and searched in
// place (Marked) side by side with the map each block was parsed into
// before.
func BenchmarkMarkerScan(b *testing.B) {
	fs := proc.Real()
	boot, err := proc.BootID()
	if err != nil {
		b.Skip(err)
	}
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			pids, err := fs.PIDs()
			if err != nil {
				b.Fatal(err)
			}
			for _, pid := range pids {
				if env, err := fs.Environ(pid); err == nil && env[herd.EnvIncarnation] == "nobody" {
					b.Fatal("found")
				}
			}
		}
	})
	b.Run("in-place", func(b *testing.B) {
		for b.Loop() {
			if ids, err := Marked(fs, boot, "nobody"); err != nil || len(ids) > 0 {
				b.Fatal(ids, err)
			}
		}
	})
}
