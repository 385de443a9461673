// Package gittest runs git in tests as a person would, outside drover's own code: the witness of
// what drover wrote to a repository, and the hand that makes the repositories it works on.
package gittest

import (
	"os"
	"os/exec"
	"testing"
)

// Run runs git -C dir with args, without the machine's or the user's configuration and as a
// fixed author, and returns what it printed; a failure fails the test.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-C", dir}, args...)...)
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}
