package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// TestProductionLayout runs what docker-compose.yml deploys, natively: Temporal's schema step,
// its server on Postgres and the namespace step (all from deploy/temporal), `drover migrate`, and
// two `drover worker` hosts with CLI config folders of their own and a shared workspace. A task
// of two turns runs through it end to end with the real CLI; its turns complete, its events are
// logged, and its workflow history lives in Temporal's Postgres database.
func TestProductionLayout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	c.start(0)
	c.start(1)
	// Both hosts poll their turn queues on the production server.
	for _, h := range c.hosts {
		c.waitFor("host "+h.id+" to poll its queue", func() bool {
			d, err := c.tc.Temporal.DescribeTaskQueue(c.ctx, task.HostQueue(h.id), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
			return err == nil && len(d.GetPollers()) > 0
		})
	}

	c.fake.Enqueue(fa.Reply(fa.Text("first answer")), fa.Reply(fa.Text("second answer")))
	id := c.taskID("production")
	if _, err := c.tc.Start(c.ctx, id, c.params(), task.Prompt{Text: "first prompt"}, ""); err != nil {
		t.Fatal(err)
	}
	c.waitTurns(id, 1)
	if _, err := c.tc.Prompt(c.ctx, id, task.Prompt{Text: "second prompt"}, ""); err != nil {
		t.Fatal(err)
	}
	st := c.waitTurns(id, 2)
	if st.Totals.Turns != 2 || st.Totals.FailedTurns != 0 || st.LastError != "" {
		t.Fatalf("state after two turns: %+v", st)
	}

	// The model saw the first exchange with the second prompt.
	reqs := c.fake.MainRequests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].LastUserText(), "second prompt") || len(reqs[1].Messages) < 3 {
		t.Fatalf("main requests: %d; the second must carry the first exchange", len(reqs))
	}

	// The events are logged: both prompts, both answers, one complete per turn, one session.
	var users, texts []string
	var completes []events.AgentEvent
	for _, ev := range c.events(id) {
		switch ev.Agent.Type {
		case events.TypeUserMessage:
			users = append(users, ev.Agent.Text)
		case events.TypeComplete:
			completes = append(completes, ev.Agent)
		}
	}
	for _, m := range messagesOf(c.events(id)) {
		texts = append(texts, m.Text)
	}
	if strings.Join(users, "|") != "first prompt|second prompt" {
		t.Errorf("user messages in the log: %q", users)
	}
	if strings.Join(texts, "|") != "first answer|second answer" {
		t.Errorf("answers in the log: %q", texts)
	}
	if len(completes) != 2 || completes[0].Data.SessionID == "" || completes[1].Data.SessionID != completes[0].Data.SessionID {
		t.Fatalf("complete events: %+v", completes)
	}

	// The session lives on the host that ran the turns, each prompt once; the other host never
	// saw it.
	ran := c.hostOfQueue(st.HostQueue)
	if ran < 0 {
		t.Fatalf("the task's host queue %q is none of the cluster's hosts", st.HostQueue)
	}
	entries := c.transcriptOf(ran, st.SessionID)
	for _, p := range []string{"first prompt", "second prompt"} {
		if n := promptCount(entries, p); n != 1 {
			t.Errorf("%q appears %d times in the transcript on %s", p, n, c.hosts[ran].id)
		}
	}

	// The workflow's history is in Temporal's Postgres database, its listing in the visibility
	// database, and both answer through the server.
	run, err := c.tc.Temporal.DescribeWorkflow(c.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	runID := run.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	historyEvents := 0
	it := c.tc.Temporal.GetWorkflowHistory(c.ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			t.Fatal(err)
		}
		historyEvents++
	}
	var nodes, visible int
	c.temporalQuery(c.temporal.Database(), `SELECT count(*) FROM history_node n JOIN current_executions e ON n.tree_id = e.run_id
		WHERE e.workflow_id = $1 AND e.run_id = decode(replace($2, '-', ''), 'hex')`, &nodes, id, runID)
	if nodes == 0 || historyEvents < 10 {
		t.Fatalf("history: %d nodes in Postgres for run %s, %d events through the server", nodes, runID, historyEvents)
	}
	c.waitFor("the task in the visibility database", func() bool {
		c.temporalQuery(c.temporal.VisibilityDatabase(), `SELECT count(*) FROM executions_visibility WHERE workflow_id = $1`, &visible, id)
		return visible == 1
	})
	c.waitFor("the task listed by its turns", func() bool {
		list, err := c.tc.Temporal.ListWorkflow(c.ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s' AND %s = 2", id, task.SearchTurns)})
		return err == nil && len(list.GetExecutions()) == 1
	})
}

// temporalQuery scans the one row of sql, run on database db of the cluster's Temporal server.
func (c *cluster) temporalQuery(db, sql string, dest any, args ...any) {
	c.t.Helper()
	url, err := c.temporal.DatabaseURL(db)
	if err != nil {
		c.t.Fatal(err)
	}
	conn, err := pgx.Connect(c.ctx, url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(c.ctx)
	if err := conn.QueryRow(c.ctx, sql, args...).Scan(dest); err != nil {
		c.t.Fatalf("%s on %s: %v", sql, db, err)
	}
}
