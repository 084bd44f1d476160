package auth

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// The console's secrets live in files of the state dir: the API token
// (TokenFile) and the answer-link key (AnswerKeyFile). A missing one is
// made, mode 0600; an existing one is used only when no one else can read
// it, and a token only when it is strong enough to be one.

// MinTokenBits is the least estimated entropy of an API token (see
// TokenBits).
const MinTokenBits = 128

// minTokenDistinct is the fewest distinct characters a token may have:
// fewer is a repetition or a pattern, whatever its length.
const minTokenDistinct = 8

// LoadToken reads the API token of stateDir, writing a fresh one (mode
// 0600) when there is none (or the file is empty). A token file that
// others may read, or a token weaker than MinTokenBits, is refused with
// what fixes it.
func LoadToken(stateDir string) (string, error) {
	path := filepath.Join(stateDir, TokenFile)
	b, err := readSecret(path)
	if err != nil {
		return "", fmt.Errorf("web: token: %w", err)
	}
	if tok := strings.TrimSpace(string(b)); tok != "" {
		if err := CheckToken(tok); err != nil {
			return "", fmt.Errorf("web: token: %s: %w (remove the file to have a fresh one made)", path, err)
		}
		return tok, nil
	}
	tok := randomHex(32)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("web: token: %w", err)
	}
	return tok, nil
}

// LoadAnswerKey reads the answer-link key of stateDir, writing a fresh
// one (mode 0600) when there is none or it is not a key of 32 bytes or
// more in hex. A key file that others may read is refused with what
// fixes it.
func LoadAnswerKey(stateDir string) ([]byte, error) {
	path := filepath.Join(stateDir, AnswerKeyFile)
	b, err := readSecret(path)
	if err != nil {
		return nil, fmt.Errorf("web: answer key: %w", err)
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) >= 32 {
		return k, nil
	}
	k := randomHex(32)
	if err := os.WriteFile(path, []byte(k+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("web: answer key: %w", err)
	}
	return hex.DecodeString(k)
}

// readSecret reads the secret file at path: nil when there is none, an
// error naming the chmod that fixes it when its group or others have any
// permission on it.
func readSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %#o, readable by others than its owner: run `chmod 600 %s`", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// CheckToken refuses a token too weak to guard the console: fewer than
// MinTokenBits by TokenBits, or fewer than 8 distinct characters (a
// repeated character or a short pattern repeated).
func CheckToken(tok string) error {
	distinct := map[rune]bool{}
	for _, r := range tok {
		distinct[r] = true
	}
	if len(distinct) < minTokenDistinct {
		return fmt.Errorf("the token has %d distinct character(s), want at least %d", len(distinct), minTokenDistinct)
	}
	if bits := TokenBits(tok); bits < MinTokenBits {
		return fmt.Errorf("the token has about %.0f bits of entropy, want at least %d", bits, MinTokenBits)
	}
	return nil
}

// TokenBits estimates a token's entropy as if each character were drawn
// at random from the smallest usual alphabet that holds all of them:
// length × log2(alphabet), with hex digits 16, decimal digits 10, digits
// and one case of letters 36, letters and digits 62, the base64 and
// base64url characters 64, anything else 95 (printable ASCII). It is an
// upper bound: a token with structure has less.
func TokenBits(tok string) float64 {
	n := len([]rune(tok))
	return float64(n) * math.Log2(float64(alphabet(tok)))
}

// alphabets are the usual alphabets of tokens, smallest first.
var alphabets = []string{
	digits,
	digits + "abcdef",
	digits + "ABCDEF",
	digits + lower,
	digits + upper,
	digits + lower + upper,
	digits + lower + upper + "+/-_=",
}

const (
	digits = "0123456789"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// alphabet is the size of the smallest usual alphabet holding every
// character of tok: 95 (printable ASCII) when none does.
func alphabet(tok string) int {
	for _, a := range alphabets {
		if strings.Trim(tok, a) == "" {
			return min(len(a), 64) // "=" is base64's padding, not a symbol
		}
	}
	return 95
}
