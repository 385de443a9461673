package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
)

// History describes a database's past, made directly in Postgres: Finished tasks that ran and
// ended (completed, failed or cancelled, each with two turns, their events, executor row and
// event counter, as a worker leaves them; one in ten supervised, with a request decided), then
// Active tasks, the newest (idle or running, one in ten with a request waiting for a person). Times go back one minute a task from now.
type History struct {
	Finished int
	Active   int
	// EventsPerTurn is how many task_events rows each turn leaves (a real turn: about 6).
	EventsPerTurn int
	// Prefix starts every task id; "" is "hist-".
	Prefix string
}

// historySQL makes the rows of tasks @from+1 … @from+@n (their ids @prefix || lpad(i)) of a
// history of @total tasks, task i made @total+1-i minutes ago; the first @finished are finished,
// and each turn has @events events.
var historySQL = []string{`
INSERT INTO tasks (task_id, status, state, created_at, recorded_at, recorded_seq, updated_at, turns,
	cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, running_turns, running_turn,
	pending_approvals, waiting_since)
SELECT @prefix || lpad(i::text, 8, '0'), s.status,
	jsonb_build_object('status', s.status, 'workspace', '/srv/work/repo-' || (i % 50), 'model', 'claude-sonnet-4-5',
		'permission_mode', CASE WHEN i % 10 = 0 THEN 'supervised' ELSE 'autonomous' END, 'turn', 2,
		'session_id', md5(i::text), 'host_queue', 'executor/host-' || (i % 4),
		'totals', jsonb_build_object('turns', 2, 'cost_usd', 0.042, 'input_tokens', 2400, 'output_tokens', 610)),
	s.at, s.at + interval '40 seconds', 7, s.at + interval '40 seconds', 2, 0.042, 2400, 610, 18000, 1200,
	CASE WHEN s.status = 'running' THEN 1 ELSE 0 END, CASE WHEN s.status = 'running' THEN 2 ELSE 0 END,
	CASE WHEN s.waits THEN 1 ELSE 0 END, CASE WHEN s.waits THEN s.at + interval '30 seconds' END
FROM generate_series(@from + 1, @from + @n) i, LATERAL (SELECT
	now() - (@total + 1 - i) * interval '1 minute' AS at,
	CASE WHEN i > @finished THEN (CASE WHEN i % 2 = 0 THEN 'running' ELSE 'idle' END)
		WHEN i % 5 = 0 THEN 'failed' WHEN i % 7 = 0 THEN 'cancelled' ELSE 'completed' END AS status,
	i > @finished AND i % 10 = 0 AS waits) s`, `
INSERT INTO executors_running (task_id, session_id, status, last_message_uuid, attempt_id, host_id, workspace,
	model, created_at, updated_at, turn)
SELECT @prefix || lpad(i::text, 8, '0'), md5(i::text), CASE WHEN i > @finished THEN 'idle' ELSE 'stopped' END,
	md5('u' || i), md5('a' || i), 'host-' || (i % 4), '/srv/work/repo-' || (i % 50), 'claude-sonnet-4-5',
	now() - (@total + 1 - i) * interval '1 minute', now() - (@total + 1 - i) * interval '1 minute' + interval '40 seconds', 2
FROM generate_series(@from + 1, @from + @n) i`, `
INSERT INTO task_turns (task_id, turn, prompt, prompt_uuid, status, cost_usd, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, duration_ms, num_turns, result_uuid, last_message_uuid, started_at, finished_at)
SELECT @prefix || lpad(i::text, 8, '0'), t, 'refactor the parser of module ' || i || ', step ' || t, md5(i || 'p' || t),
	CASE WHEN i > @finished AND i % 2 = 0 AND t = 2 THEN 'running' WHEN i <= @finished AND i % 5 = 0 AND t = 2 THEN 'failed' ELSE 'completed' END,
	CASE WHEN i > @finished AND i % 2 = 0 AND t = 2 THEN 0 ELSE 0.021 END, 1200, 305, 9000, 600, 9000, 3,
	md5(i || 'r' || t), md5(i || 'm' || t), now() - (@total + 1 - i) * interval '1 minute' + t * interval '10 seconds',
	CASE WHEN i > @finished AND i % 2 = 0 AND t = 2 THEN NULL ELSE now() - (@total + 1 - i) * interval '1 minute' + t * interval '20 seconds' END
FROM generate_series(@from + 1, @from + @n) i, generate_series(1, 2) t`, `
INSERT INTO task_events (task_id, seq, turn, attempt, type, payload, created_at)
SELECT @prefix || lpad(i::text, 8, '0'), (t - 1) * @events + e, t, 1,
	(ARRAY['session_status', 'assistant_text', 'tool_call', 'tool_result', 'usage', 'turn_result'])[1 + (e - 1) % 6],
	jsonb_build_object('type', (ARRAY['session_status', 'assistant_text', 'tool_call', 'tool_result', 'usage', 'turn_result'])[1 + (e - 1) % 6],
		'text', 'I read parser.go and changed the loop at line ' || e),
	now() - (@total + 1 - i) * interval '1 minute' + t * interval '10 seconds'
FROM generate_series(@from + 1, @from + @n) i, generate_series(1, 2) t, generate_series(1, @events) e`, `
INSERT INTO task_event_counters (task_id, last_seq)
SELECT @prefix || lpad(i::text, 8, '0'), 2 * @events FROM generate_series(@from + 1, @from + @n) i`, `
INSERT INTO permission_requests (task_id, request_id, turn, attempt, cli_request_id, kind, tool_name, input,
	input_hash, summary, deadline, created_at, updated_at, status, decision, decided_by, decided_at)
SELECT @prefix || lpad(i::text, 8, '0'), 'req-1', 2, 1, md5('c' || i), 'tool', 'Bash', '{"command":"go test ./..."}',
	md5('h' || i), 'go test ./...', now() + interval '1 hour',
	now() - (@total + 1 - i) * interval '1 minute' + interval '30 seconds',
	now() - (@total + 1 - i) * interval '1 minute' + interval '30 seconds',
	CASE WHEN i > @finished THEN 'pending' ELSE 'allowed' END,
	CASE WHEN i > @finished THEN NULL ELSE '{"behavior":"allow"}'::jsonb END,
	CASE WHEN i > @finished THEN '' ELSE 'carol' END,
	CASE WHEN i > @finished THEN NULL ELSE now() - (@total + 1 - i) * interval '1 minute' + interval '35 seconds' END
FROM generate_series(@from + 1, @from + @n) i WHERE i % 10 = 0`}

