package claudecode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/testtools"
)

// realCommand returns a Command for the pinned CLI, offline: fresh HOME and config dir, and an API base
// URL on which nothing listens (these tests never reach a model).
func realCommand(t *testing.T) Command {
	t.Helper()
	bin, err := testtools.ClaudeBin()
	if err != nil {
		t.Skipf("claude CLI not available (run scripts/tools.sh): %v", err)
	}
	home := t.TempDir()
	work := filepath.Join(home, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return Command{
		Path:      bin,
		Dir:       work,
		Env:       append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLAUDE_CODE_MAX_RETRIES=0"}, OfflineEnv()...),
		APIKey:    "sk-ant-test-claudecode",
		BaseURL:   "http://127.0.0.1:9", // discard port: connections are refused
		ConfigDir: filepath.Join(home, "config"),
	}
}

func startReal(t *testing.T, ctx context.Context, c Command) *Process {
	t.Helper()
	cmd, err := c.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(ctx, cmd, ProcessConfig{Client: ClientConfig{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

// TestRealCLIControlPlane drives the control plane of the real CLI without a turn: initialize with
// hooks, set_permission_mode, interrupt, an unknown request, and a clean exit on stdin EOF.
func TestRealCLIControlPlane(t *testing.T) {
	t.Parallel()
	c := realCommand(t)
	c.PermissionPromptToolStdio = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := startReal(t, ctx, c)
	cl := p.Client()

	resp, err := cl.Initialize(ctx, InitializeRequest{Hooks: map[string][]HookMatcher{
		"PreToolUse": {{Matcher: "^Bash$", HookCallbackIDs: []string{"tool_approval"}}},
		"Stop":       {{HookCallbackIDs: []string{"stop_check"}}},
	}})
	if err != nil {
		t.Fatalf("Initialize: %v (stderr %q)", err, p.Stderr())
	}
	if len(resp.Commands) == 0 || len(resp.Models) == 0 || resp.Commands[0].Name == "" {
		t.Errorf("initialize response without commands or models: %.300s", resp.Raw)
	}
	if err := cl.SetPermissionMode(ctx, PermissionPlan); err != nil {
		t.Errorf("SetPermissionMode: %v", err)
	}
	if err := cl.Interrupt(ctx); err != nil {
		t.Errorf("Interrupt with no turn running: %v", err)
	}
	var re *RequestError
	if _, err := cl.Request(ctx, "no_such_request", nil); !errors.As(err, &re) || re.Message == "" {
		t.Errorf("unknown request: %v, want a RequestError", err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Errorf("Stop: %v (stderr %q)", err, p.Stderr())
	}
}

// TestRealCLIResumeRejected resumes a session that does not exist.
func TestRealCLIResumeRejected(t *testing.T) {
	t.Parallel()
	c := realCommand(t)
	c.Resume = "0b5e4d43-2f9a-4c5e-9a57-3c1d2e4f5a6b"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := startReal(t, ctx, c)
	if err := p.Client().SendUser(ctx, Prompt{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	var result *ResultMessage
	var err error
	for {
		var m Message
		if m, err = p.Recv(ctx); err != nil {
			break
		}
		if r, ok := m.(*ResultMessage); ok {
			result = r
		}
	}
	if result == nil || !result.IsError || result.Subtype != SubtypeErrorDuringExec || result.SessionID != c.Resume {
		t.Errorf("result = %+v", result)
	}
	var rr *ResumeRejectedError
	var ee *ExitError
	if !errors.As(err, &rr) || !errors.As(err, &ee) || ee.Code != 1 {
		t.Errorf("end of stream: %v, want ResumeRejectedError(ExitError code 1)", err)
	}
}
