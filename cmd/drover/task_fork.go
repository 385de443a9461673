package main

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

func newTaskForkCommand(a *app) *cobra.Command {
	var (
		in   promptInput
		turn = -1
		id   string
	)
	c := &cobra.Command{
		Use:   "fork TASK --at-turn N [--id NEW] [PROMPT...]",
		Short: "Start a new task from a managed task's turn, conversation and files",
		Long: `Start a new task from the end of turn N of a managed task (one started with --repo):
its worktree starts from turn N's checkpoint on a branch of its own (drover/NEW), and
its conversation resumes at turn N's last message in a session of its own, so that
TASK goes on untouched. It takes TASK's repository and settings. With a PROMPT the
new task runs it as its first turn; without one it waits for a prompt.

` + promptHelp,
		Example: `  drover task fork fix-login --at-turn 1 --id fix-login-b "Try it with a token instead"`,
		Args:    argsBetween(1, -1, "TASK [PROMPT...]"),
	}
	out := addOutputFlags(c, false)
	c.Flags().IntVar(&turn, "at-turn", -1, "the turn whose end the new task starts from (0: TASK's start)")
	c.Flags().StringVar(&id, "id", "", "the new task's id (default: a new uuid)")
	in.addFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		src := args[0]
		if err := checkTaskArg(c, src); err != nil {
			return err
		}
		if turn < 0 {
			return usageErrorf(c, "--at-turn N is required: the turn to start from (0: the task's start)")
		}
		if id == "" {
			id = uuid.NewString()
		}
		var prompt task.Prompt
		if len(args) > 1 || in.file != "" {
			p, err := in.prompt(args[1:], a.stdin)
			if err != nil {
				return err
			}
			prompt = p
		}
		ctx := c.Context()
		pool, err := store.Connect(ctx, a.env.databaseURL)
		if err != nil {
			return fmt.Errorf("forking task %s: %w", src, err)
		}
		defer pool.Close()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			withDB := *tc
			withDB.DB = pool
			acc, err := withDB.Fork(ctx, src, id, turn, prompt)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, struct {
					TaskID     string              `json:"task_id"`
					ForkedFrom string              `json:"forked_from"`
					AtTurn     int                 `json:"at_turn"`
					Prompt     task.PromptAccepted `json:"prompt,omitzero"`
				}{id, src, turn, acc})
			}
			fmt.Fprintf(a.stdout, "task %s: forked from task %s at the end of turn %d\n", id, src, turn)
			if acc.Turn > 0 {
				fmt.Fprintf(a.stdout, "prompt accepted as turn %d; follow it with: drover task watch %s\n", acc.Turn, id)
			}
			return nil
		})
	}
	return c
}