// MakeHistory writes h into the database in batches of at most 50,000 tasks, each batch in one
// transaction with the triggers that keep the tasks' totals off (the rows carry their totals
// already), then analyzes the tables. It is for benchmarks and tests of a large database.
func MakeHistory(ctx context.Context, pool *pgxpool.Pool, h History) error {
	if h.Prefix == "" {
		h.Prefix = "hist-"
	}
	if h.EventsPerTurn < 1 {
		h.EventsPerTurn = 1
	}
	total := h.Finished + h.Active
	// The weeks the history spans have their partitions of task_events, as a worker running
	// all that time would have made them.
	now := time.Now()
	oldest := now.Add(-time.Duration(total+1) * time.Minute)
	weeks := int(store.EventWeek(now).Sub(store.EventWeek(oldest))/store.EventPartitionWidth) + store.EventPartitionsAhead
	if _, err := store.EnsureEventPartitions(ctx, pool, oldest, weeks); err != nil {
		return fmt.Errorf("making a history of %d tasks: %w", total, err)
	}
	const batch = 50_000
	for from := 0; from < total; from += batch {
		n := min(batch, total-from)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
				return err
			}
			for _, q := range historySQL {
				args := pgx.NamedArgs{"prefix": h.Prefix, "from": from, "n": n, "finished": h.Finished,
					"events": h.EventsPerTurn, "total": total}
				if _, err := tx.Exec(ctx, q, args); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("making a history of %d tasks (from %d): %w", total, from, err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE tasks, task_turns, task_events, permission_requests, executors_running"); err != nil {
		return fmt.Errorf("analyzing the history: %w", err)
	}
	return nil
}
