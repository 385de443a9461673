package realcli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// bashMarker is a command that needs permission (it writes) and whose output ("drover-bash-42")
// only a shell can produce from its text.
const bashMarker = "mkdir -p made-by-bash && echo drover-bash-$((6*7))"

// permissionCommand asks for every permission over stdio in the default permission mode.
var permissionCommand = claudecode.Command{PermissionPromptToolStdio: true}

// answerTools answers every can_use_tool with answer and every hook with no opinion.
func answerTools(answer func(*claudecode.CanUseTool) claudecode.PermissionResult) claudecode.Handler {
	return claudecode.HandlerFunc(func(_ context.Context, req *claudecode.ControlRequest) (any, error) {
		if req.CanUseTool != nil {
			return answer(req.CanUseTool), nil
		}
		return claudecode.HookOutput{}, nil
	})
}

func allowAll(c *claudecode.CanUseTool) claudecode.PermissionResult {
	return claudecode.AllowTool(nil, c.ToolUseID)
}

// inputField returns a string member of a tool input.
func inputField(raw json.RawMessage, name string) string {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	s, _ := m[name].(string)
	return s
}

// TestBashAllow: in the default permission mode with --permission-prompt-tool=stdio, a Bash call
// arrives as can_use_tool; allowing it runs the command, and the fake receives its real output as
// the tool_result.
func TestBashAllow(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: permissionCommand, Handler: answerTools(allowAll)})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("Running it."),
			offlinemodel.ToolUseID("toolu_drover_bash_allow", "Bash", map[string]any{"command": bashMarker, "description": "Make a folder and print a marker"})),
		offlinemodel.Reply(offlinemodel.Text("The command printed the marker.")),
	)
	msgs := h.RunTurn(ctx, "Run the marker command.")
	res := result(t, msgs)
	if res.IsError || res.Result != "The command printed the marker." {
		t.Fatalf("result: is_error=%v result=%q\n%s", res.IsError, res.Result, h.Dump())
	}
	asks := controlRequests(msgs, claudecode.RequestCanUseTool)
	if len(asks) != 1 {
		t.Fatalf("%d can_use_tool requests, want 1\n%s", len(asks), h.Dump())
	}
	c := asks[0].CanUseTool
	if c.ToolName != "Bash" || c.ToolUseID != "toolu_drover_bash_allow" || inputField(c.Input, "command") != bashMarker {
		t.Errorf("can_use_tool: tool %q id %q input %s", c.ToolName, c.ToolUseID, c.Input)
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	trs := main[1].ToolResults()
	if len(trs) != 1 || trs[0].ToolUseID != "toolu_drover_bash_allow" || trs[0].IsError || strings.TrimSpace(trs[0].Content) != "drover-bash-42" {
		t.Errorf("tool results the fake received: %+v", trs)
	}
	if fi, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); err != nil || !fi.IsDir() {
		t.Errorf("the command did not run in the work dir: %v", err)
	}
	// The CLI also reports the structured output on stdout.
	var stdout string
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		if m := clitest.Object(u.ToolUseResult); m != nil {
			stdout, _ = m["stdout"].(string)
		}
	}
	if strings.TrimSpace(stdout) != "drover-bash-42" {
		t.Errorf("tool_use_result stdout %q", stdout)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "bash-allow")
}

// TestBashDeny: denying a can_use_tool sends the model an error tool_result with our message; the
// command does not run and the result lists the denial.
func TestBashDeny(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const why = "drover test: shell commands are not allowed here"
	h := start(t, clitest.Options{Command: permissionCommand, Handler: answerTools(func(*claudecode.CanUseTool) claudecode.PermissionResult {
		return claudecode.DenyTool(why, false)
	})})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_drover_bash_deny", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("Understood, I will not run it.")),
	)
	msgs := h.RunTurn(ctx, "Run the marker command.")
	res := result(t, msgs)
	if res.IsError || res.Result != "Understood, I will not run it." {
		t.Fatalf("result: is_error=%v result=%q\n%s", res.IsError, res.Result, h.Dump())
	}
	if n := len(controlRequests(msgs, claudecode.RequestCanUseTool)); n != 1 {
		t.Errorf("%d can_use_tool requests, want 1", n)
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	trs := main[1].ToolResults()
	if len(trs) != 1 || trs[0].ToolUseID != "toolu_drover_bash_deny" || !trs[0].IsError || !strings.Contains(trs[0].Content, why) {
		t.Errorf("tool results the fake received: %+v", trs)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("the denied command ran: %v", err)
	}
	if len(res.PermissionDenials) != 1 || res.PermissionDenials[0].ToolUseID != "toolu_drover_bash_deny" || res.PermissionDenials[0].ToolName != "Bash" {
		t.Errorf("permission_denials %+v", res.PermissionDenials)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "bash-deny")
}

