package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskview"
)

func newTaskExportCommand(a *app) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "export TASK",
		Short: "Write a task's archive: its events, turns, costs and decisions in one file",
		Long: `Write a task's archive, the file the archive job writes when a finished task's
retention passes: gzip-compressed JSON Lines with the task's recorded state, turns,
attempt costs, decisions, session mirror ids and every event, read from one snapshot.
It changes nothing in Postgres. Without --file it writes TASK.jsonl.gz in the current
folder; --file - writes to standard output.`,
		Example: `  drover task export 3f2a…
  drover task export 3f2a… --file /backups/3f2a.jsonl.gz
  drover task export 3f2a… --file - | gunzip | head`,
		Args: taskArg,
	}
	c.Flags().StringVarP(&file, "file", "f", "", "where to write the archive (default TASK.jsonl.gz; - for standard output)")
	c.RunE = func(c *cobra.Command, args []string) error {
		id, ctx := args[0], c.Context()
		return a.withView(ctx, func(v *taskview.View) error {
			if file == "-" {
				_, err := archive.Export(ctx, v.Pool, id, a.stdout)
				return notFound(id, err)
			}
			if file == "" {
				file = archive.FileName(id)
			}
			if err := archive.WriteFile(ctx, v.Pool, id, file); err != nil {
				return notFound(id, err)
			}
			abs, _ := filepath.Abs(file)
			fmt.Fprintf(a.stdout, "task %s written to %s\n", id, abs)
			return nil
		})
	}
	return c
}

// notFound says in a person's words that Postgres knows no such task.
func notFound(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &taskview.NotFoundError{TaskID: id}
	}
	return err
}

func newTaskImportCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "import FILE",
		Short: "Bring a task back from its archive, to read (list, show, watch), not to run",
		Long: `Bring a task back from its archive (written by drover task export or by the
archive job): afterwards drover task list, show and watch, the HTTP API and the console
show it as before it was archived. It is marked imported and never runs again: its
session is not resumed and a prompt to it is refused. A task Postgres still knows is
refused; so is a file that is not a whole archive, and then nothing is written.`,
		Example: `  drover task import /var/lib/drover/archive/3f2a….jsonl.gz`,
		Args:    argsBetween(1, 1, "FILE"),
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx := c.Context()
		f, err := os.Open(args[0])
		if err != nil {
			return fmt.Errorf("importing: %w", err)
		}
		defer f.Close()
		return a.withView(ctx, func(v *taskview.View) error {
			sum, err := archive.Import(ctx, v.Pool, f)
			if errors.Is(err, store.ErrTaskExists) {
				return fmt.Errorf("task %s is in Postgres already; nothing was imported", sum.TaskID)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "task %s imported: %d events, %d turns, %d decisions (read it with drover task show %s)\n",
				sum.TaskID, sum.Rows[store.RowEvent], sum.Rows[store.RowTurn], sum.Rows[store.RowDecision], sum.TaskID)
			return nil
		})
	}
	return c
}
