package realcli

import (
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/clitest"
	"github.com/drover-run/drover/internal/fakeanthropic"
)

func TestZZExplore(t *testing.T) {
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(fakeanthropic.Reply(fakeanthropic.Text("A.")))
	r1 := result(t, h.RunTurn(ctx, "A"))
	h.Stop(ctx)
	h.Resume(ctx, r1.SessionID, "00000000-0000-4000-8000-000000000042")
	select {
	case <-h.Process().Exited():
		t.Logf("bad resume-at exited without a prompt; stdout %d lines: %s", len(h.Stdout()), h.Dump())
	case <-time.After(5 * time.Second):
		t.Logf("bad resume-at still running after 5s without a prompt")
	}
	t.Logf("wait: %v", h.Process().Wait(ctx))
	h.Restart(ctx, claudecode.Command{Resume: "00000000-0000-4000-8000-000000000043"})
	select {
	case <-h.Process().Exited():
		t.Logf("unknown --resume exited without a prompt; %s", h.Dump())
	case <-time.After(5 * time.Second):
		t.Logf("unknown --resume still running after 5s without a prompt")
		h.Send(ctx, claudecode.Prompt{Text: "x"})
		<-h.Process().Exited()
		t.Logf("after prompt: %s", h.Dump())
	}
	t.Logf("wait: %v", h.Process().Wait(ctx))
}
