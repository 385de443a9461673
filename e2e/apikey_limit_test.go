package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// apiKeyAccount is the fake API's account of the key workers run with.
var apiKeyAccount = fa.APIKeyAccount(testAPIKey)

// startRetryingWorker runs `drover worker` as host hostID with the CLI's own retries on (the
// other tests turn them off), so that a 429 is announced by system/api_retry before the CLI
// waits it out.
func (e *env) startRetryingWorker(hostID string, extraArgs ...string) *workerProc {
	e.t.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker", "--keep-alive", "2m"}, extraArgs...)...)
	cmd.Env = setEnv(e.workerEnv(hostID, "debug"), "CLAUDE_CODE_MAX_RETRIES=10")
	return launchWorker(e.t, e.t, hostID, cmd)
}

// With an API key, the first 429 the CLI announces it will retry pauses the whole account at
// once, for the retry-after the API announced: the task shows waiting_for_limit (not running
// with a CLI asleep in its retry), the account's other tasks wait before they send a request,
// and the fake API's log shows the one refused request and nothing else until the announced
// reset; then one request goes first, and every turn finishes.
func TestAPIKeyRateLimitPausesTheAccountAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startRetryingWorker("host-" + e.queue)
	const n = 3
	ids, reset, limitedFrom, waiting := e.pauseAccount("apikey", n, apiKeyAccount, 15*time.Second)
	if w := waiting[0].Wait; w == nil || w.Reason != task.WaitRateLimit || w.ResetsAt.Before(reset) || w.ResetsAt.After(reset.Add(6*time.Second)) {
		t.Fatalf("the limited task's wait: %+v; want rate_limit until about %s (the retry-after announced)", w, reset)
	}

	// The fake's own log: one request refused, none other until the announced reset; then one
	// goes first and alone.
	oneRefusedThenOneAlone(t, messages(e.fake.Calls().Of(apiKeyAccount)), limitedFrom, reset, n)
	e.checkResumed(ids)
}

// A 429 whose retry-after is beyond the 60 s the CLI waits by itself (here 90 s) pauses the
// account for that delay too, not for drover's default minute: the task waits until the
// announced reset (the retry-after plus the CLI's jitter, at most a quarter more), the account's
// row shows it as its reset with no later look, the account's other tasks wait without a
// request, and the fake API's log shows the one refused request and nothing else until the
// reset; then one request goes first, alone, and every turn finishes.
func TestAPIKeyRetryAfterBeyondTheCLIsCapPausesTheAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startRetryingWorker("host-" + e.queue)
	const n = 5
	warm := make([]string, n)
	for i := range warm {
		warm[i] = fmt.Sprintf("warm up %d", i)
	}
	ids := e.startTasks("retry-after", warm...)
	for _, id := range ids {
		e.waitTurns(id, 1)
	}

	const announced = 90 * time.Second
	reset := time.Now().Add(announced).Truncate(time.Second)
	e.fake.SetLimit(apiKeyAccount, fa.UsageLimit(fa.WindowFiveHour, reset))
	limitedFrom := time.Now()
	if _, err := e.tc.Prompt(e.ctx, ids[0], task.Prompt{Text: "second prompt 0"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitStatus(ids[0], task.StatusWaitingForLimit)
	latest := reset.Add(announced/4 + 5*time.Second)
	if st.Wait == nil || st.Wait.Reason != task.WaitRateLimit || st.Wait.ResetsAt.Before(reset.Add(-2*time.Second)) || st.Wait.ResetsAt.After(latest) {
		t.Fatalf("the limited task's wait: %+v; want rate_limit until between %s and %s (the retry-after announced)", st.Wait, reset, latest)
	}
	accountReset := st.Wait.ResetsAt
	accts, err := store.ListAccounts(e.ctx, e.db())
	if err != nil || len(accts) != 1 {
		t.Fatalf("accounts: %+v, %v", accts, err)
	}
	if ac := accts[0]; ac.Reason != task.WaitRateLimit || !sameInstant(ac.ResetsAt, accountReset) || !sameInstant(ac.BlockedUntil, accountReset) {
		t.Fatalf("the account's row: %+v; want rate_limit, its reset and next look both %s", ac, accountReset)
	}
	for i := 1; i < n; i++ {
		if _, err := e.tc.Prompt(e.ctx, ids[i], task.Prompt{Text: fmt.Sprintf("second prompt %d", i)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[1:] {
		if st := e.waitStatus(id, task.StatusWaitingForLimit); !sameInstant(st.Wait.ResetsAt, accountReset) {
			t.Fatalf("task %s waits until %s, want the account's reset %s", id, st.Wait.ResetsAt, accountReset)
		}
	}
	if time.Now().After(reset) {
		t.Fatal("the tasks took until the reset to pause; the test proves nothing")
	}
	for _, id := range ids {
		e.waitTurns(id, 2)
	}

	// The fake's own log: one request refused, none other until the account's reset; then one
	// goes first and alone.
	oneRefusedThenOneAlone(t, messages(e.fake.Calls().Of(apiKeyAccount)), limitedFrom, accountReset, n)
	e.checkResumed(ids)
}

// sameInstant reports whether a and b are one instant as Postgres keeps it (to the microsecond).
func sameInstant(a, b time.Time) bool {
	return a.Sub(b).Abs() < time.Microsecond
}
