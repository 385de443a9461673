package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// droverCLI runs the drover binary as a person would, against the test's Temporal, database and
// queue, and returns what it printed on stdout (stderr follows on failure).
func (e *env) droverCLI(args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.drover, args...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + e.home,
		"DROVER_DATABASE_URL=" + e.dsn,
		"TEMPORAL_ADDRESS=" + e.temporal,
		"TEMPORAL_NAMESPACE=" + suite.temporal.Namespace(),
		"DROVER_TASK_QUEUE=" + e.queue,
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// mustDrover is droverCLI, failing the test when the command fails.
func (e *env) mustDrover(args ...string) string {
	e.t.Helper()
	out, err := e.droverCLI(args...)
	if err != nil {
		e.t.Fatalf("drover %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// script answers the main conversation's requests with steps, in order, each seeing the request
// it answers (the plan file's path, the tool results); past the last step the fake's default
// reply. It returns how many steps were served so far.
func (e *env) script(steps ...func(*fa.Request) fa.Response) func() int {
	var mu sync.Mutex
	next := 0
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		if next >= len(steps) {
			return fa.Response{}, false
		}
		next++
		return steps[next-1](r), true
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return next
	}
}

// say is a step that answers with blocks, whatever was asked.
func say(blocks ...fa.Block) func(*fa.Request) fa.Response {
	return func(*fa.Request) fa.Response { return fa.Reply(blocks...) }
}

// permissionRequests returns the task's permission_request events.
func (e *env) permissionRequests(taskID string) []loggedEvent {
	e.t.Helper()
	var out []loggedEvent
	for _, ev := range e.events(taskID) {
		if ev.Agent.Type == events.TypePermissionRequest {
			out = append(out, ev)
		}
	}
	return out
}

// requestRows returns every permission_requests row of the task, oldest first.
func (e *env) requestRows(taskID string) []store.PermissionRequest {
	e.t.Helper()
	rows, err := store.ListTaskPermissions(e.ctx, e.db(), taskID)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

// row returns one permission_requests row.
func (e *env) row(taskID, requestID string) store.PermissionRequest {
	e.t.Helper()
	r, err := store.GetPermission(e.ctx, e.db(), taskID, requestID)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// waitAsked waits until the task's workflow shows a request waiting whose summary holds what,
// and returns it.
func (e *env) waitAsked(taskID, what string) task.PendingRequest {
	e.t.Helper()
	var found task.PendingRequest
	e.waitFor("a request about "+what+" to wait for a person", func() bool {
		st, err := e.tc.State(e.ctx, taskID)
		if err != nil {
			return false
		}
		for _, r := range st.Awaiting {
			if strings.Contains(r.Summary, what) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// toolResultsSince returns the tool results that the main requests the fake received after the
// first n carried for the first time, in order: what the model read since.
func (e *env) toolResultsSince(n int) []fa.ToolResult {
	reqs := e.fake.MainRequests()
	seen := map[string]bool{}
	for _, r := range reqs[:min(n, len(reqs))] {
		for _, tr := range r.ToolResults() {
			seen[tr.ToolUseID] = true
		}
	}
	var out []fa.ToolResult
	for _, r := range reqs[min(n, len(reqs)):] {
		for _, tr := range r.ToolResults() {
			if !seen[tr.ToolUseID] {
				seen[tr.ToolUseID] = true
				out = append(out, tr)
			}
		}
	}
	return out
}

// pendingJSON is one row of drover task pending --output json.
type pendingJSON struct {
	TaskID      string          `json:"task_id"`
	RequestID   string          `json:"request_id"`
	Turn        int             `json:"turn"`
	Kind        string          `json:"kind"`
	Tool        string          `json:"tool"`
	Summary     string          `json:"summary"`
	Input       json.RawMessage `json:"input"`
	Suggestions json.RawMessage `json:"suggestions"`
	Reasked     bool            `json:"reasked"`
	Since       time.Time       `json:"since"`
	Deadline    time.Time       `json:"deadline"`
}

// pendingOf runs drover task pending --task TASK --output json.
func (e *env) pendingOf(taskID string) []pendingJSON {
	e.t.Helper()
	out := e.mustDrover("task", "pending", "--task", taskID, "--output", "json")
	var rows []pendingJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		e.t.Fatalf("drover task pending --output json: %v\n%s", err, out)
	}
	return rows
}

// lines counts the non-empty lines of a file; 0 when it does not exist.
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l := range strings.Lines(string(b)) {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}
