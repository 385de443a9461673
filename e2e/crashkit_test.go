package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// waitWithin is waitFor, failing the test when cond does not hold within d.
func (e *env) waitWithin(d time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	e.waitFor(what, func() bool {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %s", what, d)
		}
		return false
	})
}

// toolScriptText is a tool that takes its time and leaves witnesses. Each run appends to the
// markers file: "start PID NS live=PIDS" (PIDS: the processes of earlier runs still alive at
// that moment, by /proc, zombies excepted), "child PID NS" for the sleep it starts, and
// "end PID NS" once the sleep is over. NS is the wall clock in nanoseconds. It sleeps as many
// seconds as the sleep file says when it starts: read before its start marker, so that a test
// that changes the file once it sees the marker changes only the later runs.
const toolScriptText = `#!/bin/sh
dir=$(dirname "$0")
m="$dir/markers"
live=""
if [ -f "$m" ]; then
  for p in $(awk '$1 == "start" || $1 == "child" { print $2 }' "$m"); do
    if [ -e "/proc/$p" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null; then
      live="$live,$p"
    fi
  done
fi
secs=$(cat "$dir/sleep")
echo "start $$ $(date +%s%N) live=${live#,}" >> "$m"
sleep "$secs" &
echo "child $! $(date +%s%N)" >> "$m"
wait $!
echo "end $$ $(date +%s%N)" >> "$m"
`

// toolScript is a toolScriptText the model runs with the Bash tool.
type toolScript struct {
	t   *testing.T
	dir string
}

// newToolScript writes the tool beside the world's workspace, sleeping seconds per run.
func newToolScript(t *testing.T, w world, seconds int) *toolScript {
	t.Helper()
	s := &toolScript{t: t, dir: filepath.Join(filepath.Dir(w.workspace), "tool")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "tool.sh"), []byte(toolScriptText), 0o755); err != nil {
		t.Fatal(err)
	}
	s.setSleep(seconds)
	return s
}

// command is the Bash command that runs the tool.
func (s *toolScript) command() string { return "sh " + filepath.Join(s.dir, "tool.sh") }

