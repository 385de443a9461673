package taskclient

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// TestArchivedTasksDoNotRun: a task imported from its archive, or archived, is refused by
// Start and Create before Temporal is asked (its client here reaches no server), as a closed
// task; an unknown id goes on to Temporal.
func TestArchivedTasksDoNotRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := pgtest.NewPool(t)
	c := unreachableClient(t)
	c.DB = pool
	st, _ := json.Marshal(task.State{Status: task.StatusCompleted})
	for _, id := range []string{"imported", "archived"} {
		if err := store.RecordTaskState(ctx, pool, id, task.StatusCompleted, st, time.Now(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE tasks SET imported_at = now() WHERE task_id = 'imported'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE tasks SET archived_at = now() WHERE task_id = 'archived'`); err != nil {
		t.Fatal(err)
	}
	p, prompt := task.Params{Workspace: "/w"}, task.Prompt{Text: "again"}
	for _, id := range []string{"imported", "archived"} {
		for name, call := range map[string]func() error{
			"start":  func() error { _, err := c.Start(ctx, id, p, prompt, ""); return err },
			"create": func() error { _, err := c.Create(ctx, id, p, prompt, ""); return err },
		} {
			var ae *temporal.ApplicationError
			if err := call(); !errors.As(err, &ae) || ae.Type() != task.ErrTypeTaskClosed {
				t.Errorf("%s of %s task: %v, want a TaskClosed refusal", name, id, err)
			}
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	var ae *temporal.ApplicationError
	if _, err := c.Start(short, "fresh", p, prompt, ""); err == nil || errors.As(err, &ae) {
		t.Errorf("a fresh task: %v, want Temporal's own error (nothing listens)", err)
	}
}
