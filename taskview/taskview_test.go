package taskview_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// turn records one accounting row, as the engine's commit leaves it (finished) or as a running
// attempt does.
func turn(t *testing.T, db *pgxpool.Pool, taskID string, n int, prompt, status string, cost float64, in, out int64, started time.Time) {
	t.Helper()
	var finished *time.Time
	if status != "running" {
		f := started.Add(time.Second)
		finished = &f
	}
	_, err := db.Exec(t.Context(), `INSERT INTO task_turns (task_id, turn, prompt, status, cost_usd, input_tokens,
		output_tokens, started_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		taskID, n, prompt, status, cost, in, out, started, finished)
	must(t, err)
}

func ask(t *testing.T, db *pgxpool.Pool, taskID string, n int, tool, summary string, suggestions json.RawMessage) store.PermissionRequest {
	t.Helper()
	r, _, err := store.AskPermission(t.Context(), db, store.Ask{TaskID: taskID, RequestID: uuid.NewString(), Turn: n,
		Attempt: 1, CLIRequestID: uuid.NewString(), Kind: "tool", ToolName: tool, Input: json.RawMessage(`{"command":"` + summary + `"}`),
		InputHash: uuid.NewString(), Summary: summary, Suggestions: suggestions, Deadline: time.Now().Add(time.Hour)})
	must(t, err)
	return r
}

func record(t *testing.T, db *pgxpool.Pool, taskID string, st task.State, at time.Time, seq int64) {
	t.Helper()
	b, err := json.Marshal(st)
	must(t, err)
	must(t, store.RecordTaskState(t.Context(), db, taskID, st.Status, b, at, seq))
}

// The read side answers from Postgres alone: each task's recorded state with its turns'
// accounting and its waiting requests, filtered by status, by waiting requests and by text.
func TestListAndShow(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	v := taskview.New(db)
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)

	// t1: recorded idle, supervised, two finished turns, two requests waiting.
	record(t, db, "t1", task.State{Status: task.StatusIdle, Workspace: "/w/alpha", Model: "claude-test",
		PermissionMode: task.Supervised, LastError: "turn 1 failed once", Budget: task.Budget{MaxTurns: 9}}, base, 1)
	turn(t, db, "t1", 1, "refactor the parser", "completed", 0.25, 100, 20, base)
	turn(t, db, "t1", 2, "then the lexer", "failed", 0.5, 300, 40, base.Add(time.Minute))
	first := ask(t, db, "t1", 2, "Bash", "make deploy", json.RawMessage(`[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make deploy"}],"behavior":"allow","destination":"session"}]`))
	second := ask(t, db, "t1", 2, "Write", "notes.md", nil)
	// t2: no state recorded yet, a turn running: running, and newer.
	turn(t, db, "t2", 1, "write the docs", "running", 0, 0, 0, base.Add(10*time.Minute))
	_, _, err := store.AppendEvents(ctx, db, "t1", []store.EventInput{
		{Turn: 2, Attempt: 1, Type: "context_window", Payload: json.RawMessage(`{"type":"context_window","context_window_size":200000,"context_window_used":1500}`)},
		{Turn: 2, Attempt: 1, Type: "context_window", Payload: json.RawMessage(`{"type":"context_window","context_window_size":200000,"context_window_used":4200}`)},
	})
	must(t, err)

	all, err := v.List(ctx, taskview.Filter{})
	must(t, err)
	if len(all) != 2 || all[0].ID != "t2" || all[1].ID != "t1" {
		t.Fatalf("list = %+v, want t2 then t1", all)
	}
	t1 := all[1]
	if t1.Status != task.StatusIdle || t1.Mode != task.Supervised || t1.Model != "claude-test" || t1.Workspace != "/w/alpha" ||
		t1.Turns != 2 || t1.CostUSD != 0.75 || t1.PendingApprovals != 2 || t1.WaitingSince == nil ||
		!t1.WaitingSince.Equal(first.CreatedAt) || t1.LastError != "turn 1 failed once" || t1.Budget == nil || t1.Budget.MaxTurns != 9 {
		t.Errorf("t1 = %+v", t1)
	}
	if t2 := all[0]; t2.Status != task.StatusRunning || t2.Turns != 1 || t2.PendingApprovals != 0 || t2.WaitingSince != nil {
		t.Errorf("t2 = %+v, want running with one turn and nothing waiting", t2)
	}

	for name, c := range map[string]struct {
		f    taskview.Filter
		want []string
	}{
		"status":            {taskview.Filter{Status: task.StatusRunning}, []string{"t2"}},
		"awaiting approval": {taskview.Filter{AwaitingApproval: true}, []string{"t1"}},
		"text of a prompt":  {taskview.Filter{Text: "LEXER"}, []string{"t1"}},
		"text of the id":    {taskview.Filter{Text: "t2"}, []string{"t2"}},
		"no match":          {taskview.Filter{Text: "nothing%like_this"}, nil},
		"limit":             {taskview.Filter{Limit: 1}, []string{"t2"}},
	} {
		got, err := v.List(ctx, c.f)
		must(t, err)
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		if len(ids) != len(c.want) || (len(ids) > 0 && ids[0] != c.want[0]) {
			t.Errorf("%s: %v, want %v", name, ids, c.want)
		}
	}

	d, err := v.Show(ctx, "t1")
	must(t, err)
	if len(d.Turns) != 2 || d.Turns[1].Prompt != "then the lexer" || d.Turns[1].FinishedAt == nil || d.FailedTurns != 1 ||
		d.Tokens.Input != 400 || d.Tokens.Output != 60 || d.ContextWindow == nil || d.ContextWindow.Used != 4200 ||
		d.ContextWindow.Limit != 200000 {
		t.Errorf("show t1 = %+v", d)
	}
	if len(d.Pending) != 2 || d.Pending[0].RequestID != first.RequestID || d.Pending[1].RequestID != second.RequestID {
		t.Fatalf("pending = %+v, want both requests oldest first", d.Pending)
	}
	if sg := d.Pending[0].Suggestions; len(sg) != 1 || sg[0].Key != "1" || sg[0].Label != "allow Bash(make deploy)" {
		t.Errorf("suggestions = %+v", sg)
	}
	b, err := json.Marshal(d)
	must(t, err)
	var asJSON map[string]any
	must(t, json.Unmarshal(b, &asJSON))
	for _, k := range []string{"id", "status", "mode", "turns", "cost_usd", "pending_approvals", "waiting_since", "tokens", "context_window", "pending"} {
		if _, ok := asJSON[k]; !ok {
			t.Errorf("the detail's JSON has no %q: %s", k, b)
		}
	}

	var nf *taskview.NotFoundError
	if _, err := v.Show(ctx, "nobody"); !errors.As(err, &nf) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("show of an unknown task: %v", err)
	}
}

// A decision that names no request is about the task's only waiting request; none, or several,
// is said plainly. A request whose decision is recorded no longer waits for anybody.
func TestOnlyPending(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	v := taskview.New(db)
	first := ask(t, db, "t1", 1, "Bash", "ls", nil)
	second := ask(t, db, "t1", 1, "Bash", "pwd", nil)

	var op *taskview.OnlyPendingError
	if _, err := v.OnlyPending(ctx, "t1"); !errors.As(err, &op) || len(op.Waiting) != 2 {
		t.Fatalf("two waiting: %v", err)
	}
	if _, err := store.RecordDecision(ctx, db, "t1", first.RequestID, json.RawMessage(`{"allow":true}`), "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.RecordDecision(ctx, db, "t1", first.RequestID, json.RawMessage(`{"allow":false}`), "dave"); !errors.Is(err, store.ErrAlreadyDecided) {
		t.Errorf("a second decision: %v, want ErrAlreadyDecided", err)
	}
	if d, err := v.Show(ctx, "t1"); err != nil || len(d.Pending) != 1 || len(d.Deciding) != 1 ||
		d.Deciding[0].RequestID != first.RequestID || !d.Deciding[0].Allow || d.Deciding[0].By != "carol" {
		t.Errorf("show after one decision: %+v, %v", d, err)
	}
	r, err := v.OnlyPending(ctx, "t1")
	if err != nil || r.RequestID != second.RequestID {
		t.Fatalf("one waiting: %+v, %v; want %s", r, err, second.RequestID)
	}
	rec, err := store.RecordDecision(ctx, db, "t1", second.RequestID, json.RawMessage(`{"allow":true}`), "carol")
	must(t, err)
	// A decision the task could not be told of is withdrawn, and only that one.
	must(t, store.WithdrawDecision(ctx, db, "t1", second.RequestID, rec.RequestedAt.Add(-time.Second)))
	if _, err := v.OnlyPending(ctx, "t1"); !errors.As(err, &op) {
		t.Fatalf("withdrawing another decision withdrew this one: %v", err)
	}
	must(t, store.WithdrawDecision(ctx, db, "t1", second.RequestID, rec.RequestedAt))
	if r, err := v.OnlyPending(ctx, "t1"); err != nil || r.RequestID != second.RequestID {
		t.Fatalf("after the withdrawal: %+v, %v; want %s waiting again", r, err, second.RequestID)
	}
	_, err = store.RecordDecision(ctx, db, "t1", second.RequestID, json.RawMessage(`{"allow":true}`), "carol")
	must(t, err)
	if _, err := v.OnlyPending(ctx, "t1"); !errors.As(err, &op) || len(op.Waiting) != 0 {
		t.Errorf("none waiting: %v", err)
	} else if !strings.Contains(err.Error(), "request "+second.RequestID+" (Bash) was already decided by carol at ") ||
		!strings.Contains(err.Error(), "(allow, recorded; the task's worker applies it)") {
		// None waits: the error says who decided the last one.
		t.Errorf("none waiting says %q", err)
	}
	var nf *taskview.NotFoundError
	if _, err := v.OnlyPending(ctx, "nobody"); !errors.As(err, &nf) {
		t.Errorf("an unknown task: %v", err)
	}
	all, err := v.Pending(ctx, "", 0)
	must(t, err)
	if len(all) != 0 {
		t.Errorf("pending = %+v, want none: both have a recorded decision", all)
	}
}

// A record older than the one stored changes nothing: a retried write does not go back in time.
func TestRecordedStateOnlyMovesForward(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	v := taskview.New(db)
	at := time.Now().UTC()
	record(t, db, "t1", task.State{Status: task.StatusRunning}, at, 2)
	record(t, db, "t1", task.State{Status: task.StatusIdle}, at, 1)
	record(t, db, "t1", task.State{Status: task.StatusIdle}, at.Add(-time.Second), 9)
	d, err := v.Show(ctx, "t1")
	must(t, err)
	if d.Status != task.StatusRunning {
		t.Fatalf("status %s, want running: older records were applied", d.Status)
	}
	record(t, db, "t1", task.State{Status: task.StatusCompleted}, at.Add(time.Second), 1)
	if d, err = v.Show(ctx, "t1"); err != nil || d.Status != task.StatusCompleted {
		t.Fatalf("status %s, %v; want completed", d.Status, err)
	}
}

// Events pages through the log; Watch delivers every event once, in order, then the new ones.
func TestEventsAndWatch(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	v := taskview.New(db)
	in := func(n int) []store.EventInput {
		var out []store.EventInput
		for range n {
			out = append(out, store.EventInput{Turn: 1, Attempt: 1, Type: "message_chunk", Payload: json.RawMessage(`{"type":"message_chunk"}`)})
		}
		return out
	}
	_, _, err := store.AppendEvents(ctx, db, "t1", in(3))
	must(t, err)
	page, err := v.Events(ctx, "t1", 1, 1)
	must(t, err)
	if len(page) != 1 || page[0].Seq != 2 || page[0].Type != "message_chunk" || page[0].Turn != 1 {
		t.Fatalf("page = %+v, want event 2", page)
	}
	if _, err := v.Events(ctx, "t1", -1, 0); err == nil {
		t.Error("a negative cursor was accepted")
	}

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := errors.New("seen enough")
	var seqs []int64
	go func() {
		// Appended while the watch runs: it must see them after the first three.
		time.Sleep(100 * time.Millisecond)
		_, _, _ = store.AppendEvents(ctx, db, "t1", in(2))
	}()
	err = v.Watch(wctx, "t1", 1, func(e taskview.Event) error {
		seqs = append(seqs, e.Seq)
		if e.Seq == 5 {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("watch: %v", err)
	}
	if len(seqs) != 4 || seqs[0] != 2 || seqs[3] != 5 {
		t.Errorf("watched %v, want 2 3 4 5", seqs)
	}
}

// A task's title is the recorded one, else the first line of its first prompt, and the list's
// text filter finds it; its model is the one it was given, else the one its CLI reported.
func TestTitleAndModel(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	v := taskview.New(db)
	base := time.Now().Add(-time.Hour).UTC()
	record(t, db, "named", task.State{Status: task.StatusIdle, Title: "Quarterly report", Workspace: "/w"}, base, 1)
	turn(t, db, "unnamed", 1, "\n  migrate the billing tables\nthen check", "completed", 0, 0, 0, base)
	_, _, err := store.AppendEvents(ctx, db, "unnamed", []store.EventInput{{Turn: 1, Attempt: 1, Type: "context_window",
		Payload: json.RawMessage(`{"type":"context_window","context_window_size":200000,"context_window_used":10,"context_window_model":"claude-reported"}`)}})
	must(t, err)
	for text, want := range map[string]string{"QUARTERLY": "named", "billing": "unnamed"} {
		list, err := v.List(ctx, taskview.Filter{Text: text})
		must(t, err)
		if len(list) != 1 || list[0].ID != want {
			t.Fatalf("search %q: %+v, want %s", text, list, want)
		}
	}
	d, err := v.Show(ctx, "unnamed")
	must(t, err)
	if d.Title != "migrate the billing tables" || d.Model != "claude-reported" {
		t.Errorf("unnamed: title %q, model %q", d.Title, d.Model)
	}
	d, err = v.Show(ctx, "named")
	must(t, err)
	if d.Title != "Quarterly report" {
		t.Errorf("named: title %q", d.Title)
	}
}

// Who changed a task's budget (its recorded state says) and who cancelled it (the cancel's
// record says) are shown with the task.
func TestWhoChangedBudgetAndCancelled(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	v := taskview.New(db)
	record(t, db, "t1", task.State{Status: task.StatusIdle, Workspace: "/w", Budget: task.Budget{MaxTurns: 3}, BudgetBy: "ana"}, time.Now(), 1)
	must(t, store.RecordCancel(ctx, db, "t1", "run-1", "ben"))
	d, err := v.Show(ctx, "t1")
	must(t, err)
	if d.BudgetBy != "ana" || d.CancelledBy != "ben" || d.CancelledAt == nil {
		t.Errorf("budget by %q, cancelled by %q at %v", d.BudgetBy, d.CancelledBy, d.CancelledAt)
	}
	list, err := v.List(ctx, taskview.Filter{})
	must(t, err)
	if len(list) != 1 || list[0].BudgetBy != "ana" {
		t.Errorf("the list: %+v", list)
	}
}
