package workflows

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

func TestSearchAttributesAreUpserted(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	standard(env)
	var mu sync.Mutex
	var statuses []string
	var costs []float64
	var turns []int64
	var model, workspace string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		mu.Lock()
		defer mu.Unlock()
		if v, ok := sa.GetKeyword(statusKey); ok {
			statuses = append(statuses, v)
		}
		if v, ok := sa.GetFloat64(costKey); ok {
			costs = append(costs, v)
		}
		if v, ok := sa.GetInt64(turnsKey); ok {
			turns = append(turns, v)
		}
		if v, ok := sa.GetKeyword(modelKey); ok {
			model = v
		}
		if v, ok := sa.GetKeyword(workspaceKey); ok {
			workspace = v
		}
	}).Return(nil)
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
		sendUpdate(env, task.UpdateClose, "close")
	}, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	result(t, env)

	assert.Equal(t, []string{"idle", "running", "closing", "completed"}, dedup(statuses))
	assert.Equal(t, []float64{0, 0.25, 0.5}, dedup(costs))
	assert.Equal(t, []int64{0, 1, 2}, dedup(turns))
	assert.Equal(t, "claude-test", model)
	assert.Equal(t, "/srv/work/t1", workspace)
}

// dedup drops consecutive repeats: what the attributes went through.
func dedup[T comparable](xs []T) []T {
	var out []T
	for _, x := range xs {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

func TestSearchAttributesForRegistration(t *testing.T) {
	t.Parallel()
	assert.Equal(t, map[string]enumspb.IndexedValueType{
		task.SearchStatus:           enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		task.SearchCostUSD:          enumspb.INDEXED_VALUE_TYPE_DOUBLE,
		task.SearchTitle:            enumspb.INDEXED_VALUE_TYPE_TEXT,
		task.SearchTurns:            enumspb.INDEXED_VALUE_TYPE_INT,
		task.SearchModel:            enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		task.SearchWorkspace:        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		task.SearchAwaitingApproval: enumspb.INDEXED_VALUE_TYPE_BOOL,
		task.SearchAwaitingSince:    enumspb.INDEXED_VALUE_TYPE_DATETIME,
		task.SearchAccount:          enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		task.SearchLimitResetsAt:    enumspb.INDEXED_VALUE_TYPE_DATETIME,
	}, SearchAttributes())
}
