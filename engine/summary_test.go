package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// The inbox (drover task pending, the HTTP API's approvals: taskview from the request's record)
// and the timeline (the permission_request event in the log) say in the same words what each
// request asks: a command of several lines, a plan, a question, an MCP tool's call, a search.
func TestInboxAndTimelineSummariesAgree(t *testing.T) {
	t.Parallel()
	got := &answers{}
	r, _ := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			ask(c, got, "bash", "Bash", map[string]any{"command": "go test ./...\ngo vet ./..."})
			l, _ := c.Request("plan", `{"subtype":"can_use_tool","tool_name":"ExitPlanMode","input":{"plan":"\n## Ship it\n1. build","planFilePath":"/p.md"},"tool_use_id":"toolu_plan","requires_user_interaction":true}`)
			got.put("plan", l)
			l, _ = c.Request("q", `{"subtype":"can_use_tool","tool_name":"AskUserQuestion","input":{"questions":[{"question":"Which database?","header":"DB","options":[{"label":"Postgres"},{"label":"SQLite"}]}]},"tool_use_id":"toolu_q","requires_user_interaction":true}`)
			got.put("q", l)
			ask(c, got, "mcp", "mcp__srv__thing", map[string]any{"x": 1})
			ask(c, got, "grep", "Grep", map[string]any{"pattern": "TODO", "path": "/w"})
			c.Reply("done")
		})
	})
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Supervised))
		done <- err
	}()
	view := taskview.New(r.db)
	inbox := map[string]string{} // request id → the inbox's summary
	for len(inbox) < 5 {
		p := r.nextPending(view, inbox)
		inbox[p.RequestID] = p.Summary
		row := r.waitPending(1)
		r.decide(row, task.OutcomeAllowed, func(d *task.DecisionRecord) {
			if p.Kind == task.KindQuestion {
				d.Answers = map[string][]string{"Which database?": {"Postgres"}}
			}
		})
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	timeline := map[string]string{}
	for _, ev := range r.events() {
		if ev.Type == events.TypePermissionRequest && ev.Permission != nil {
			timeline[ev.PendingID] = ev.Permission.Summary
		}
	}
	var summaries []string
	for id, s := range inbox {
		if timeline[id] != s {
			t.Errorf("request %s: the inbox says %q, the timeline %q", id, s, timeline[id])
		}
		summaries = append(summaries, s)
	}
	slices.Sort(summaries)
	want := []string{"Ship it", "TODO", "Which database?", "go test ./... …", "srv: thing"}
	if !slices.Equal(summaries, want) {
		t.Errorf("summaries %q, want %q", summaries, want)
	}
}

// nextPending waits for a request of the task that the inbox shows and seen does not hold.
func (r *rig) nextPending(view *taskview.View, seen map[string]string) taskview.PendingRequest {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := view.Pending(r.ctx, r.taskID, 0)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, p := range ps {
			if _, ok := seen[p.RequestID]; !ok {
				return p
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.t.Fatalf("no new request in the inbox after %d", len(seen))
	return taskview.PendingRequest{}
}
