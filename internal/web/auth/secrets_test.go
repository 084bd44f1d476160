package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFileModes: a token or answer-key file that others may read is
// refused, and the error names the chmod that fixes it; once fixed, it is
// used as it is.
func TestSecretFileModes(t *testing.T) {
	good := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, x := range []struct {
		file string
		load func(dir string) error
	}{
		{TokenFile, func(dir string) error { _, err := LoadToken(dir); return err }},
		{AnswerKeyFile, func(dir string) error { _, err := LoadAnswerKey(dir); return err }},
	} {
		for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
			dir := t.TempDir()
			path := filepath.Join(dir, x.file)
			if err := os.WriteFile(path, []byte(good+"\n"), mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, mode) // past the umask
			err := x.load(dir)
			if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
				t.Errorf("[%s %#o] expected a refusal naming `chmod 600 %s` … got %v", x.file, mode, path, err)
			}
			if b, _ := os.ReadFile(path); string(b) != good+"\n" {
				t.Errorf("[%s %#o] expected the file left as it was … got %q", x.file, mode, b)
			}
			os.Chmod(path, 0o600)
			if err := x.load(dir); err != nil {
				t.Errorf("[%s %#o, fixed] expected it used … got %v", x.file, mode, err)
			}
		}
	}
}

// TestWeakToken: a token below MinTokenBits, or with a handful of
// distinct characters, is refused at load; the tokens herd makes, and
// strong ones of other shapes, are accepted.
func TestWeakToken(t *testing.T) {
	for _, x := range []struct {
		tok  string
		weak bool
	}{
		{strings.Repeat("a", 40), true},
		{strings.Repeat("a", 200), true},
		{strings.Repeat("ab", 100), true},
		{strings.Repeat("0123456", 30), true},
		{"0123456789abcdef", true},                  // 64 bits
		{"s3cr3t-passw0rd", true},                   // 90 bits
		{"9f86d081884c7d659a2feaa0c55ad015", false}, // 32 hex: 128 bits
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", false},
		{"Zk4y_Q2m-Wc9rTn0bXe7Ld", false}, // 22 base64url: 132 bits
		{"84913027561094837261", true},    // 20 digits: 66 bits
		{"8491302756109483726184913027561094837261", false},
	} {
		err := CheckToken(x.tok)
		if (err != nil) != x.weak {
			t.Errorf("[%q] expected weak=%v … got %v (%.0f bits)", x.tok, x.weak, err, TokenBits(x.tok))
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, TokenFile), []byte(x.tok+"\n"), 0o600)
		got, err := LoadToken(dir)
		switch {
		case x.weak && (err == nil || !strings.Contains(err.Error(), "bits") && !strings.Contains(err.Error(), "distinct")):
			t.Errorf("[load %q] expected refused as weak … got %q %v", x.tok, got, err)
		case !x.weak && (err != nil || got != x.tok):
			t.Errorf("[load %q] expected it used … got %q %v", x.tok, got, err)
		}
	}
	// An empty file is no token: a fresh one is made.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, TokenFile), nil, 0o600)
	if tok, err := LoadToken(dir); err != nil || CheckToken(tok) != nil {
		t.Errorf("[empty file] expected a fresh strong token … got %q %v", tok, err)
	}
}
