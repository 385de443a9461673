package taskclient

import (
	"context"
	"fmt"

	"github.com/drover-run/drover/task"
)

// Rewind takes an idle managed task back to the end of turn (0: its start), conversation and
// files (task.UpdateRewind): its next turn resumes there. The later turns stay in the task's
// history and their checkpoints are kept aside.
func (c *Client) Rewind(ctx context.Context, taskID string, turn int) (task.Rewound, error) {
	var out task.Rewound
	if err := c.update(ctx, taskID, task.UpdateRewind, "", &out, task.RewindRequest{Turn: turn}); err != nil {
		return out, fmt.Errorf("rewinding task %s to turn %d: %w", taskID, turn, err)
	}
	return out, nil
}
