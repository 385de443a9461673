package e2e

import (
	"testing"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// A CLI start sends the API nothing that a prompt did not cause: the context window comes from
// what the CLI reports of its turns, not from asking it (which costs a round of count_tokens
// requests). Two tasks make two starts on one host; the API sees their two prompts and nothing
// else, and each task still knows its context window.
func TestACLIStartSendsTheAPIOnlyWhatItsPromptCauses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	e.fake.Enqueue(fa.Reply(fa.Text("one")), fa.Reply(fa.Text("two")))
	ids := []string{e.taskID("start-cost-a"), e.taskID("start-cost-b")}
	for _, id := range ids {
		if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "hello from " + id}, ""); err != nil {
			t.Fatal(err)
		}
		e.waitTurns(id, 1)
	}

	calls := e.fake.Calls()
	if n := len(calls.Class(fa.ClassCountTokens)); n != 0 {
		t.Errorf("the API got %d count_tokens requests, want none", n)
	}
	if main := calls.Class(fa.ClassMain); len(main) != 2 || len(calls) != 2 {
		t.Errorf("the API got %d requests (%d of the main conversations), want the two prompts' only", len(calls), len(main))
	}

	view := taskview.New(e.db())
	for _, id := range ids {
		var window *events.ContextWindow
		var reported int64
		for _, ev := range e.events(id) {
			switch ev.Agent.Type {
			case events.TypeContextWindow:
				window = ev.Agent.ContextWindow
			case events.TypeComplete:
				for _, m := range ev.Agent.Data.Models {
					reported = max(reported, m.ContextWindow)
				}
			}
		}
		if window == nil || reported <= 0 || window.Size != reported {
			t.Errorf("%s: context window %+v, want the size the CLI reported (%d)", id, window, reported)
			continue
		}
		d, err := view.Show(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.ContextWindow == nil || d.ContextWindow.Limit != window.Size || d.ContextWindow.Used != window.Used {
			t.Errorf("%s: task show's context window %+v, want %+v", id, d.ContextWindow, window)
		}
	}
}
