package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

func newTaskPromptCommand(a *app) *cobra.Command {
	var (
		requestID, mode string
		in              promptInput
	)
	c := &cobra.Command{
		Use:   "prompt TASK PROMPT...",
		Short: "Send a task a prompt; it waits for its turn",
		Long: `Send a task a prompt. A prompt sent while a turn runs waits for its own turn.

` + promptHelp,
		Example: `  drover task prompt hello "And now in French"
  drover task prompt hello --prompt-file next.md
  drover task prompt hello "What is in this picture?" --attach img/screen.png`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf(c, "want TASK and PROMPT, got no arguments")
			}
			return checkTaskArg(c, args[0])
		},
	}
	out := addOutputFlags(c, false)
	c.Flags().StringVar(&requestID, "request-id", "", "makes the call idempotent: a retry with the same id is answered once and queues nothing")
	c.Flags().StringVar(&mode, "mode", "", "switch the task to this permission mode from this prompt's turn on: "+modesHelp())
	_ = c.RegisterFlagCompletionFunc("mode", completeModes)
	in.addFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		id := args[0]
		prompt, err := in.prompt(args[1:], a.stdin)
		if err != nil {
			return err
		}
		if mode != "" {
			prompt.Mode = task.PermissionMode(mode)
			if err := task.ValidatePrompt(prompt); err != nil {
				return inputError(err)
			}
		}
		ctx := c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			acc, err := tc.Prompt(ctx, id, prompt, requestID)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, promptAccepted{TaskID: id, PromptAccepted: acc})
			}
			fmt.Fprintf(a.stdout, "task %s: prompt accepted as turn %d (%d ahead of it)\n", id, acc.Turn, acc.Queued)
			return nil
		})
	}
	return c
}
