package herd

import "testing"

func TestAgentIdentity(t *testing.T) {
	root, agent := Identity{PID: 10, StartTime: 1}, Identity{PID: 11, StartTime: 2}
	for _, c := range []struct {
		name string
		inc  Incarnation
		want Identity
	}{
		{"the agent found under its launcher", Incarnation{Root: root, Identity: agent}, agent},
		{"not found yet: the launched process", Incarnation{Root: root}, root},
		{"nothing recorded", Incarnation{}, Identity{}},
	} {
		if got := c.inc.AgentIdentity(); got != c.want {
			t.Errorf("[%s] expected %+v, got %+v", c.name, c.want, got)
		}
	}
}
