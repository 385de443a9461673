package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

// A turn its host does not start within the schedule-to-start bound stays with that host while
// the host beats and takes work (it is busy with other tasks' turns), without spending a move;
// a host that does not beat any more loses the turn to another.
func TestTurnWaitsForABusyHostAndLeavesADeadOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		alive   bool
		queues  []string
		assigns int
	}{
		{"busy", true, []string{hostA, hostA, hostA}, 1},
		{"dead", false, []string{hostA, hostB}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, defaultLimits)
			rec := &recorder{}
			rec.mockHosts(env, hostA, hostB)
			rec.mockControl(env)
			var asked []string
			env.OnActivity(task.ActivityHostTakesWork, mock.Anything, mock.Anything).Return(
				func(_ context.Context, queue string) (bool, error) {
					asked = append(asked, queue)
					return tc.alive, nil
				})
			notStarted := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
				if c.Queue == hostA && len(rec.runCalls()) <= 2 {
					return task.RunTurnResult{}, notStarted
				}
				return completeTurn(c)
			})
			env.RegisterDelayedCallback(func() {
				sendPrompt(env, "p1", "one")
				sendUpdate(env, task.UpdateClose, "close")
			}, 0)
			env.ExecuteWorkflow(task.WorkflowName, params())
			st := result(t, env)

			var queues []string
			for _, c := range rec.runCalls() {
				queues = append(queues, c.Queue)
			}
			require.Equal(t, tc.queues, queues)
			assert.Len(t, rec.assignCalls(), tc.assigns)
			assert.Equal(t, hostA, asked[0], "the host that did not start the turn is the one asked about")
			assert.Equal(t, 1, st.Totals.Turns)
			assert.Zero(t, st.Totals.FailedTurns)
		})
	}
}
