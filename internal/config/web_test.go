package config

import (
	"strings"
	"testing"
)

func TestWeb(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		listen     string
		err        string // a part of the error; "" for none
	}{
		{name: "default", listen: DefaultWebListen},
		{name: "off", toml: "[web]\nlisten = \"\"\n", listen: ""},
		{name: "any port for tests", toml: "[web]\nlisten = \"127.0.0.1:0\"\n", listen: "127.0.0.1:0"},
		{name: "localhost", toml: "[web]\nlisten = \"localhost:8080\"\n", listen: "localhost:8080"},
		{name: "lan without tls", toml: "[web]\nlisten = \"0.0.0.0:7780\"\n", err: "web.listen"},
		{name: "lan insecure", toml: "[web]\nlisten = \"0.0.0.0:7780\"\ninsecure_http = true\n", listen: "0.0.0.0:7780"},
		{name: "lan with tls", toml: "[web]\nlisten = \"10.0.0.1:443\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\nallow_hosts = [\"herd.lan\"]\n", listen: "10.0.0.1:443"},
		{name: "cert without key", toml: "[web]\ntls_cert = \"c.pem\"\n", err: "tls_key"},
		{name: "bad address", toml: "[web]\nlisten = \"7780\"\n", err: "web.listen"},
		{name: "bad allowed host", toml: "[web]\nallow_hosts = [\"http://x/\"]\n", err: "web.allow_hosts"},
		{name: "unknown key", toml: "[web]\nport = 1\n", err: "port"},
		{name: "public url", toml: "[web]\nurl = \"https://herd.example.com/\"\n", listen: DefaultWebListen},
		{name: "url with a path", toml: "[web]\nurl = \"https://herd.example.com/x?y\"\n", err: "web.url"},
		{name: "url not http", toml: "[web]\nurl = \"herd.example.com\"\n", err: "web.url"},
	} {
		cfg, err := Parse([]byte(c.toml), "herd.toml", t.TempDir())
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("[%s] expected an error naming %q … got %v", c.name, c.err, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%s] expected no error … got %v", c.name, err)
			continue
		}
		if cfg.Web.Listen != c.listen {
			t.Errorf("[%s] expected listen %q … got %q", c.name, c.listen, cfg.Web.Listen)
		}
	}
}
