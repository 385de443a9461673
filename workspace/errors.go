package workspace

import (
	"errors"
	"fmt"
	"strings"
)

// The errors callers branch on. Each is matched with errors.Is; the typed errors below carry
// the details and match their sentinel.
var (
	// ErrUnreachable: the repository or the durable remote cannot be read or written.
	ErrUnreachable = errors.New("repository unreachable")
	// ErrBaseMissing: the base ref names nothing in the repository.
	ErrBaseMissing = errors.New("base ref missing")
	// ErrChangedByHand: the worktree differs from its last checkpoint outside a turn.
	ErrChangedByHand = errors.New("worktree changed by hand")
	// ErrDiskFull: git ran out of space while writing.
	ErrDiskFull = errors.New("disk full")
	// ErrFileTooLarge: a file to checkpoint is over Config.MaxFileBytes.
	ErrFileTooLarge = errors.New("file over the size limit")
	// ErrNoCheckpoint: the task has no checkpoint of that turn (or none at all).
	ErrNoCheckpoint = errors.New("no such checkpoint")
	// ErrNoWorktree: the task has no worktree on this host.
	ErrNoWorktree = errors.New("no worktree")
	// ErrLocked: git found a lock file in the worktree's repository (index.lock and the like):
	// a git command runs there, a person's for example, or one that was stopped left it.
	ErrLocked = errors.New("worktree locked")
)

// GitError is a git command that failed: its arguments, exit status and what it said.
type GitError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *GitError) Unwrap() error { return e.Err }

// Is lets a failure that ran out of disk space match ErrDiskFull, and one that met another
// command's lock file match ErrLocked.
func (e *GitError) Is(target error) bool {
	switch target {
	case ErrDiskFull:
		return isDiskFull(e.Stderr)
	case ErrLocked:
		return isLocked(e.Stderr)
	}
	return false
}

// isLocked reports git's refusal to take a lock that another command holds (or left).
func isLocked(stderr string) bool {
	return strings.Contains(stderr, "Unable to create '") && strings.Contains(stderr, ".lock': File exists")
}

func isDiskFull(stderr string) bool {
	s := strings.ToLower(stderr)
	return strings.Contains(s, "no space left on device") || strings.Contains(s, "disk quota exceeded")
}

// UnreachableError is a repository or remote that could not be fetched from or pushed to.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("repository %s unreachable: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Is matches ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// BaseMissingError is a base ref that the repository does not have.
type BaseMissingError struct {
	Repo, Base string
}

func (e *BaseMissingError) Error() string {
	return fmt.Sprintf("base %q not found in %s", e.Base, e.Repo)
}

// Is matches ErrBaseMissing.
func (e *BaseMissingError) Is(target error) bool { return target == ErrBaseMissing }

// ChangedError is a worktree edited since its last checkpoint. Its changes are kept on Ref, a
// commit whose parent is the checkpoint, and Files names them.
type ChangedError struct {
	Task  string
	Ref   string
	Files []string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("worktree of task %s changed since its last checkpoint (%d files, kept on %s)",
		e.Task, len(e.Files), e.Ref)
}

// Is matches ErrChangedByHand.
func (e *ChangedError) Is(target error) bool { return target == ErrChangedByHand }

// FileTooLargeError names a file over the size limit.
type FileTooLargeError struct {
	Path  string
	Size  int64
	Limit int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("file %q is %d bytes, over the limit of %d", e.Path, e.Size, e.Limit)
}

// Is matches ErrFileTooLarge.
func (e *FileTooLargeError) Is(target error) bool { return target == ErrFileTooLarge }
