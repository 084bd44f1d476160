package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by the linker (-X main.version=... -X main.commit=...) to override
// what the build info records; empty means "read it from the build info".
// After init, version is the short form the daemon reports.
var (
	version = ""
	commit  = ""
	dirty   = "" // "true" or "false"
)

// buildIdentity is what `herd version` prints.
type buildIdentity struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Time     string `json:"time,omitempty"`
	Dirty    bool   `json:"dirty"`
	Go       string `json:"go"`
	CGO      string `json:"cgo,omitempty"`
}

// readIdentity reads the binary's identity from its build info: the module
// version (set by `go install herd@vX`), and the VCS revision, time and
// dirty flag (set by `go build` in a checkout); linker values win.
func readIdentity(bi *debug.BuildInfo, ok bool, linkVersion, linkCommit, linkDirty string) buildIdentity {
	id := buildIdentity{Version: "(devel)", Revision: "unknown", Go: runtime.Version()}
	if ok && bi != nil {
		if bi.GoVersion != "" {
			id.Go = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" {
			id.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				id.Revision = s.Value
			case "vcs.time":
				id.Time = s.Value
			case "vcs.modified":
				id.Dirty = s.Value == "true"
			case "CGO_ENABLED":
				id.CGO = s.Value
			}
		}
	}
	if linkVersion != "" {
		id.Version = linkVersion
	}
	if linkCommit != "" {
		id.Revision = linkCommit
	}
	if linkDirty != "" {
		id.Dirty = linkDirty == "true"
	}
	return id
}

// identity is this binary's, read once at start.
var identity buildIdentity

func init() {
	bi, ok := debug.ReadBuildInfo()
	identity = readIdentity(bi, ok, version, commit, dirty)
	// The daemon reports version in /v1/health.
	version = identity.Version + " (" + identity.shortRevision() + ")"
}

func (id buildIdentity) shortRevision() string {
	rev := id.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if id.Dirty {
		rev += "-dirty"
	}
	return rev
}

// String is the one line `herd version` prints.
func (id buildIdentity) String() string {
	s := fmt.Sprintf("herd %s (commit %s", id.Version, id.shortRevision())
	if id.Time != "" {
		s += ", " + id.Time
	}
	s += ", " + id.Go
	if id.CGO == "0" {
		s += ", static"
	}
	return s + ")"
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and Go version (from the build info)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput("version", output, "json", "yaml"); err != nil {
				return err
			}
			id := identity
			switch output {
			case "json":
				return writeJSON(cmd.OutOrStdout(), id)
			case "yaml":
				return writeYAML(cmd.OutOrStdout(), id)
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json | yaml (default: one line)")
	return cmd
}
