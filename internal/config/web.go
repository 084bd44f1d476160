package config

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// DefaultWebListen is where the console listens unless [web] listen says
// otherwise: loopback only.
const DefaultWebListen = "127.0.0.1:7780"

// Web is the [web] table: the console.
type Web struct {
	// Listen is the host:port of the console; "" serves none.
	Listen string
	// AllowHosts are Host header values accepted besides the listen
	// address (a name the console is reached by through a proxy or DNS).
	AllowHosts []string
	// TLSCert and TLSKey are PEM files; both or neither.
	TLSCert string
	TLSKey  string
	// InsecureHTTP allows plain HTTP on a non-loopback address.
	InsecureHTTP bool
	// URL is the console's public base URL (https://herd.example.com),
	// "" for none: notifications link to the console and carry one-tap
	// answers only when it is set. Its host is accepted as a Host header.
	URL string
}

// URLHost is the host[:port] of URL, "" when none.
func (w Web) URLHost() string {
	u, err := url.Parse(w.URL)
	if err != nil || w.URL == "" {
		return ""
	}
	return u.Host
}

// Loopback reports whether the listen address is a loopback one.
func (w Web) Loopback() bool {
	host, _, err := net.SplitHostPort(w.Listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TLS reports whether the console serves HTTPS.
func (w Web) TLS() bool { return w.TLSCert != "" }

// Equal reports whether two [web] tables are the same.
func (w Web) Equal(o Web) bool {
	if w.Listen != o.Listen || w.TLSCert != o.TLSCert || w.TLSKey != o.TLSKey || w.InsecureHTTP != o.InsecureHTTP || w.URL != o.URL ||
		len(w.AllowHosts) != len(o.AllowHosts) {
		return false
	}
	for i := range w.AllowHosts {
		if w.AllowHosts[i] != o.AllowHosts[i] {
			return false
		}
	}
	return true
}

type fileWeb struct {
	Listen       *string  `toml:"listen"`
	AllowHosts   []string `toml:"allow_hosts"`
	TLSCert      *string  `toml:"tls_cert"`
	TLSKey       *string  `toml:"tls_key"`
	InsecureHTTP *bool    `toml:"insecure_http"`
	URL          *string  `toml:"url"`
}

// web builds [web]: a non-loopback address needs TLS or insecure_http.
func (b *builder) web(c *Config, f fileWeb) {
	set(&c.Web.Listen, f.Listen)
	set(&c.Web.TLSCert, f.TLSCert)
	set(&c.Web.TLSKey, f.TLSKey)
	set(&c.Web.InsecureHTTP, f.InsecureHTTP)
	set(&c.Web.URL, f.URL)
	if u := c.Web.URL; u != "" {
		pu, err := url.Parse(u)
		if err != nil || !httpURL(u) || (pu.Path != "" && pu.Path != "/") || pu.RawQuery != "" || pu.Fragment != "" || pu.User != nil {
			b.fail("web.url", "%q is not the console's base URL, e.g. https://herd.example.com", u)
		} else {
			c.Web.URL = strings.TrimSuffix(u, "/")
		}
	}
	for i, h := range f.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/ \t") {
			b.fail("web.allow_hosts", "entry %d %q is not a host or host:port", i, h)
		}
	}
	c.Web.AllowHosts = f.AllowHosts
	if (c.Web.TLSCert == "") != (c.Web.TLSKey == "") {
		b.fail("web.tls_cert", "tls_cert and tls_key go together")
	}
	w := c.Web
	if w.Listen == "" {
		return
	}
	if err := checkWebListen(w.Listen); err != nil {
		b.fail("web.listen", "%q %v", w.Listen, err)
		return
	}
	if !w.Loopback() && !w.TLS() && !w.InsecureHTTP {
		b.fail("web.listen", "%q is not a loopback address: set tls_cert and tls_key, or insecure_http = true", w.Listen)
	}
}

// checkWebListen is checkListen allowing port 0 (any free port: tests).
func checkWebListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("is not host:port, e.g. 127.0.0.1:7780")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("has no valid port, e.g. 127.0.0.1:7780")
	}
	return nil
}
