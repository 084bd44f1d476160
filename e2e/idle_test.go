package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// TestPlacedRoleOnLoneDaemon: a daemon alone on its SQLite store skips
// its placement passes while nothing is placed, yet a placed role applied
// later (hosts naming this host) is placed and runs at once, and a
// scale-up places the new slot.
func TestPlacedRoleOnLoneDaemon(t *testing.T) {
	e := newEnv(t, "[daemon]\nhost = \"solo\"\n")
	e.start()
	e.waitFor("host solo up", 10*time.Second, func() bool { return e.hosts()["solo"].Name == "solo" })
	roles := e.writeRoles("roles.toml", fmt.Sprintf(`
[[role]]
name = "placed"
replicas = 2
command = ["sleep", "3600"]
workdir = %q
runtime = "exec"
hosts = ["solo"]
`, e.dir))
	e.must("apply", "-f", roles)
	for _, name := range []string{"placed-0", "placed-1"} {
		v := e.waitState(name, herd.StateRunning, 10*time.Second)
		if v.Host != "solo" {
			t.Errorf("[%s] expected it on host solo, got %q", name, v.Host)
		}
	}
	slots := func() map[string]string {
		var views []api.RoleView
		if err := json.Unmarshal([]byte(e.must("get", "roles", "-o", "json")), &views); err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.Name == "placed" && v.Placement != nil {
				return v.Placement.Slots
			}
		}
		return nil
	}
	if got := slots(); got["placed-0"] != "solo" || got["placed-1"] != "solo" {
		t.Errorf("expected both slots placed on solo, got %v", got)
	}
	e.must("scale", "placed", "--replicas", "3")
	e.waitState("placed-2", herd.StateRunning, 10*time.Second)
	if got := slots(); got["placed-2"] != "solo" {
		t.Errorf("[scaled] expected placed-2 placed on solo, got %v", got)
	}
	e.must("delete", "role", "placed")
}
