package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/workspace"
)

// workspaceViewOptions say where a command that reads managed tasks' checkpoints (diff, close
// --push-to, serve) finds them: the durable remote the workers push to.
type workspaceViewOptions struct {
	remote string
}

// addWorkspaceViewFlags adds --workspace-remote to c.
func addWorkspaceViewFlags(c *cobra.Command, a *app) *workspaceViewOptions {
	o := &workspaceViewOptions{}
	c.Flags().StringVar(&o.remote, "workspace-remote", a.env.workspaceRemote,
		"the durable remote the workers push checkpoints to (DROVER_WORKSPACE_REMOTE; default: "+defaultWorkspaceRemoteHelp+")")
	return o
}

// workspaceView is a reader of the managed tasks' checkpoints: a workspace manager over this
// user's cache folder (its mirror of the remote; it makes no worktree), reading o.remote.
func (a *app) workspaceView(ctx context.Context, o *workspaceViewOptions) (*workspace.Manager, error) {
	remote := o.remote
	if remote == "" {
		remote = a.env.defaultWorkspaceRemote()
	}
	if remote == "" {
		return nil, errors.New("no workspace remote: set DROVER_WORKSPACE_REMOTE or --workspace-remote to the one the workers push to")
	}
	dir := a.env.viewDir
	if dir == "" {
		return nil, errors.New("no folder for the workspace view: set XDG_CACHE_HOME or HOME")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the workspace view's folder: %w", err)
	}
	return workspace.New(ctx, workspace.Config{Root: filepath.Join(dir, "work"), StateDir: filepath.Join(dir, "state"),
		Remote: remote, Logger: a.log.With("component", "workspace")})
}