// setSleep sets how long the next runs sleep.
func (s *toolScript) setSleep(seconds int) {
	if err := os.WriteFile(filepath.Join(s.dir, "sleep"), []byte(strconv.Itoa(seconds)), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// toolRun is one run of the tool, as its markers tell it.
type toolRun struct {
	pid, child int
	start, end time.Time // end is zero when the run never reached its end marker
	// live lists the processes of earlier runs that were alive when this run started.
	live string
}

// pids are the run's processes: its shell and the sleep it started.
func (r toolRun) pids() []int {
	if r.child == 0 {
		return []int{r.pid}
	}
	return []int{r.pid, r.child}
}

func (r toolRun) ended() bool { return !r.end.IsZero() }

// runs reads the markers.
func (s *toolScript) runs() []toolRun {
	b, err := os.ReadFile(filepath.Join(s.dir, "markers"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	var runs []toolRun
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		at := time.Unix(0, ns)
		switch f[0] {
		case "start":
			r := toolRun{pid: pid, start: at}
			if len(f) > 3 {
				r.live = strings.TrimPrefix(f[3], "live=")
			}
			runs = append(runs, r)
		case "child":
			if len(runs) > 0 {
				runs[len(runs)-1].child = pid
			}
		case "end":
			for i := range runs {
				if runs[i].pid == pid {
					runs[i].end = at
				}
			}
		}
	}
	return runs
}

// anyAlive reports whether one of pids runs.
func anyAlive(pids []int) bool { return slices.ContainsFunc(pids, alive) }

// taggedProcesses lists the live processes whose TagEnv value is under host: every process of
// every CLI tree a worker of that host started (guards, CLIs, tools and their children).
func taggedProcesses(host string) []int {
	prefix := []byte(claudecode.TagEnv + "=" + host + "/")
	names, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, dir := range names {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || !alive(pid) {
			continue
		}
		env, err := os.ReadFile(dir + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if bytes.HasPrefix(kv, prefix) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// cliProcessOf returns a live process of host's trees that runs the claude binary, or 0.
func cliProcessOf(host string) int {
	want, err := filepath.EvalSymlinks(suite.claudeBin)
	if err != nil {
		want = suite.claudeBin
	}
	for _, pid := range taggedProcesses(host) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == want {
			return pid
		}
	}
	return 0
}

// checkLogWhole checks the task's log as a reader sees it: sequence numbers from 1 without a
// gap, and every tool call closed by a later tool_update (complete or error).
func (e *env) checkLogWhole(taskID string) []loggedEvent {
	e.t.Helper()
	evs := e.events(taskID)
	open := map[string]loggedEvent{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			e.t.Fatalf("event %d of the log has seq %d: the log has a gap", i+1, ev.Seq)
		}
		switch ev.Agent.Type {
		case events.TypeToolCall:
			open[ev.Agent.ToolCallID] = ev
		case events.TypeToolUpdate:
			if ev.Agent.ToolStatus == events.ToolComplete || ev.Agent.ToolStatus == events.ToolError {
				delete(open, ev.Agent.ToolCallID)
			}
		}
	}
	for id, ev := range open {
		e.t.Errorf("tool call %s (%s, turn %d attempt %d) is left open in the log", id, ev.Agent.ToolName, ev.Turn, ev.Attempt)
	}
	return evs
}

// walkRunTurns calls fn with each event of the task's history (its current run) that concerns a
// RunTurn activity: its scheduling, and each event that names a scheduled RunTurn.
func (e *env) walkRunTurns(taskID string, fn func(ev *historypb.HistoryEvent)) {
	e.t.Helper()
	it := e.tc.Temporal.GetWorkflowHistory(e.ctx, taskID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	runTurn := map[int64]bool{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == task.ActivityRunTurn {
			runTurn[ev.GetEventId()] = true
			fn(ev)
			continue
		}
		var scheduled int64
		switch {
		case ev.GetActivityTaskStartedEventAttributes() != nil:
			scheduled = ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			scheduled = ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			scheduled = ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskCanceledEventAttributes() != nil:
			scheduled = ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			scheduled = ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
		}
		if runTurn[scheduled] {
			fn(ev)
		}
	}
}

// retryFailures returns, for each RunTurn attempt after the first that Temporal started, the
// type of the failure that ended the attempt before it: an application error's type, or
// "timeout:" and the timeout's kind. Temporal's own record, not drover's.
func (e *env) retryFailures(taskID string) []string {
	e.t.Helper()
	var out []string
	e.walkRunTurns(taskID, func(ev *historypb.HistoryEvent) {
		a := ev.GetActivityTaskStartedEventAttributes()
		if a == nil || a.GetAttempt() < 2 {
			return
		}
		f := a.GetLastFailure()
		switch {
		case f.GetApplicationFailureInfo() != nil:
			out = append(out, f.GetApplicationFailureInfo().GetType())
		case f.GetTimeoutFailureInfo() != nil:
			out = append(out, "timeout:"+f.GetTimeoutFailureInfo().GetTimeoutType().String())
		default:
			out = append(out, fmt.Sprintf("other: %v", f))
		}
	})
	return out
}

// waitRetry waits until an attempt other than lost owns the task's executor row, and returns
// when the test saw it.
func (e *env) waitRetry(taskID, lost string) time.Time {
	e.t.Helper()
	e.waitFor("the lost attempt's retry to begin", func() bool {
		x, err := store.GetExecutor(e.ctx, e.db(), taskID)
		return err == nil && x.AttemptID != lost
	})
	return time.Now()
}

// turnEvents returns the events of one turn; attempt 0 means all of its attempts.
func turnEvents(evs []loggedEvent, turn, attempt int) []loggedEvent {
	var out []loggedEvent
	for _, ev := range evs {
		if ev.Turn == turn && (attempt == 0 || ev.Attempt == attempt) {
			out = append(out, ev)
		}
	}
	return out
}

// hasText reports whether a message streamed in evs holds text.
func hasText(evs []loggedEvent, text string) bool {
	_, ok := streamed(evs, 0, text)
	return ok
}

// completes returns the main agent's complete events among evs.
func completes(evs []loggedEvent) []loggedEvent {
	var out []loggedEvent
	for _, ev := range evs {
		if ev.Agent.Type == events.TypeComplete && ev.Agent.ParentToolCallID == "" && ev.Agent.Data != nil {
			out = append(out, ev)
		}
	}
	return out
}

// openTransactions counts the sessions of the test's database that sit inside a transaction,
// and returns the last statement of one of them.
func (e *env) openTransactions() (n int, lastQuery string) {
	e.t.Helper()
	rows, err := e.db().Query(e.ctx, `SELECT query FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		n++
		if err := rows.Scan(&lastQuery); err != nil {
			e.t.Fatal(err)
		}
	}
	return n, lastQuery
}

// logLine reports whether the worker's log has a line holding every one of parts.
func (w *workerProc) logLine(parts ...string) bool {
	for line := range strings.Lines(w.log.String()) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}
