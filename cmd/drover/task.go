package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/worker"
)

// newTaskCommand groups the commands that act on tasks. Each subcommand is a
// constructor in its own file (task_*.go); adding one is that file and one
// line here.
func newTaskCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "task",
		Short: "Start, prompt, watch and control tasks; answer their permission requests",
		Args:  cobra.ArbitraryArgs,
	}
	c.AddCommand(
		newTaskStartCommand(a),
		newTaskPromptCommand(a),
		newTaskControlCommand(a, "interrupt"),
		newTaskControlCommand(a, "close"),
		newTaskControlCommand(a, "cancel"),
		newTaskBudgetCommand(a),
		newTaskResolveCommand(a),
		newTaskListCommand(a),
		newTaskShowCommand(a),
		newTaskDiffCommand(a),
		newTaskRewindCommand(a),
		newTaskForkCommand(a),
		newTaskWatchCommand(a),
		newTaskPendingCommand(a),
		newTaskDecideCommand(a, true),
		newTaskDecideCommand(a, false),
	)
	c.RunE = func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		if len(args) > 0 {
			return usageErrorf(c, "unknown subcommand %q; use one of %s", args[0], strings.Join(names, ", "))
		}
		return usageErrorf(c, "which subcommand? %s", strings.Join(names, ", "))
	}
	return c
}

// taskArg is the Args check of a command that takes one TASK.
func taskArg(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErrorf(c, "want one TASK, got %d argument(s)", len(args))
	}
	return checkTaskArg(c, args[0])
}

// checkTaskArg refuses an empty TASK argument.
func checkTaskArg(c *cobra.Command, id string) error {
	if strings.TrimSpace(id) == "" {
		return usageErrorf(c, "TASK is empty; give the id of a task")
	}
	return nil
}

// withClient dials Temporal for the duration of fn.
func (a *app) withClient(ctx context.Context, fn func(*taskclient.Client) error) error {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := worker.Dial(dctx, a.env.temporalAddress, a.env.namespace, quiet())
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(&taskclient.Client{Temporal: c, TaskQueue: a.env.taskQueue})
}

// withView opens the read side on Postgres for the duration of fn.
func (a *app) withView(ctx context.Context, fn func(*taskview.View) error) error {
	pool, err := store.Connect(ctx, a.env.databaseURL)
	if err != nil {
		return fmt.Errorf("reading tasks: %w", err)
	}
	defer pool.Close()
	return fn(taskview.New(pool))
}

// quiet keeps the SDK's connection chatter out of interactive commands.
func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
