package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/worker"
)

// scrapeMetrics returns what the worker's /metrics at addr (loopback, no token) serves.
func (e *env) scrapeMetrics(addr string) string {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+addr+worker.MetricsPath, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("scraping the worker: status %d, %v", resp.StatusCode, err)
	}
	return string(body)
}

// loggedAsProblem returns the log lines holding msg at level WARN or ERROR.
func loggedAsProblem(log, msg string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		for _, lvl := range []string{"level=WARN", "level=ERROR", `"level":"WARN"`, `"level":"ERROR"`} {
			if strings.Contains(line, lvl) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// A usage limit held past its announced reset is a wait, not a failure: the failure counter
// stays at 0, nothing about it is logged as an error or warning, the waiting gauge reads 0
// before and after the wait, and the looks past the reset (each one a refused request in the
// fake API's log) come further and further apart, as the worker's flags bound them, until the
// limit lifts and the turn finishes by itself.
func TestLimitWaitIsNotAFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := freePort(t)
	w := e.startSubscriptionWorker("host-"+e.queue, "--metrics-listen", addr,
		"--limit-recheck-first", "2s", "--limit-recheck", "8s")
	e.waitFor("the worker to serve its metrics", func() bool {
		resp, err := http.Get("http://" + addr + worker.MetricsPath)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	body := e.scrapeMetrics(addr)
	for _, r := range task.WaitReasons {
		if !strings.Contains(body, `drover_tasks_waiting{`) || !strings.Contains(body, `reason="`+string(r)+`"`) {
			t.Errorf("with nothing waiting, drover_tasks_waiting has no series for %s:\n%s", r, grepLines(body, "drover_tasks_waiting"))
		}
	}

	reset := time.Now().Add(5 * time.Second).Truncate(time.Second)
	e.fake.SetLimit(subscription, fa.UsageLimit(fa.WindowFiveHour, reset).HeldPastReset())
	ids := e.startTasks("held", "first")
	e.waitStatus(ids[0], task.StatusWaitingForLimit)
	const looks = 3
	e.waitFor("three looks past the reset", func() bool {
		return len(messages(e.fake.Calls().Of(subscription)).Started(reset, time.Now().Add(time.Hour))) >= looks
	})
	// A task that comes to the account after a refused look shows the announced reset, and
	// drover's next look apart from it; so does the account.
	late := e.startTasks("held-late", "late")[0]
	if st := e.waitStatus(late, task.StatusWaitingForLimit); st.Wait == nil || !st.Wait.ResetsAt.Equal(reset) || !st.Wait.RetryAt.After(reset) {
		t.Errorf("the task that came after a refused look waits %+v; want resets_at %s and a later retry_at", st.Wait, reset)
	}
	var accts []struct {
		ResetsAt time.Time `json:"resets_at"`
		NextLook time.Time `json:"next_look_at"`
	}
	if err := json.Unmarshal([]byte(e.mustDrover("account", "list", "--output", "json")), &accts); err != nil || len(accts) != 1 {
		t.Fatalf("account list: %+v, %v", accts, err)
	}
	if !accts[0].ResetsAt.Equal(reset) || !accts[0].NextLook.After(reset) {
		t.Errorf("the account shows resets_at %s and next look %s; want the announced %s and a later look", accts[0].ResetsAt, accts[0].NextLook, reset)
	}
	after := messages(e.fake.Calls().Of(subscription)).Started(reset, time.Now().Add(time.Hour))
	if len(after.Limited()) != len(after) {
		t.Fatalf("looks past the reset: %d, %d refused; want all refused", len(after), len(after.Limited()))
	}
	for i := 1; i < looks; i++ {
		// Each wait is at least as long as the limit had outlasted its reset, plus the first wait.
		gap, least := after[i].Start.Sub(after[i-1].Start), after[i-1].Start.Sub(reset)+2*time.Second
		if least > 8*time.Second {
			least = 8 * time.Second
		}
		if gap < least {
			t.Errorf("look %d came %s after the one before; want at least %s", i+1, gap, least)
		}
	}
	e.fake.LiftLimit(subscription)
	for _, id := range []string{ids[0], late} {
		if st := e.waitTurns(id, 1); st.Totals.FailedTurns != 0 || st.LastError != "" {
			t.Errorf("task %s after its wait: %+v", id, st)
		}
	}

	body = e.scrapeMetrics(addr)
	if n := sampleSum(body, "drover_attempts_failed_total", ""); n != 0 {
		t.Errorf("drover_attempts_failed_total = %v after a wait and no failure:\n%s", n, grepLines(body, "drover_attempts_failed_total"))
	}
	if !strings.Contains(body, `drover_tasks_waiting{`) || sampleSum(body, "drover_tasks_waiting", "") != 0 {
		t.Errorf("after the wait, drover_tasks_waiting should read 0:\n%s", grepLines(body, "drover_tasks_waiting"))
	}
	log := w.log.String()
	for _, msg := range []string{"Activity error.", "turn attempt failed"} {
		if lines := loggedAsProblem(log, msg); len(lines) > 0 {
			t.Errorf("the wait was logged as a problem (%q):\n%s", msg, strings.Join(lines, "\n"))
		}
	}
}

// grepLines returns the lines of body that hold s.
func grepLines(body, s string) string {
	lines := strings.Split(body, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return !strings.Contains(l, s) }), "\n")
}