// TestBashDenyInterrupt: a deny with interrupt ends the turn at once with error_during_execution
// (terminal_reason aborted_tools); the model is not asked again. The CLI then drops our message:
// the tool_result is its own generic rejection, followed by an interrupt note.
func TestBashDenyInterrupt(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const why = "drover test: stop right there"
	h := start(t, clitest.Options{Command: permissionCommand, Handler: answerTools(func(*claudecode.CanUseTool) claudecode.PermissionResult {
		return claudecode.DenyTool(why, true)
	})})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_drover_bash_stop", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("Next turn.")),
	)
	msgs := h.RunTurn(ctx, "Run the marker command.")
	res := result(t, msgs)
	if !res.IsError || res.Subtype != claudecode.SubtypeErrorDuringExec || res.TerminalReason != "aborted_tools" {
		t.Errorf("result: subtype %q is_error %v terminal_reason %q, want error_during_execution/aborted_tools",
			res.Subtype, res.IsError, res.TerminalReason)
	}
	if n := len(h.Fake.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1: the turn must end without asking the model again", n)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("the denied command ran: %v", err)
	}
	trs := toolResultFrames(msgs)
	if len(trs) != 1 || trs[0].ToolUseID != "toolu_drover_bash_stop" || !trs[0].IsError {
		t.Errorf("tool_result frames on stdout: %+v", trs)
	}
	var sawNote bool
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		sawNote = sawNote || strings.HasPrefix(u.Message.Content.String(), "[Request interrupted by user")
	}
	if !sawNote {
		t.Errorf("no interrupt note on stdout\n%s", h.Dump())
	}
	// The process takes the next prompt, and the model then sees the rejection in the history.
	next := result(t, h.RunTurn(ctx, "Carry on."))
	if next.IsError || next.Result != "Next turn." {
		t.Errorf("turn after the interrupt: is_error=%v result=%q", next.IsError, next.Result)
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	if hist := main[1].ToolResults(); len(hist) != 1 || hist[0].ToolUseID != "toolu_drover_bash_stop" || !hist[0].IsError {
		t.Errorf("tool results in the next turn's history: %+v", hist)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "bash-deny-interrupt")
}

// TestWriteEdit: Write and Edit, both allowed through can_use_tool, change the file on disk.
func TestWriteEdit(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: permissionCommand, Handler: answerTools(allowAll)})
	path := filepath.Join(h.WorkDir, "notes.txt")
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("Writing the file."), offlinemodel.UseWrite(path, "alpha\nbeta\n")),
		offlinemodel.Reply(offlinemodel.UseEdit(path, "beta", "gamma")),
		offlinemodel.Reply(offlinemodel.Text("Written and edited.")),
	)
	msgs := h.RunTurn(ctx, "Write notes.txt, then change beta to gamma.")
	res := result(t, msgs)
	if res.IsError || res.Result != "Written and edited." {
		t.Fatalf("result: is_error=%v result=%q\n%s", res.IsError, res.Result, h.Dump())
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "alpha\ngamma\n" {
		t.Errorf("notes.txt: %q, %v", b, err)
	}
	var asked []string
	for _, r := range controlRequests(msgs, claudecode.RequestCanUseTool) {
		asked = append(asked, r.CanUseTool.ToolName)
		if got := inputField(r.CanUseTool.Input, "file_path"); got != path {
			t.Errorf("%s asked for %q, want %q", r.CanUseTool.ToolName, got, path)
		}
	}
	if strings.Join(asked, ",") != "Write,Edit" {
		t.Errorf("can_use_tool for %v, want Write then Edit", asked)
	}
	main := h.Fake.MainRequests()
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3", len(main))
	}
	for i, want := range []int{1, 2} {
		trs := main[want].ToolResults()
		if len(trs) != i+1 || trs[i].IsError {
			t.Errorf("request %d tool results: %+v", want+1, trs)
		}
	}
	// Structured results: Write reports a create, Edit the strings it swapped.
	var kinds []string
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		if m := clitest.Object(u.ToolUseResult); m != nil {
			if typ, _ := m["type"].(string); typ != "" {
				kinds = append(kinds, typ)
			} else if m["oldString"] == "beta" && m["newString"] == "gamma" {
				kinds = append(kinds, "edit")
			}
		}
	}
	if strings.Join(kinds, ",") != "create,edit" {
		t.Errorf("tool_use_result kinds %v, want create then edit\n%s", kinds, h.Dump())
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "write-edit")
}
