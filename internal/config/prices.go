package config

import (
	"math"
	"strings"
)

// Price is one [prices] entry: USD per million tokens of a model (or of
// every model whose name starts with the entry's key). A key left out
// is nil: the embedded price of that model stays.
type Price struct {
	Input      *float64
	Output     *float64
	CacheRead  *float64
	CacheWrite *float64
}

type filePrice struct {
	Input      any `toml:"input"`
	Output     any `toml:"output"`
	CacheRead  any `toml:"cache_read"`
	CacheWrite any `toml:"cache_write"`
}

// prices checks [prices] into c.Prices.
func (b *builder) prices(c *Config, f map[string]filePrice) {
	if len(f) == 0 {
		return
	}
	c.Prices = make(map[string]Price, len(f))
	for model, fp := range f {
		key := "prices." + model
		if strings.TrimSpace(model) == "" {
			b.fail(key, "a model name must not be empty")
			continue
		}
		var p Price
		ok := true
		for _, field := range []struct {
			name string
			v    any
			dst  **float64
		}{{"input", fp.Input, &p.Input}, {"output", fp.Output, &p.Output}, {"cache_read", fp.CacheRead, &p.CacheRead}, {"cache_write", fp.CacheWrite, &p.CacheWrite}} {
			if field.v == nil {
				continue
			}
			var x float64
			switch v := field.v.(type) {
			case int64:
				x = float64(v)
			case float64:
				x = v
			default:
				b.fail(key+"."+field.name, "got %T, want a number of USD per million tokens", field.v)
				ok = false
				continue
			}
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				b.fail(key+"."+field.name, "%v is not a price (want a number >= 0 of USD per million tokens)", x)
				ok = false
				continue
			}
			*field.dst = &x
		}
		if ok {
			c.Prices[model] = p
		}
	}
}
