package realcli

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// TestAPIErrorThenGoodTurn: with CLAUDE_CODE_MAX_RETRIES=0 an HTTP 500 ends the turn at once with
// an error result (subtype success, is_error, api_error_status 500); the process stays usable and
// the next prompt succeeds. Only the last result decides the exit status.
func TestAPIErrorThenGoodTurn(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{MaxRetries: 0})
	h.Fake.Enqueue(
		offlinemodel.Fail(500, "api_error", 0),
		offlinemodel.Reply(offlinemodel.Text("Working again.")),
	)
	msgs := h.RunTurn(ctx, "First try.")
	bad := result(t, msgs)
	if !bad.IsError || bad.Subtype != claudecode.SubtypeSuccess || bad.APIErrorStatus != 500 || bad.TerminalReason != "api_error" ||
		!strings.HasPrefix(bad.Result, "API Error") {
		t.Errorf("error result: subtype %q is_error %v status %d terminal %q result %q",
			bad.Subtype, bad.IsError, bad.APIErrorStatus, bad.TerminalReason, bad.Result)
	}
	if n := len(ofType[*claudecode.SystemAPIRetry](msgs)); n != 0 {
		t.Errorf("%d api_retry frames with no retries allowed", n)
	}
	var synthetic bool
	for _, a := range ofType[*claudecode.AssistantMessage](msgs) {
		synthetic = synthetic || (a.Message.Model == "<synthetic>" && a.Error != "")
	}
	if !synthetic {
		t.Errorf("no synthetic assistant message for the API error\n%s", h.Dump())
	}
	good := result(t, h.RunTurn(ctx, "Second try."))
	if good.IsError || good.Result != "Working again." {
		t.Errorf("turn after the API error: is_error %v result %q", good.IsError, good.Result)
	}
	if n := len(h.Fake.MainRequests()); n != 2 {
		t.Errorf("%d main requests, want 2 (no retry)", n)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit after a good last turn: %v", err)
	}
	record(t, h, "api-error")
}

// TestAPIErrorExitStatus: when the last turn failed, closing stdin ends the CLI with exit code 1.
func TestAPIErrorExitStatus(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(offlinemodel.Fail(529, "overloaded_error", 0))
	if res := result(t, h.RunTurn(ctx, "Try.")); !res.IsError || res.APIErrorStatus != 529 {
		t.Errorf("result: is_error %v status %d", res.IsError, res.APIErrorStatus)
	}
	var exit *claudecode.ExitError
	if err := finish(t, h); !errors.As(err, &exit) || exit.Code != 1 || exit.Signal != 0 {
		t.Errorf("exit after a failed last turn: %v, want code 1", err)
	}
}

// TestMaxTurns: with --max-turns 1 a tool call uses up the only turn: the tool runs, the model is
// not asked again, and the result is error_max_turns.
func TestMaxTurns(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{MaxTurns: 1, PermissionMode: claudecode.PermissionBypass}})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_drover_max_turns", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("Must not be asked for.")),
	)
	msgs := h.RunTurn(ctx, "Run the marker command, then tell me about it.")
	res := result(t, msgs)
	if !res.IsError || res.Subtype != claudecode.SubtypeErrorMaxTurns || res.Result != "" {
		t.Errorf("result: subtype %q is_error %v result %q, want error_max_turns without result", res.Subtype, res.IsError, res.Result)
	}
	t.Logf("max turns result: num_turns %d terminal_reason %q errors %q", res.NumTurns, res.TerminalReason, res.Errors)
	if n := len(h.Fake.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1", n)
	}
	trs := toolResultFrames(msgs)
	if len(trs) != 1 || trs[0].IsError || strings.TrimSpace(trs[0].Content.String()) != "drover-bash-42" {
		t.Errorf("the tool call did not run before the limit: %+v", trs)
	}
	record(t, h, "max-turns")
}
