package realcli

import (
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// TestTextTurn: one prompt, one scripted text answer. The result carries that text and the session
// id that system/init announced, and the fake saw our prompt.
func TestTextTurn(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Hello from the fake model.")))

	msgs := h.RunTurn(ctx, "Say hello, drover-text-prompt.")
	t.Logf("cold start (spawn to system/init): %v", h.ColdStart())
	res := result(t, msgs)
	if res.IsError || res.Subtype != claudecode.SubtypeSuccess || res.Result != "Hello from the fake model." {
		t.Fatalf("result: is_error=%v subtype=%q result=%q", res.IsError, res.Subtype, res.Result)
	}
	inits := ofType[*claudecode.SystemInit](msgs)
	if len(inits) != 1 {
		t.Fatalf("%d system/init in the turn, want 1", len(inits))
	}
	if !claudecode.IsUUID(res.SessionID) || inits[0].SessionID != res.SessionID {
		t.Errorf("session id: init %q, result %q", inits[0].SessionID, res.SessionID)
	}
	if inits[0].CWD != h.WorkDir {
		t.Errorf("init cwd %q, want %q", inits[0].CWD, h.WorkDir)
	}
	if inits[0].APIKeySource != "ANTHROPIC_API_KEY" {
		t.Errorf("apiKeySource %q", inits[0].APIKeySource)
	}
	main := h.Fake.MainRequests()
	if len(main) != 1 || !strings.Contains(main[0].LastUserText(), "Say hello, drover-text-prompt.") {
		t.Fatalf("the fake saw %d main requests; last user text %q", len(main), lastUserText(main))
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit after a good turn: %v", err)
	}
	record(t, h, "text")
}

func lastUserText(rs []offlinemodel.Request) string {
	if len(rs) == 0 {
		return ""
	}
	return rs[len(rs)-1].LastUserText()
}
