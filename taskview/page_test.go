package taskview_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// TestListPagesByCursor: a listing read a page at a time, each page after the one before's
// Next, shows every task once, newest first, ties in created time included, under a filter
// too; a cursor that is not one is refused as input.
func TestListPagesByCursor(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	v := taskview.New(pool)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 23 {
		id := fmt.Sprintf("page-%02d", i)
		at := base.Add(time.Duration(i/3) * time.Minute) // three tasks a minute: ties
		turn(t, pool, id, 1, "step "+id, "completed", 0.01, 10, 5, at)
		if i%4 == 0 {
			record(t, pool, id, task.State{Status: task.StatusFailed}, at.Add(time.Second), 1)
		}
	}
	read := func(f taskview.Filter) []string {
		var got []string
		for pages := 0; ; pages++ {
			p, err := v.ListPage(t.Context(), f)
			must(t, err)
			if len(p.Tasks) > f.Limit {
				t.Fatalf("a page of %d holds %d tasks", f.Limit, len(p.Tasks))
			}
			for _, s := range p.Tasks {
				got = append(got, s.ID)
			}
			if p.Next == "" {
				return got
			}
			if pages > 20 {
				t.Fatal("the pages never end")
			}
			f.After = p.Next
		}
	}
	all, err := v.List(t.Context(), taskview.Filter{})
	must(t, err)
	var whole []string
	for _, s := range all {
		whole = append(whole, s.ID)
	}
	got := read(taskview.Filter{Limit: 5})
	if fmt.Sprint(got) != fmt.Sprint(whole) || len(got) != 23 {
		t.Errorf("paged by 5: %v\nwant the whole list %v", got, whole)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] <= got[i] && got[i-1][:5] == got[i][:5] && sameMinute(got[i-1], got[i]) {
			t.Errorf("ties out of order: %s before %s", got[i-1], got[i])
		}
	}
	failed := read(taskview.Filter{Status: task.StatusFailed, Limit: 2})
	if fmt.Sprint(failed) != "[page-20 page-16 page-12 page-08 page-04 page-00]" {
		t.Errorf("failed tasks paged by 2: %v", failed)
	}
	if p, err := v.ListPage(t.Context(), taskview.Filter{Limit: 23}); err != nil || p.Next != "" || len(p.Tasks) != 23 {
		t.Errorf("a page that holds every task: %d tasks, next %q, %v; want no next", len(p.Tasks), p.Next, err)
	}
	for _, bad := range []string{"nonsense", "eyJrIjoiciIsImMiOjEsInQiOiJ4IiwiciI6InkifQ"} { // the second: an inbox cursor
		var ie *task.InvalidError
		if _, err := v.ListPage(t.Context(), taskview.Filter{Limit: 5, After: bad}); !errors.As(err, &ie) || ie.Field != "after" {
			t.Errorf("cursor %q: %v, want an invalid after", bad, err)
		}
	}
}

// sameMinute says whether two page-NN tasks of the test were made in the same minute.
func sameMinute(a, b string) bool {
	var x, y int
	fmt.Sscanf(a, "page-%d", &x)
	fmt.Sscanf(b, "page-%d", &y)
	return x/3 == y/3
}

