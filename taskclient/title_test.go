package taskclient

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workflows"
)

// A task's title is its search attribute in Temporal from its start (witness: Temporal's own
// description of the workflow), the first line of the prompt when none is given; a namespace
// that lacks the attribute still starts the task.
func TestTitleIsASearchAttribute(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(srv *devserver.Server) client.Client {
		tc, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		return tc
	}
	tc := dial(temporaltest.Start(t, devserver.SearchAttributeFlags(workflows.SearchAttributes())))
	c := &Client{Temporal: tc, TaskQueue: "no-worker"}
	for id, want := range map[string]struct{ title, prompt, attr string }{
		"given":   {"Release notes for 2.0", "write them\nall", "Release notes for 2.0"},
		"default": {"", "\n  Fix the flaky test  \nthen push", "Fix the flaky test"},
	} {
		if _, err := c.Create(ctx, id, task.Params{Workspace: "/w", Title: want.title}, task.Prompt{Text: want.prompt}, ""); err != nil {
			t.Fatal(err)
		}
		desc, err := tc.DescribeWorkflow(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		var got string
		p := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[task.SearchTitle]
		if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &got) != nil || got != want.attr {
			t.Errorf("task %s: %s = %q, want %q", id, task.SearchTitle, got, want.attr)
		}
	}
	bare := &Client{Temporal: dial(temporaltest.Start(t, nil)), TaskQueue: "no-worker"}
	if _, err := bare.Create(ctx, "t1", task.Params{Workspace: "/w"}, task.Prompt{Text: "hello"}, ""); err != nil {
		t.Fatalf("a namespace without %s refused the task: %v", task.SearchTitle, err)
	}
}
