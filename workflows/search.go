package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// The typed search attributes TaskWorkflow upserts.
var (
	statusKey    = temporal.NewSearchAttributeKeyKeyword(task.SearchStatus)
	costKey      = temporal.NewSearchAttributeKeyFloat64(task.SearchCostUSD)
	turnsKey     = temporal.NewSearchAttributeKeyInt64(task.SearchTurns)
	modelKey     = temporal.NewSearchAttributeKeyKeyword(task.SearchModel)
	workspaceKey = temporal.NewSearchAttributeKeyKeyword(task.SearchWorkspace)
	awaitingKey  = temporal.NewSearchAttributeKeyBool(task.SearchAwaitingApproval)
	sinceKey     = temporal.NewSearchAttributeKeyTime(task.SearchAwaitingSince)
	titleKey     = temporal.NewSearchAttributeKeyString(task.SearchTitle)
)

// StartSearchAttributes are the search attributes a task starts with: its title, which never
// changes (a run that continues as new keeps it). None for a task with no title.
func StartSearchAttributes(p task.Params) temporal.SearchAttributes {
	if p.Title == "" {
		return temporal.NewSearchAttributes()
	}
	return temporal.NewSearchAttributes(titleKey.ValueSet(p.Title))
}

// SearchAttributes are the custom search attributes TaskWorkflow upserts, with
// their types, as the operator service's AddSearchAttributes takes them. A
// namespace must have all of them before the first task starts: the server
// fails a workflow task that upserts an unknown attribute.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		statusKey.GetName():      statusKey.GetValueType(),
		costKey.GetName():        costKey.GetValueType(),
		turnsKey.GetName():       turnsKey.GetValueType(),
		modelKey.GetName():       modelKey.GetValueType(),
		workspaceKey.GetName():   workspaceKey.GetValueType(),
		awaitingKey.GetName():    awaitingKey.GetValueType(),
		sinceKey.GetName():       sinceKey.GetValueType(),
		titleKey.GetName():       titleKey.GetValueType(),
		accountKey.GetName():     accountKey.GetValueType(),
		limitResetsKey.GetName(): limitResetsKey.GetValueType(),
	}
}

// published are the search attribute values the workflow last upserted (or
// started with), so that it upserts only what changed.
type published struct {
	status, model, workspace          string
	cost                              float64
	turns                             int64
	hasStatus, hasModel, hasWorkspace bool
	hasCost, hasTurns                 bool
	// awaiting and since mirror DroverAwaitingApproval and DroverAwaitingSince; a task that
	// never waited publishes neither.
	awaiting, hasAwaiting bool
	since                 time.Time
}

// seedPublished reads the search attributes the run started with; a run that
// continued as new starts with those of the run before.
func (s *taskState) seedPublished(ctx workflow.Context) {
	sa := workflow.GetTypedSearchAttributes(ctx)
	s.published.status, s.published.hasStatus = sa.GetKeyword(statusKey)
	s.published.model, s.published.hasModel = sa.GetKeyword(modelKey)
	s.published.workspace, s.published.hasWorkspace = sa.GetKeyword(workspaceKey)
	s.published.cost, s.published.hasCost = sa.GetFloat64(costKey)
	s.published.turns, s.published.hasTurns = sa.GetInt64(turnsKey)
	s.published.awaiting, s.published.hasAwaiting = sa.GetBool(awaitingKey)
	s.published.since, _ = sa.GetTime(sinceKey)
}

// publish upserts the search attributes whose values changed. An empty model
// (the CLI's default) is not published.
func (s *taskState) publish(ctx workflow.Context) {
	s.stateChanged()
	p := &s.published
	var updates []temporal.SearchAttributeUpdate
	if st := string(s.status()); !p.hasStatus || p.status != st {
		updates = append(updates, statusKey.ValueSet(st))
		p.status, p.hasStatus = st, true
	}
	if m := s.p.Profile.Model; m != "" && (!p.hasModel || p.model != m) {
		updates = append(updates, modelKey.ValueSet(m))
		p.model, p.hasModel = m, true
	}
	if w := s.p.Workspace; !p.hasWorkspace || p.workspace != w {
		updates = append(updates, workspaceKey.ValueSet(w))
		p.workspace, p.hasWorkspace = w, true
	}
	if c := s.totals.CostUSD; !p.hasCost || p.cost != c {
		updates = append(updates, costKey.ValueSet(c))
		p.cost, p.hasCost = c, true
	}
	if t := int64(s.totals.Turns); !p.hasTurns || p.turns != t {
		updates = append(updates, turnsKey.ValueSet(t))
		p.turns, p.hasTurns = t, true
	}
	since, waiting := s.awaitingSince()
	if waiting != p.awaiting && (waiting || p.hasAwaiting) {
		updates = append(updates, awaitingKey.ValueSet(waiting))
		p.awaiting, p.hasAwaiting = waiting, true
	}
	if waiting && !since.Equal(p.since) {
		updates = append(updates, sinceKey.ValueSet(since))
		p.since = since
	} else if !waiting && !p.since.IsZero() {
		updates = append(updates, sinceKey.ValueUnset())
		p.since = time.Time{}
	}
	updates = s.waitAttributes(updates)
	if len(updates) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("upserting search attributes failed", "error", err)
	}
}
