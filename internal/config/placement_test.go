package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePlacementKeys(t *testing.T) {
	head := "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n"
	cases := []struct {
		name                   string
		doc                    string
		hosts                  []string
		spread, failover, plcd bool
	}{
		{"none", head, nil, false, false, false},
		{"hosts", head + "hosts = [\"a\", \"b\"]\n", []string{"a", "b"}, false, false, true},
		{"spread", head + "spread = true\n", nil, true, false, true},
		{"hosts spread failover", head + "hosts = [\"b\"]\nspread = true\nfailover = true\n", []string{"b"}, true, true, true},
		{"empty hosts is no placement", head + "hosts = []\n", nil, false, false, false},
	}
	for _, c := range cases {
		cfg, err := Parse([]byte(c.doc), "herd.toml", "/base")
		if err != nil {
			t.Errorf("[%s] expected no error, got %v", c.name, err)
			continue
		}
		r := cfg.Roles[0]
		if !cmp.Equal(r.Hosts, c.hosts) || r.Spread != c.spread || r.Failover != c.failover || r.Placed() != c.plcd {
			t.Errorf("[%s] expected hosts %v spread %v failover %v placed %v, got %v %v %v %v",
				c.name, c.hosts, c.spread, c.failover, c.plcd, r.Hosts, r.Spread, r.Failover, r.Placed())
		}
	}
}

func TestParsePlacementErrors(t *testing.T) {
	head := "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n"
	cases := []struct {
		name, doc, key, text string
		line                 int
	}{
		{"hosts as string", head + "hosts = \"b\"\n", "role[0].hosts", `hosts: "b" is a string; write an array`, 4},
		{"hosts with a number", head + "hosts = [\"b\", 3]\n", "role[0].hosts[1]", `hosts[1]: got 3, want a string`, 4},
		{"empty host", head + "\nhosts = [\"\"]\n", "role[0].hosts[0]", `hosts[0]: must be a non-empty host name`, 5},
		{"host with space", head + "hosts = [\"a b\"]\n", "role[0].hosts[0]", `contains white space`, 4},
		{"host twice", head + "hosts = [\"a\", \"a\"]\n", "role[0].hosts[1]", `"a" is listed twice (hosts[0])`, 4},
		{"spread not bool", head + "spread = \"yes\"\n", "role[0].spread", `got a TOML string, want a boolean`, 4},
		{"failover alone", head + "failover = true\n", "role[0].failover", `failover: needs hosts or spread = true`, 4},
		{"unknown neighbour", head + "host = [\"a\"]\n", "role[0].host", `unknown key`, 4},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.doc), "herd.toml", "/base")
		if err == nil {
			t.Errorf("[%s] expected an error, got none", tc.name)
			continue
		}
		var match *Error
		for _, e := range allErrors(err) {
			if strings.Contains(e.Error(), tc.text) {
				match = e
				break
			}
		}
		if match == nil {
			t.Errorf("[%s] expected a message containing %q, got:\n%v", tc.name, tc.text, err)
			continue
		}
		if match.Line != tc.line || match.Key != tc.key {
			t.Errorf("[%s] expected line %d key %q, got line %d key %q (%v)", tc.name, tc.line, tc.key, match.Line, match.Key, match)
		}
		if n := len(allErrors(err)); n != 1 {
			t.Errorf("[%s] expected the problem reported once, got %d: %v", tc.name, n, err)
		}
	}
}
