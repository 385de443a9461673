// Package workspace gives each task its own git worktree on its own branch, records the
// worktree as a commit after every turn and pushes it to a durable remote, and puts the files
// back at any recorded turn, on this host or on another one that shares nothing but the remote.
// It drives the git binary; it knows nothing of Temporal or Postgres.
//
// Layout on a host: one bare mirror per repository under <StateDir>/mirrors, keyed by a hash of
// the repository's URL or path; each task's worktree at <Root>/<task id> on branch
// drover/<task id>. A task's refs, in the mirror and on the remote:
//
//	refs/drover/tasks/<id>/base       the commit the task started from
//	refs/drover/tasks/<id>/turns/<n>  the checkpoint of turn n
//	refs/drover/tasks/<id>/last       the newest checkpoint
//	refs/drover/tasks/<id>/kept/<n>   changes found in the worktree that were not a checkpoint
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// Defaults of a Manager: the one place they are set.
const (
	// DefaultMaxFileBytes bounds one file in a checkpoint.
	DefaultMaxFileBytes = 50 << 20
	// DefaultAuthor and DefaultAuthorEmail sign every checkpoint.
	DefaultAuthor      = "drover"
	DefaultAuthorEmail = "drover@localhost"
)

// DefaultRemote is the remote of a Manager whose Config names none: a bare repository in its
// state folder, made by New, that only this host reaches.
func DefaultRemote(stateDir string) string { return filepath.Join(stateDir, "remote.git") }

// Config configures a Manager.
type Config struct {
	// Root holds the worktrees, one per task at <Root>/<task id>. Required; keep it the same
	// path on every host, so that a task's path (and the CLI's session files keyed by it) stays
	// the same when the task moves.
	Root string
	// StateDir holds the mirrors, the private indexes and the default remote. Required.
	StateDir string
	// Remote is where checkpoints are pushed: a bare repository's path or a git URL that every
	// host reaches. Defaults to a bare repository at <StateDir>/remote.git, made when missing.
	Remote string
	// Git is the git binary. Defaults to "git" on PATH.
	Git string
	// Env is added to the environment of every git command (after drover's own): credentials,
	// GIT_SSH_COMMAND, a proxy. Nothing else of the process's environment reaches git.
	Env []string
	// MaxFileBytes bounds one file in a checkpoint. Defaults to DefaultMaxFileBytes.
	MaxFileBytes int64
	// Author and AuthorEmail sign checkpoints. Default to DefaultAuthor, DefaultAuthorEmail.
	Author, AuthorEmail string
	// Logger logs each git command at debug level. Nil means silent.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Remote == "" && c.StateDir != "" {
		c.Remote = DefaultRemote(c.StateDir)
	}
	if c.Git == "" {
		c.Git = "git"
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.Author == "" {
		c.Author = DefaultAuthor
	}
	if c.AuthorEmail == "" {
		c.AuthorEmail = DefaultAuthorEmail
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Root == "" || !filepath.IsAbs(c.Root):
		return fmt.Errorf("workspace config: Root must be an absolute path, got %q", c.Root)
	case c.StateDir == "" || !filepath.IsAbs(c.StateDir):
		return fmt.Errorf("workspace config: StateDir must be an absolute path, got %q", c.StateDir)
	case c.MaxFileBytes < 0:
		return fmt.Errorf("workspace config: MaxFileBytes must not be negative, got %d", c.MaxFileBytes)
	}
	return nil
}

// Manager manages the workspaces of one host.
type Manager struct {
	cfg     Config
	mu      sync.Mutex
	mirrors map[string]*sync.Mutex // by mirror path: one fetch or clone at a time
}

// New checks cfg and returns a Manager. It makes the folders and the default remote when missing.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, mirrors: map[string]*sync.Mutex{}}
	for _, d := range []string{cfg.Root, m.mirrorRoot(), m.indexRoot()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("making workspace folder: %w", err)
		}
	}
	if cfg.Remote == DefaultRemote(cfg.StateDir) {
		if _, err := os.Stat(cfg.Remote); errors.Is(err, os.ErrNotExist) {
			// The remote's own side of a push runs no hooks either.
			if _, err := m.in(ctx, cfg.StateDir, "init", "-q", "--bare", cfg.Remote); err != nil {
				return nil, fmt.Errorf("making the default remote: %w", err)
			}
			if _, err := m.in(ctx, cfg.Remote, "config", "core.hooksPath", "/dev/null"); err != nil {
				return nil, fmt.Errorf("making the default remote: %w", err)
			}
		}
	}
	return m, nil
}

// Task names a task's workspace: its id and the repository (URL or path) it works on.
type Task struct {
	ID   string
	Repo string
}

var taskID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func checkID(id string) error {
	if !taskID.MatchString(id) {
		return fmt.Errorf("task id %q: want letters, digits, _ and -, at most 128", id)
	}
	return nil
}

// Dir is the task's worktree: <Root>/<task id>.
func (m *Manager) Dir(id string) string { return filepath.Join(m.cfg.Root, id) }

// Branch is the task's branch in its worktree.
func Branch(id string) string { return "drover/" + id }

func refPrefix(id string) string      { return "refs/drover/tasks/" + id + "/" }
func turnRef(id string, n int) string { return fmt.Sprintf("%sturns/%d", refPrefix(id), n) }
func baseRef(id string) string        { return refPrefix(id) + "base" }
func lastRef(id string) string        { return refPrefix(id) + "last" }

func (m *Manager) mirrorRoot() string { return filepath.Join(m.cfg.StateDir, "mirrors") }
func (m *Manager) indexRoot() string  { return filepath.Join(m.cfg.StateDir, "indexes") }

// Mirror is the path of the host's bare mirror of repo.
func (m *Manager) Mirror(repo string) string {
	sum := sha256.Sum256([]byte(repo))
	return filepath.Join(m.mirrorRoot(), hex.EncodeToString(sum[:12])+".git")
}

func (m *Manager) lockMirror(path string) func() {
	m.mu.Lock()
	l, ok := m.mirrors[path]
	if !ok {
		l = &sync.Mutex{}
		m.mirrors[path] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}
