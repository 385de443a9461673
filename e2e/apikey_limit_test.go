package e2e

import (
	"os/exec"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
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
