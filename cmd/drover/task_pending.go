package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
)

// pendingRequest is one row of drover task pending --output json.
type pendingRequest struct {
	TaskID      string          `json:"task_id"`
	RequestID   string          `json:"request_id"`
	Turn        int             `json:"turn"`
	Kind        string          `json:"kind"`
	Tool        string          `json:"tool"`
	Summary     string          `json:"summary"`
	Input       json.RawMessage `json:"input"`
	Suggestions json.RawMessage `json:"suggestions,omitempty"`
	Reasked     bool            `json:"reasked,omitempty"`
	Since       time.Time       `json:"since"`
	Deadline    time.Time       `json:"deadline"`
}

func newTaskPendingCommand(a *app) *cobra.Command {
	var taskID string
	var limit int
	c := &cobra.Command{
		Use:   "pending",
		Short: "List the permission requests waiting for a decision, across tasks, oldest first",
		Args:  noArgs,
	}
	out := addOutputFlags(c, false)
	c.Flags().StringVar(&taskID, "task", "", "only this task's requests")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many (0: all)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if limit < 0 {
			return inputError(fmt.Errorf("--limit: %d is negative; use 0 (all) or more", limit))
		}
		ctx := c.Context()
		pool, err := store.Connect(ctx, a.env.databaseURL)
		if err != nil {
			return fmt.Errorf("task pending: %w", err)
		}
		defer pool.Close()
		reqs, err := store.ListPendingPermissions(ctx, pool, taskID, limit)
		if err != nil {
			return err
		}
		if out.isJSON() {
			rows := make([]pendingRequest, 0, len(reqs))
			for _, r := range reqs {
				rows = append(rows, pendingRequest{TaskID: r.TaskID, RequestID: r.RequestID, Turn: r.Turn, Kind: r.Kind,
					Tool: r.ToolName, Summary: r.Summary, Input: r.Input, Suggestions: r.Suggestions, Reasked: r.Reasked,
					Since: r.CreatedAt, Deadline: r.Deadline})
			}
			return writeJSON(a.stdout, rows)
		}
		if len(reqs) == 0 {
			fmt.Fprintln(a.stdout, "nothing waits for a decision")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tREQUEST\tTURN\tTOOL\tWAITING SINCE\tDEADLINE\tWHAT")
		for _, r := range reqs {
			what := r.Summary
			if r.Reasked {
				what = "(asked again after a retry) " + what
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.TaskID, r.RequestID, r.Turn, r.ToolName,
				r.CreatedAt.Local().Format(time.DateTime), r.Deadline.Local().Format(time.DateTime), clip(what, 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, "\nanswer with: drover task approve TASK REQUEST   or   drover task deny TASK REQUEST --reason WHY")
		return nil
	}
	return c
}
