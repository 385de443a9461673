package workspace

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"time"
)

// gitConfig is set on every command, over whatever a repository's own config says: no hooks, no
// filters or helpers from outside, no background maintenance during a turn, bytes as they are.
var gitConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.autocrlf=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.quotepath=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "commit.gpgsign=false",
	"-c", "advice.detachedHead=false",
}

// baseEnv is the whole environment of a git command, before Config.Env: no system or global
// config, no prompts, a fixed identity, literal paths.
func (m *Manager) baseEnv() []string {
	return append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + m.cfg.StateDir,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_AUTHOR_NAME=" + m.cfg.Author,
		"GIT_AUTHOR_EMAIL=" + m.cfg.AuthorEmail,
		"GIT_COMMITTER_NAME=" + m.cfg.Author,
		"GIT_COMMITTER_EMAIL=" + m.cfg.AuthorEmail,
	}, m.cfg.Env...)
}

// cmd is one git command: run in dir, with extra environment and an optional stdin.
type cmd struct {
	dir   string
	env   []string
	stdin io.Reader
	args  []string
}

// git runs a command and returns its standard output; a failure is a *GitError.
func (m *Manager) git(ctx context.Context, c cmd) (string, error) {
	args := append(append([]string{}, gitConfig...), c.args...)
	x := exec.CommandContext(ctx, m.cfg.Git, args...)
	x.Dir = c.dir
	x.Env = append(m.baseEnv(), c.env...)
	x.Stdin = c.stdin
	x.WaitDelay = 5 * time.Second
	var out, stderr bytes.Buffer
	x.Stdout, x.Stderr = &out, &stderr
	start := time.Now()
	err := x.Run()
	m.cfg.Logger.DebugContext(ctx, "git", "args", c.args, "dir", c.dir, "took", time.Since(start), "err", err)
	if err != nil {
		return "", &GitError{Args: c.args, Err: err, Stderr: stderr.String()}
	}
	return out.String(), nil
}

// in runs git in dir and returns its output with the last newline trimmed.
func (m *Manager) in(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := m.git(ctx, cmd{dir: dir, args: args})
	return strings.TrimSuffix(out, "\n"), err
}
