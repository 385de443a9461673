package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/taskview"
)

// publishOptions are close's flags that push the task's work to a branch for review.
type publishOptions struct {
	remote string
	force  bool
	view   *workspaceViewOptions
}

// addPublishFlags adds --push-to and --force-push to close, which then takes TASK BRANCH.
func addPublishFlags(c *cobra.Command, a *app) *publishOptions {
	o := &publishOptions{view: addWorkspaceViewFlags(c, a)}
	c.Use = "close TASK [--push-to REMOTE BRANCH]"
	c.Long = `Let the task finish once its queued prompts have run. With --push-to, wait for it to
end, then push its newest checkpoint (a managed task's files, committed or not) to
BRANCH of REMOTE (a git URL or path) for review. The push replaces commits the task's
work does not contain only with --force-push, or when BRANCH is the task's own drover/TASK.`
	c.Example = `  drover task close fix-login
  drover task close fix-login --push-to git@github.com:me/app.git review/fix-login`
	c.Flags().StringVar(&o.remote, "push-to", "", "push the task's work to this git remote's BRANCH once it ends")
	c.Flags().BoolVar(&o.force, "force-push", false, "with --push-to: replace the branch's commits that the task's work does not contain")
	c.Args = func(c *cobra.Command, args []string) error {
		switch {
		case o.remote == "" && len(args) == 1:
			return checkTaskArg(c, args[0])
		case o.remote != "" && len(args) == 2:
			return checkTaskArg(c, args[0])
		case o.remote != "":
			return usageErrorf(c, "with --push-to, want TASK BRANCH, got %d argument(s)", len(args))
		}
		return usageErrorf(c, "want one TASK, got %d argument(s) (a BRANCH goes with --push-to REMOTE)", len(args))
	}
	return o
}

// publishAfterClose waits for the closed task to end, then pushes its newest checkpoint.
func (a *app) publishAfterClose(ctx context.Context, id, branch string, o *publishOptions) error {
	m, err := a.workspaceView(ctx, o.view)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "task %s: waiting for it to end, then pushing its work to %s %s\n", id, o.remote, branch)
	if err := a.waitEnded(ctx, id); err != nil {
		return err
	}
	t := m.Stored(id)
	if err := m.Fetch(ctx, t); err != nil {
		return err
	}
	p, err := m.Publish(ctx, t, o.remote, branch, o.force)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "task %s: pushed turn %d's checkpoint %s to %s %s\n", id, p.Turn, short(p.Commit), o.remote, p.Ref)
	return nil
}

// waitEnded polls the read side until the task's status is final.
func (a *app) waitEnded(ctx context.Context, id string) error {
	return a.withView(ctx, func(v *taskview.View) error {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			d, err := v.Show(ctx, id)
			if err != nil {
				return err
			}
			if d.Status.Final() {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for task %s to end: %w", id, ctx.Err())
			case <-tick.C:
			}
		}
	})
}
