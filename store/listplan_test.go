package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// planNode is the part of EXPLAIN (ANALYZE, FORMAT JSON)'s plan the checks read.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	Plans         []planNode `json:"Plans"`
}

// explain runs EXPLAIN ANALYZE of the query and returns its plan's root.
func explain(t *testing.T, pool *pgxpool.Pool, q string, args []any) planNode {
	t.Helper()
	var raw []byte
	if err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Scan(&raw); err != nil {
		t.Fatalf("explaining %s: %v", q, err)
	}
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("reading the plan %s: %v", raw, err)
	}
	return out[0].Plan
}

// historyTables are the tables that grow with the history: a list reads them by index only.
var historyTables = map[string]bool{"tasks": true, "task_events": true, "task_turns": true,
	"permission_requests": true, "executors_running": true}

// checkPlan fails on a sequential scan of a table that grows with the history, and, when bound
// is above 0, on a scan of such a table that reads (returns or filters out) more rows than bound.
func checkPlan(t *testing.T, name string, n planNode, bound float64) {
	t.Helper()
	var walk func(n planNode, path string)
	walk = func(n planNode, path string) {
		path += "/" + n.NodeType
		// task_events is read through its week partitions (task_events_w…, task_events_default);
		// a sequential scan that read no row read an empty partition (a week to come).
		partition := strings.HasPrefix(n.Relation, "task_events_")
		if historyTables[n.Relation] || partition {
			if strings.Contains(n.NodeType, "Seq Scan") && !(partition && n.ActualRows+n.RemovedFilter == 0) {
				t.Errorf("%s: %s reads %s whole (%s)", name, path, n.Relation, n.NodeType)
			}
			if read := (n.ActualRows + n.RemovedFilter) * max(n.ActualLoops, 1); bound > 0 && read > bound {
				t.Errorf("%s: %s on %s (%s) reads %.0f rows, want at most %.0f", name, path, n.Relation, n.Index, read, bound)
			}
		}
		for _, c := range n.Plans {
			walk(c, path)
		}
	}
	walk(n, "")
}

// TestListPlansAtAHundredThousandTasks loads 100,000 tasks shaped like real ones (finished ones
// with their turns, events and executor rows, and 100 active ones, some waiting for a person)
// and checks, by Postgres's own EXPLAIN ANALYZE, that every listing reads a page's rows by index:
// no sequential scan of a table that grows with the history, and no more rows than the page.
func TestListPlansAtAHundredThousandTasks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pool := pgtest.NewPool(t)
	if err := bench.MakeHistory(ctx, pool, bench.History{Finished: 99_900, Active: 100, EventsPerTurn: 3}); err != nil {
		t.Fatal(err)
	}
	const page = 51 // a page of 50, and one more that says whether a next page exists
	first, err := store.ListTasks(ctx, pool, store.TaskFilter{Limit: page})
	if err != nil || len(first) != page {
		t.Fatalf("the first page: %d rows, %v", len(first), err)
	}
	if first[0].TaskID != "hist-00100000" || first[0].Status != task.StatusRunning || first[0].Totals.Turns != 2 {
		t.Fatalf("the newest task is %+v, want hist-00100000, running, 2 turns", first[0])
	}
	mid, err := store.GetTask(ctx, pool, "hist-00060000")
	if err != nil {
		t.Fatal(err)
	}
	deep := mid.CursorOf()
	waiting, err := store.ListWaiting(ctx, pool, store.WaitingFilter{Limit: 3})
	if err != nil || len(waiting) != 3 {
		t.Fatalf("the inbox: %d rows, %v", len(waiting), err)
	}
	after := waiting[0].CursorOf()
	filters := []struct {
		name  string
		f     store.TaskFilter
		bound float64
	}{
		{"the first page", store.TaskFilter{Limit: page}, 2 * page},
		{"a page deep in the history", store.TaskFilter{Limit: page, After: &deep}, 2 * page},
		// A common status may be read off the time index, filtered: a page costs the page
		// divided by the status's share (a fifth here), whatever the history's size.
		{"failed tasks", store.TaskFilter{Status: task.StatusFailed, Limit: page}, 10 * page},
		{"failed tasks, deep", store.TaskFilter{Status: task.StatusFailed, Limit: page, After: &deep}, 10 * page},
		{"idle tasks (few among many)", store.TaskFilter{Status: task.StatusIdle, Limit: page}, 2 * page},
		{"awaiting approval", store.TaskFilter{AwaitingApproval: true, Limit: page}, 2 * page},
		{"awaiting approval, after a cursor", store.TaskFilter{AwaitingApproval: true, Limit: page, After: &store.TaskCursor{CreatedAt: first[9].CreatedAt, TaskID: first[9].TaskID}}, 2 * page},
		// A text search reads the newest tasks until a page matches: by index, but its bound is
		// the match's rarity, not the page.
		{"text", store.TaskFilter{Text: "repo-7", Limit: page}, 0},
	}
	for _, c := range filters {
		q, args := store.ListTasksQuery(c.f)
		checkPlan(t, c.name, explain(t, pool, q, args), c.bound)
	}
	for _, c := range []struct {
		name string
		f    store.WaitingFilter
	}{
		{"the inbox", store.WaitingFilter{Limit: page}},
		{"the inbox after a cursor", store.WaitingFilter{Limit: page, After: &after}},
		{"one task's requests", store.WaitingFilter{TaskID: waiting[1].TaskID, Limit: page}},
	} {
		q, args := store.ListWaitingQuery(c.f)
		checkPlan(t, c.name, explain(t, pool, q, args), 2*page)
	}
	one := "hist-00050000"
	for name, q := range map[string]string{
		"a task shown":   "SELECT * FROM tasks t LEFT JOIN executors_running x ON x.task_id = t.task_id WHERE t.task_id = $1",
		"a task's turns": "SELECT * FROM task_turns WHERE task_id = $1 ORDER BY turn",
		"a task's events": "SELECT task_id, seq, turn, attempt, type, payload, created_at FROM task_events " +
			"WHERE task_id = $1 AND seq > 0 ORDER BY seq LIMIT 500",
	} {
		checkPlan(t, name, explain(t, pool, q, []any{one}), 2*page)
	}
	if t.Failed() {
		return
	}
	// The same pages through the store's own functions: what the plans read is what a list shows.
	got, err := store.ListTasks(ctx, pool, store.TaskFilter{Limit: page, After: &deep})
	if err != nil || len(got) != page || got[0].TaskID != "hist-00059999" {
		t.Fatalf("the page after %s: %d rows from %v, %v", deep.TaskID, len(got), fmt.Sprint(first0(got)), err)
	}
}

func first0(rows []store.TaskRow) string {
	if len(rows) == 0 {
		return "(none)"
	}
	return rows[0].TaskID
}
