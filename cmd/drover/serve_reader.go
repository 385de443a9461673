package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

// reader is the API's read side until the shared one (taskview) serves it: listings from
// Temporal's visibility, a task from its workflow's state, requests from Postgres.
type reader struct {
	tc   *taskclient.Client
	pool *pgxpool.Pool
}

func newReader(tc *taskclient.Client, pool *pgxpool.Pool) api.Reader {
	return &reader{tc: tc, pool: pool}
}

func (r *reader) List(ctx context.Context, f api.Filter) ([]api.Summary, error) {
	q := ""
	if f.Status != "" {
		q = fmt.Sprintf("%s = '%s'", task.SearchStatus, f.Status)
	}
	if f.AwaitingApproval {
		if q != "" {
			q += " AND "
		}
		q += task.SearchAwaitingApproval + " = true"
	}
	ss, err := r.tc.List(ctx, q, f.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.Summary, 0, len(ss))
	for _, s := range ss {
		out = append(out, api.Summary{ID: s.TaskID, Status: task.Status(s.Status), Model: s.Model, Workspace: s.Workspace,
			CreatedAt: s.Started, Turns: int(s.Turns), CostUSD: s.CostUSD})
	}
	return out, nil
}

func (r *reader) Show(ctx context.Context, id string) (api.Detail, error) {
	st, err := r.tc.State(ctx, id)
	if err != nil {
		return api.Detail{}, err
	}
	d := api.Detail{Summary: api.Summary{ID: id, Status: st.Status, Mode: st.PermissionMode, Model: st.Model,
		Workspace: st.Workspace, Turns: st.Totals.Turns, CostUSD: st.Totals.CostUSD, PendingApprovals: len(st.Awaiting),
		LastError: st.LastError, Wait: st.Wait, BudgetExhausted: st.BudgetExhausted}}
	d.Pending, err = r.Pending(ctx, id, 0)
	return d, err
}

func (r *reader) Pending(ctx context.Context, id string, limit int) ([]api.PendingRequest, error) {
	rows, err := store.ListPendingPermissions(ctx, r.pool, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.PendingRequest, 0, len(rows))
	for _, p := range rows {
		out = append(out, api.PendingRequest{TaskID: p.TaskID, RequestID: p.RequestID, Turn: p.Turn, Kind: task.RequestKind(p.Kind),
			Tool: p.ToolName, Summary: p.Summary, Since: p.CreatedAt, Deadline: p.Deadline})
	}
	return out, nil
}