// TestInboxPagesByCursor: the requests that wait for a person, a page at a time, oldest first.
func TestInboxPagesByCursor(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	v := taskview.New(pool)
	var want []string
	for i := range 7 {
		r := ask(t, pool, fmt.Sprintf("asks-%d", i), 1, "Bash", "ls", nil)
		want = append(want, r.TaskID+"/"+r.RequestID)
	}
	var got []string
	after := ""
	for {
		p, err := v.PendingPage(t.Context(), after, 3)
		must(t, err)
		for _, r := range p.Requests {
			got = append(got, r.TaskID+"/"+r.RequestID)
		}
		if after = p.Next; after == "" {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the inbox by pages of 3: %v, want %v", got, want)
	}
}

// TestTotalsFollowTheirRows: the totals a list shows, kept on the task's row by the writes
// themselves, equal what the task's turns and requests add up to after each kind of write
// (a turn begun, billed, failed; a request asked, decided, recorded for a worker; a state
// recorded before and after).
func TestTotalsFollowTheirRows(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	v := taskview.New(pool)
	ctx := t.Context()
	const id = "totals"
	check := func(step string) {
		t.Helper()
		var turns, failed, running, pending int
		var cost float64
		var in, out int64
		must(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'failed'),
			coalesce(max(turn) FILTER (WHERE status = 'running'), 0), coalesce(sum(cost_usd), 0)::float8,
			coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) FROM task_turns WHERE task_id = $1`, id).
			Scan(&turns, &failed, &running, &cost, &in, &out))
		must(t, pool.QueryRow(ctx, `SELECT count(*) FROM permission_requests WHERE task_id = $1
			AND status = 'pending' AND requested_at IS NULL`, id).Scan(&pending))
		d, err := v.Show(ctx, id)
		must(t, err)
		if d.Summary.Turns != turns || d.FailedTurns != failed || d.RunningTurn != running || d.PendingApprovals != pending ||
			fmt.Sprintf("%.6f", d.CostUSD) != fmt.Sprintf("%.6f", cost) || d.Tokens.Input != in || d.Tokens.Output != out {
			t.Fatalf("%s: the row says turns %d failed %d running %d pending %d cost %.6f tokens %d/%d;\n"+
				"the rows add up to %d %d %d %d %.6f %d/%d", step, d.Summary.Turns, d.FailedTurns, d.RunningTurn,
				d.PendingApprovals, d.CostUSD, d.Tokens.Input, d.Tokens.Output, turns, failed, running, pending, cost, in, out)
		}
		list, err := v.List(ctx, taskview.Filter{AwaitingApproval: pending > 0})
		must(t, err)
		if len(list) != 1 || list[0].Turns != turns || list[0].PendingApprovals != pending {
			t.Fatalf("%s: the list shows %+v", step, list)
		}
	}
	now := time.Now()
	turn(t, pool, id, 1, "first", "running", 0, 0, 0, now)
	check("a turn begun")
	if d, _ := v.Show(ctx, id); d.Status != task.StatusRunning {
		t.Fatalf("a task with a running turn and no recorded state is %s", d.Status)
	}
	_, err := pool.Exec(ctx, `UPDATE task_turns SET status = 'completed', finished_at = now(), cost_usd = 0.25,
		input_tokens = 100, output_tokens = 40 WHERE task_id = $1 AND turn = 1`, id)
	must(t, err)
	check("a turn committed")
	if d, _ := v.Show(ctx, id); d.Status != task.StatusIdle {
		t.Fatalf("a task with no running turn and no recorded state is %s", d.Status)
	}
	turn(t, pool, id, 2, "second", "running", 0, 0, 0, now.Add(time.Second))
	r1 := ask(t, pool, id, 2, "Bash", "ls", nil)
	r2 := ask(t, pool, id, 2, "Bash", "make", nil)
	check("two requests asked")
	_, err = store.RecordDecision(ctx, pool, id, r1.RequestID, []byte(`{"allow":true}`), "carol")
	must(t, err)
	check("a decision recorded for the worker")
	must(t, store.DecidePermission(ctx, pool, id, r2.RequestID, store.Decision{Status: task.OutcomeDenied, Answer: []byte(`{"behavior":"deny"}`), DecidedBy: "dave", Reason: "no"}))
	check("a request decided")
	record(t, pool, id, task.State{Status: task.StatusClosing}, now.Add(time.Minute), 1)
	_, err = pool.Exec(ctx, `UPDATE task_turns SET status = 'failed', finished_at = now(), cost_usd = 0.5 WHERE task_id = $1 AND turn = 2`, id)
	must(t, err)
	check("a turn failed")
	if d, _ := v.Show(ctx, id); d.Status != task.StatusClosing {
		t.Fatalf("a recorded status gave way to %s", d.Status)
	}
}
