package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// p3AppendGoal is the event rate the live path must sustain into Postgres.
const p3AppendGoal = 20000 // events/s

// p3Recording is real CLI output (--include-partial-messages) with tool calls, text and
// thinking: its turn body, repeated, is the stream P3append feeds the engine.
const p3Recording = "../streamjson/testdata/recorded/tools-partial.jsonl"

// BenchmarkFigureP3Append is figure P3append of `make bench`: the sustained rate of the event
// log on the live path. The turn engine runs one turn against a scripted CLI (internal/testkit/fakecli,
// in memory) that prints the body of a recorded CLI transcript over and over, as fast as the
// engine reads it, then its result; the engine reads the lines, adapts them to events and
// appends them through its event log (group commit, text of one message coalesced) to a real
// Postgres. The rate is the events the log received ÷ the time from the turn's start to its
// commit. The baseline, run alternately, stores the same events (the adapter's output for the
// same lines) with one INSERT each, one transaction each: what a writer without batching does.
func BenchmarkFigureP3Append(b *testing.B) {
	// The baseline commits once per event (a few hundred a second on a disk that syncs its
	// commits): it stores the first baseEvents of the turn's events, enough for a steady rate.
	reps, baseEvents := 2000, 3000 // about 52,000 events
	if *benchQuick {
		reps, baseEvents = 80, 300
	}
	runs := figureRuns(b)
	body, sessionID := recordedTurnBody(b, p3Recording)
	db := pgtest.NewPool(b)
	ctx := b.Context()

	// The scripted CLI's output is built beforehand, so that the turn's time is the engine's.
	// Each repetition has ids of its own, as a long turn would have.
	var lines []string
	for r := range reps {
		rep := bytes.ReplaceAll(body, []byte(`"toolu_`), fmt.Appendf(nil, `"toolu_%d_`, r))
		rep = bytes.ReplaceAll(rep, []byte(`"msg_`), fmt.Appendf(nil, `"msg_%d_`, r))
		for line := range bytes.SplitSeq(bytes.TrimRight(rep, "\n"), []byte("\n")) {
			lines = append(lines, string(line))
		}
	}
	var readAt atomic.Int64
	script := func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, _ fakecli.Line) {
			c.Init()
			for _, line := range lines {
				c.Write(strings.ReplaceAll(line, sessionID, c.SessionID))
			}
			c.Result("done", fakecli.DefaultUsage)
			// The engine has read the whole output once the result is written (the pipe is
			// synchronous): what follows is the log catching up.
			readAt.Store(time.Now().UnixNano())
		})
	}
	eng, err := engine.New(engine.Config{
		DB: db, HostID: "host-p3append", Claude: engine.Claude{Bin: "claude"},
		Launcher: &fakecli.Launcher{Script: script}, KeepAlive: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(context.Background()) })
	workspace := b.TempDir()

	// The baseline's events: what the adapter makes of the same lines.
	var adapted []store.EventInput
	{
		var stream bytes.Buffer
		for range reps {
			stream.Write(body)
		}
		a, err := streamjson.New(streamjson.Config{PartialMessages: true, Sink: streamjson.SinkFunc(func(ev events.AgentEvent) {
			adapted = append(adapted, store.EventInput{Turn: 1, Attempt: 1, Type: string(ev.Type), Payload: encodeEvent(b, ev)})
		})})
		if err != nil {
			b.Fatal(err)
		}
		rd := claudecode.NewReader(&stream)
		for {
			msg, err := rd.ReadMessage()
			if err != nil {
				break
			}
			a.Handle(msg)
		}
	}

	if len(adapted) < baseEvents {
		b.Fatalf("the adapter made %d events of the stream, want at least %d", len(adapted), baseEvents)
	}
	var baseRates, droverRates, rowsPerWrite, readShares []float64
	droverRun := func(i int) {
		taskID := fmt.Sprintf("p3append-%d-%s", i, uuid.NewString()[:8])
		attemptID := taskID + "/1/1"
		req := engine.Request{
			TaskID: taskID, Turn: 1, Attempt: 1, MaxAttempts: 1, AttemptID: attemptID,
			AttemptToken: []byte(attemptID), Prompt: task.Prompt{Text: "go"}, PromptUUID: uuid.NewString(),
			Workspace: workspace, Profile: task.Profile{PermissionMode: task.Autonomous},
		}
		t0 := time.Now()
		res, err := eng.RunTurn(ctx, req)
		elapsed := time.Since(t0)
		if err != nil {
			b.Fatalf("turn of %s: %v", taskID, err)
		}
		if res.Status != task.TurnCompleted {
			b.Fatalf("turn of %s ended %s", taskID, res.Status)
		}
		emitted, _, err := store.WriterProgress(ctx, db, taskID, attemptID)
		if err != nil {
			b.Fatal(err)
		}
		var rows int64
		if err := db.QueryRow(ctx, `SELECT count(*) FROM task_events WHERE task_id = $1`, taskID).Scan(&rows); err != nil {
			b.Fatal(err)
		}
		if emitted < int64(len(adapted)) {
			b.Fatalf("turn of %s: the log received %d events, the adapter alone makes %d of the same lines", taskID, emitted, len(adapted))
		}
		droverRates = append(droverRates, float64(emitted)/elapsed.Seconds())
		readShares = append(readShares, float64(time.Unix(0, readAt.Load()).Sub(t0))/float64(elapsed))
		rowsPerWrite = append(rowsPerWrite, float64(rows)/float64(emitted))
	}
	baselineRun := func(i int) {
		taskID := fmt.Sprintf("p3append-base-%d-%s", i, uuid.NewString()[:8])
		t0 := time.Now()
		for k, ev := range adapted[:baseEvents] {
			_, err := db.Exec(ctx, `INSERT INTO task_events (task_id, seq, turn, attempt, type, payload) VALUES ($1, $2, $3, $4, $5, $6)`,
				taskID, int64(k+1), ev.Turn, ev.Attempt, ev.Type, ev.Payload)
			if err != nil {
				b.Fatal(err)
			}
		}
		baseRates = append(baseRates, float64(baseEvents)/time.Since(t0).Seconds())
	}
	droverRun(-1) // warm up: connections, caches
	b.ResetTimer()
	for i := range runs {
		if i%2 == 0 {
			baselineRun(i)
			droverRun(i)
		} else {
			droverRun(i)
			baselineRun(i)
		}
	}
	b.StopTimer()
	ratios := make([]float64, runs)
	for i := range ratios {
		ratios[i] = droverRates[i] / baseRates[i]
	}
	reportRows(b, bench.Row{
		Figure: "P3append", What: "event log append on the live path, events/s (baseline: one INSERT per event; ratio: drover ÷ baseline)",
		Unit: "events/s", Baseline: bench.Median(baseRates), Drover: bench.Median(droverRates), Ratio: bench.Median(ratios),
		Runs: runs, Goal: bench.DroverAtLeast(p3AppendGoal, "events/s"),
		Note: fmt.Sprintf("one turn of %d events (%d× the body of a recorded transcript), %.2f rows per event after coalescing, "+
			"output read by %.0f%% of the turn's time; the baseline stores the first %d",
			len(adapted), reps, bench.Median(rowsPerWrite), 100*bench.Median(readShares), baseEvents),
	})
}

// recordedTurnBody returns the lines of a recorded transcript between its system/init and its
// result, and the session id they carry.
func recordedTurnBody(tb testing.TB, path string) (body []byte, sessionID string) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	for line := range bytes.SplitSeq(bytes.TrimRight(raw, "\n"), []byte("\n")) {
		msg, err := claudecode.NewReader(bytes.NewReader(append(line, '\n'))).ReadMessage()
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		switch m := msg.(type) {
		case *claudecode.SystemInit:
			sessionID = m.SessionID
			continue
		case *claudecode.ResultMessage:
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if sessionID == "" || !strings.Contains(out.String(), sessionID) {
		tb.Fatalf("%s: no session id", path)
	}
	return out.Bytes(), sessionID
}

// encodeEvent is the payload the event log stores for ev.
func encodeEvent(tb testing.TB, ev events.AgentEvent) []byte {
	b, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
