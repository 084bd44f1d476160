package worktree

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Commits made by the tests need an identity whatever the machine's
	// git configuration says.
	for k, v := range map[string]string{
		"GIT_AUTHOR_NAME": "herd test", "GIT_AUTHOR_EMAIL": "test@localhost",
		"GIT_COMMITTER_NAME": "herd test", "GIT_COMMITTER_EMAIL": "test@localhost",
	} {
		os.Setenv(k, v)
	}
	os.Exit(m.Run())
}
