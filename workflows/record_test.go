//go:build record

package workflows

// Records testdata/task_history.json from a real Temporal dev server:
//
//	go test -tags record -run TestRecordHistory ./workflows/
//
// The temporal CLI is $DROVER_TEMPORAL_BIN, or the pinned one scripts/tools.sh installs.

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/task"
)

func temporalBin(t *testing.T) string {
	bin := os.Getenv("DROVER_TEMPORAL_BIN")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "drover", "tools", "temporal-v1.5.1", "temporal")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("temporal CLI not found at %s: run scripts/tools.sh", bin)
	}
	return bin
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// recordHost is a stub executor host: turn 1 completes at once, turn 2 runs
// until it is interrupted.
type recordHost struct {
	queue       string
	turnStarted chan int
	interrupted chan struct{}
	once        sync.Once
}

func (h *recordHost) assignHost(context.Context) (string, error) { return h.queue, nil }

func (h *recordHost) runTurn(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
	h.turnStarted <- in.Turn
	res := task.RunTurnResult{
		Status:          task.TurnCompleted,
		SessionID:       "0b9f6a52-1d3e-4c55-8f0e-6d1c2b3a4f50",
		LastMessageUUID: uuid.NewSHA1(uuid.NameSpaceURL, []byte("result/"+strconv.Itoa(in.Turn))).String(),
		CostUSD:         0.0125,
		InputTokens:     120,
		OutputTokens:    40,
		DurationMS:      900,
		NumTurns:        1,
		Attempt:         int(activity.GetInfo(ctx).Attempt),
	}
	if in.Turn == 1 {
		return res, nil
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-h.interrupted:
			res.Status = task.TurnInterrupted
			return res, nil
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		case <-ctx.Done():
			return task.RunTurnResult{}, ctx.Err()
		}
	}
}

func (h *recordHost) interruptTurn(context.Context, task.InterruptTurnInput) error {
	h.once.Do(func() { close(h.interrupted) })
	return nil
}

func (h *recordHost) stopExecutor(context.Context, task.InterruptTurnInput) error { return nil }

func TestRecordHistory(t *testing.T) {
	bin := temporalBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logger := testLogger(t)

	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  bin,
		ClientOptions: &client.Options{HostPort: "127.0.0.1:" + freePort(t), Logger: logger},
		LogLevel:      "error",
		SearchAttributes: temporal.NewSearchAttributes(
			statusKey.ValueSet(""), costKey.ValueSet(0), turnsKey.ValueSet(0),
			modelKey.ValueSet(""), workspaceKey.ValueSet("")),
		ExtraArgs: []string{"--http-port", freePort(t), "--metrics-port", freePort(t)},
		Stdout:    testWriter{t},
		Stderr:    testWriter{t},
	})
	require.NoError(t, err)
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Logf("stopping the dev server: %v", err)
		}
	}()
	c := srv.Client()

	shared := "drover-record-" + uuid.NewString()
	host := &recordHost{queue: task.HostQueue("record-host"), turnStarted: make(chan int, 4), interrupted: make(chan struct{})}
	sw := worker.New(c, shared, worker.Options{})
	Register(sw)
	sw.RegisterActivityWithOptions(host.assignHost, activity.RegisterOptions{Name: task.ActivityAssignHost})
	hw := worker.New(c, host.queue, worker.Options{})
	hw.RegisterActivityWithOptions(host.runTurn, activity.RegisterOptions{Name: task.ActivityRunTurn})
	cw := worker.New(c, task.ControlQueue(host.queue), worker.Options{})
	cw.RegisterActivityWithOptions(host.interruptTurn, activity.RegisterOptions{Name: task.ActivityInterruptTurn})
	cw.RegisterActivityWithOptions(host.stopExecutor, activity.RegisterOptions{Name: task.ActivityStopExecutor})
	for _, w := range []worker.Worker{sw, hw, cw} {
		require.NoError(t, w.Start())
		defer w.Stop()
	}

	taskID := "task-record-1"
	p := task.Params{Workspace: "/srv/drover/work/record", Profile: task.Profile{Model: "claude-sonnet-4-5"}}

	// A new task: Update-with-Start carrying its first prompt.
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       taskID,
		TaskQueue:                shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, task.WorkflowName, p)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: task.UpdatePrompt, UpdateID: "prompt-1",
			Args: []any{task.Prompt{Text: "List the files in the workspace."}}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	require.NoError(t, err)
	var first task.PromptAccepted
	require.NoError(t, h.Get(ctx, &first))
	run, err := start.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, task.PromptAccepted{Turn: 1, PromptUUID: PromptUUID(run.GetRunID(), 1)}, first,
		"the prompt uuid derives from the first run id")
	require.Equal(t, 1, <-host.turnStarted)

	// An empty prompt is rejected before it reaches history.
	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: taskID, UpdateName: task.UpdatePrompt, UpdateID: "prompt-empty",
		Args: []any{task.Prompt{Text: "  "}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "empty prompt: %v", err)
	assert.Equal(t, task.ErrTypeInvalidPrompt, appErr.Type())

	prompt2 := client.UpdateWorkflowOptions{
		WorkflowID: taskID, UpdateName: task.UpdatePrompt, UpdateID: "prompt-2",
		Args: []any{task.Prompt{Text: "Now explain the build."}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	}
	h, err = c.UpdateWorkflow(ctx, prompt2)
	require.NoError(t, err)
	var second task.PromptAccepted
	require.NoError(t, h.Get(ctx, &second))
	assert.Equal(t, 2, second.Turn)
	require.Equal(t, 2, <-host.turnStarted)

	// The same update id again is the same update, not a third prompt.
	h, err = c.UpdateWorkflow(ctx, prompt2)
	require.NoError(t, err)
	var again task.PromptAccepted
	require.NoError(t, h.Get(ctx, &again))
	assert.Equal(t, second, again)

	v, err := c.QueryWorkflow(ctx, taskID, "", task.QueryState)
	require.NoError(t, err)
	var st task.State
	require.NoError(t, v.Get(&st))
	assert.Equal(t, task.StatusRunning, st.Status)
	assert.Equal(t, 2, st.RunningTurn)
	assert.Equal(t, host.queue, st.HostQueue)
	assert.Equal(t, 1, st.Totals.Turns)

	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: taskID, UpdateName: task.UpdateInterrupt, UpdateID: "interrupt-1", WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	var ir task.InterruptResult
	require.NoError(t, h.Get(ctx, &ir))
	assert.Equal(t, task.InterruptResult{Interrupted: true, Turn: 2}, ir)

	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: taskID, UpdateName: task.UpdateClose, UpdateID: "close-1", WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))

	var final task.State
	require.NoError(t, c.GetWorkflow(ctx, taskID, run.GetRunID()).Get(ctx, &final))
	assert.Equal(t, task.StatusCompleted, final.Status)
	assert.Equal(t, 2, final.Totals.Turns)
	assert.InDelta(t, 0.025, final.Totals.CostUSD, 1e-9)

	desc, err := c.DescribeWorkflowExecution(ctx, taskID, run.GetRunID())
	require.NoError(t, err)
	indexed := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for _, name := range []string{task.SearchStatus, task.SearchCostUSD, task.SearchTurns, task.SearchModel, task.SearchWorkspace} {
		assert.Contains(t, indexed, name, "search attribute %s is set", name)
	}

	rig := &serverRig{t: t, ctx: ctx, c: c}
	writeHistory(t, rig.history(taskID, run.GetRunID()), filepath.Join("testdata", historyFile))
}
