package pgtest

import "testing"

func TestWithDatabase(t *testing.T) {
	cases := []struct {
		name, dsn, want string
	}{
		{"url", "postgres://u:p@127.0.0.1:5432/postgres?sslmode=disable", "postgres://u:p@127.0.0.1:5432/db1?sslmode=disable"},
		{"url without database", "postgresql://u@localhost", "postgresql://u@localhost/db1"},
		{"keyword/value", "host=/tmp/s user=herd dbname=postgres", "host=/tmp/s user=herd dbname=postgres dbname=db1"},
		{"keyword/value, trailing space", "host=/tmp/s ", "host=/tmp/s dbname=db1"},
	}
	for _, c := range cases {
		got, err := WithDatabase(c.dsn, "db1")
		if err != nil {
			t.Errorf("[%s] unexpected error %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("[%s] expected %q, got %q", c.name, c.want, got)
		}
	}
	if _, err := WithDatabase("postgres://%zz", "db1"); err == nil {
		t.Errorf("[bad url] expected an error, got nil")
	}
}
