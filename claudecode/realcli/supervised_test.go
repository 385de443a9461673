package realcli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// supervisedCommand is how drover runs a supervised session: every check bypassed, except that
// the PreToolUse hook of claudecode.SupervisedHooks asks for everything but the read-only tools,
// and asked calls come to us as can_use_tool.
var supervisedCommand = claudecode.Command{PermissionMode: claudecode.PermissionBypass, PermissionPromptToolStdio: true}

// supervisedReason is the permissionDecisionReason of our ask.
const supervisedReason = "drover supervised: a person decides"

// Callback ids of the supervised hooks.
const (
	toolCallback = "tool_approval"
	stopCallback = "stop_check"
)

// supervisedHandler answers as drover's supervised mode does: a PreToolUse hook asks, except in
// plan mode, where it has no opinion so that the CLI's plan mode decides; a Stop hook approves;
// can_use_tool is answered by answer.
func supervisedHandler(answer func(*claudecode.ControlRequest) (any, error)) claudecode.Handler {
	return claudecode.HandlerFunc(func(_ context.Context, req *claudecode.ControlRequest) (any, error) {
		if cb := req.HookCallback; cb != nil {
			switch {
			case cb.Input.HookEventName == claudecode.HookPreToolUse && cb.Input.PermissionMode != claudecode.PermissionPlan:
				return claudecode.PreToolUseDecision(claudecode.DecisionAsk, supervisedReason), nil
			case cb.Input.HookEventName == claudecode.HookStop:
				return claudecode.StopApprove(""), nil
			}
			return claudecode.HookOutput{}, nil
		}
		return answer(req)
	})
}

// allowRequest allows every can_use_tool.
func allowRequest(req *claudecode.ControlRequest) (any, error) {
	return claudecode.AllowTool(nil, req.CanUseTool.ToolUseID), nil
}

// startSupervised starts a supervised session with opts' extra settings and registers its hooks.
func startSupervised(t *testing.T, opts clitest.Options, answer func(*claudecode.ControlRequest) (any, error)) *clitest.Harness {
	t.Helper()
	opts.Command.PermissionMode = supervisedCommand.PermissionMode
	opts.Command.PermissionPromptToolStdio = true
	opts.Handler = supervisedHandler(answer)
	h := start(t, opts)
	if _, err := h.Initialize(testContext(t), claudecode.InitializeRequest{Hooks: claudecode.SupervisedHooks(toolCallback, "")}); err != nil {
		t.Fatalf("initialize: %v\n%s", err, h.Dump())
	}
	return h
}

// hookCallbacks returns the PreToolUse hook callbacks in msgs.
func hookCallbacks(msgs []claudecode.Message, event string) []*claudecode.ControlRequest {
	var out []*claudecode.ControlRequest
	for _, r := range ofType[*claudecode.ControlRequest](msgs) {
		if r.HookCallback != nil && r.HookCallback.Input.HookEventName == event {
			out = append(out, r)
		}
	}
	return out
}

// requestFor returns the position of the control request of kind (a can_use_tool or a PreToolUse
// hook_callback) for toolUseID in msgs, or -1.
func requestFor(msgs []claudecode.Message, toolUseID string, hook bool) int {
	return index(msgs, func(m claudecode.Message) bool {
		r, ok := m.(*claudecode.ControlRequest)
		if !ok {
			return false
		}
		if hook {
			return r.HookCallback != nil && r.HookCallback.Input.HookEventName == claudecode.HookPreToolUse && r.HookCallback.ToolUseID == toolUseID
		}
		return r.CanUseTool != nil && r.CanUseTool.ToolUseID == toolUseID
	})
}

// TestSupervisedMatcher pins claudecode.SupervisedToolMatcher against the CLI: the CLI reads it as
// a regular expression (negative lookahead included), so Bash, Write and an MCP tool are asked —
// a PreToolUse hook_callback, then a can_use_tool for the same call — while Read and ToolSearch
// run without either. A can_use_tool raised by the hook carries our reason, decision_reason_type
// "hook", and neither permission_suggestions nor blocked_path. It also pins the tool names of the
// pinned version that ReadOnlyTools relies on.
func TestSupervisedMatcher(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := startSupervised(t, clitest.Options{Command: claudecode.Command{MCPServers: testMCPServers(), StrictMCPConfig: true}}, allowRequest)
	notes := filepath.Join(h.WorkDir, "notes.txt")
	if err := os.WriteFile(notes, []byte("supervised notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := filepath.Join(h.WorkDir, "created.txt")
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_read", "Read", map[string]any{"file_path": notes})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_search", "ToolSearch", map[string]any{"query": "select:CronList"})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_bash", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_write", "Write", map[string]any{"file_path": created, "content": "made\n"})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_mcp", mcpToolFull, map[string]any{"text": "hello"})),
		offlinemodel.Reply(offlinemodel.Text("Supervised done.")),
	)
	msgs := h.RunTurn(ctx, "Read, search, run, write and echo.")
	if res := result(t, msgs); res.IsError || res.Result != "Supervised done." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}

	var hooked, asked []string
	for _, r := range hookCallbacks(msgs, claudecode.HookPreToolUse) {
		hooked = append(hooked, r.HookCallback.Input.ToolName)
		if in := r.HookCallback.Input; in.PermissionMode != claudecode.PermissionBypass || r.HookCallback.CallbackID != toolCallback {
			t.Errorf("hook for %s: permission_mode %q callback %q", in.ToolName, in.PermissionMode, r.HookCallback.CallbackID)
		}
	}
	for _, r := range controlRequests(msgs, claudecode.RequestCanUseTool) {
		c := r.CanUseTool
		asked = append(asked, c.ToolName)
		if c.DecisionReason != supervisedReason || c.DecisionReasonType != "hook" || c.DecisionReasonHookEvent != claudecode.HookPreToolUse {
			t.Errorf("%s: decision_reason %q type %q hook event %q", c.ToolName, c.DecisionReason, c.DecisionReasonType, c.DecisionReasonHookEvent)
		}
		if len(c.PermissionSuggestions) != 0 || c.BlockedPath != "" {
			t.Errorf("%s: suggestions %s blocked_path %q, want neither under a hook's ask", c.ToolName, c.PermissionSuggestions, c.BlockedPath)
		}
		if hook, ask := requestFor(msgs, c.ToolUseID, true), requestFor(msgs, c.ToolUseID, false); hook < 0 || hook > ask {
			t.Errorf("%s: hook_callback at %d, can_use_tool at %d", c.ToolName, hook, ask)
		}
	}
	want := []string{"Bash", "Write", mcpToolFull}
	if !slices.Equal(hooked, want) || !slices.Equal(asked, want) {
		t.Errorf("hooked %v, asked %v; want both %v", hooked, asked, want)
	}
	mcpAsk := controlRequests(msgs, claudecode.RequestCanUseTool)[2].CanUseTool
	mcpHook := hookCallbacks(msgs, claudecode.HookPreToolUse)[2].HookCallback.Input
	for _, s := range []*claudecode.ToolServer{mcpAsk.MCPServer, mcpHook.MCPServer} {
		if s == nil || s.Name != mcpServerName || s.Source != "dynamic" {
			t.Errorf("MCP can_use_tool / hook mcp_server %+v", s)
		}
	}
	for _, id := range []string{"toolu_sup_read", "toolu_sup_search"} {
		if requestFor(msgs, id, true) >= 0 || requestFor(msgs, id, false) >= 0 {
			t.Errorf("%s was hooked or asked", id)
		}
	}
	results := map[string]offlinemodel.ToolResult{}
	for _, tr := range h.Fake.MainRequests()[5].ToolResults() {
		results[tr.ToolUseID] = tr
	}
	for id, wantText := range map[string]string{
		"toolu_sup_read": "supervised notes", "toolu_sup_bash": "drover-bash-42", "toolu_sup_mcp": "echo: hello",
		"toolu_sup_search": "", "toolu_sup_write": "created.txt",
	} {
		if tr, ok := results[id]; !ok || tr.IsError || !strings.Contains(tr.Content, wantText) {
			t.Errorf("tool result of %s: %+v", id, tr)
		}
	}

	// The tool names of this version: Glob, Grep, NotebookRead and TodoWrite are gone, the
	// subagent tool is Task on stdout but Agent to the API.
	init := ofType[*claudecode.SystemInit](msgs)[0]
	for _, name := range []string{"Task", "Read", "ToolSearch", "ListAgents", "CronList", "AskUserQuestion", "ExitPlanMode", "EnterPlanMode", mcpToolFull} {
		if !slices.Contains(init.Tools, name) {
			t.Errorf("system/init tools lack %s: %v", name, init.Tools)
		}
	}
	for _, name := range []string{"Glob", "Grep", "NotebookRead", "TodoWrite"} {
		if slices.Contains(init.Tools, name) {
			t.Errorf("system/init tools have %s", name)
		}
	}
	if api := h.Fake.MainRequests()[0].Tools; !slices.Contains(api, "Agent") || slices.Contains(api, "Task") {
		t.Errorf("tools declared to the API: %v", api)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "supervised-matcher")
}

// TestSupervisedAnswers: what each answer to a supervised can_use_tool does. Allow with
// updatedInput runs the tool with the new input (the model's history keeps its own); deny gives
// the model our message as an error tool result; deny with interrupt ends the turn with
// error_during_execution (aborted_tools), the CLI's own rejection text and an interrupt note.
func TestSupervisedAnswers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const why = "A reviewer says no: use the test target."
	h := startSupervised(t, clitest.Options{}, func(req *claudecode.ControlRequest) (any, error) {
		c := req.CanUseTool
		switch c.ToolUseID {
		case "toolu_sup_changed":
			return claudecode.AllowTool(json.RawMessage(`{"command":"echo changed-by-reviewer"}`), c.ToolUseID), nil
		case "toolu_sup_denied":
			return claudecode.DenyTool(why, false), nil
		}
		return claudecode.DenyTool("stop the turn", true), nil
	})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_changed", "Bash", map[string]any{"command": "echo original"})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_denied", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("Understood.")),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_stopped", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("Never asked for.")),
	)
	res := result(t, h.RunTurn(ctx, "Run two commands."))
	if res.IsError || res.Result != "Understood." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	main := h.Fake.MainRequests()
	if trs := main[1].ToolResults(); len(trs) != 1 || trs[0].IsError || strings.TrimSpace(trs[0].Content) != "changed-by-reviewer" {
		t.Errorf("result of the changed command: %+v", trs)
	}
	var history []string
	for _, m := range main[1].Messages {
		if m.Role == "assistant" {
			for _, b := range m.Content {
				history = append(history, string(b))
			}
		}
	}
	if s := strings.Join(history, ""); !strings.Contains(s, "echo original") || strings.Contains(s, "changed-by-reviewer") {
		t.Errorf("the model's history of the call: %s", s)
	}
	if trs := main[2].ToolResults(); len(trs) != 2 || !trs[1].IsError || trs[1].Content != why {
		t.Errorf("result of the denied command: %+v", trs)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("a denied command ran: %v", err)
	}
	if len(res.PermissionDenials) != 1 || res.PermissionDenials[0].ToolUseID != "toolu_sup_denied" {
		t.Errorf("permission_denials %+v", res.PermissionDenials)
	}

	msgs := h.RunTurn(ctx, "Run it anyway.")
	stopped := result(t, msgs)
	if !stopped.IsError || stopped.Subtype != claudecode.SubtypeErrorDuringExec || stopped.TerminalReason != "aborted_tools" {
		t.Errorf("interrupting deny: subtype %q is_error %v terminal_reason %q", stopped.Subtype, stopped.IsError, stopped.TerminalReason)
	}
	trs := toolResultFrames(msgs)
	if len(trs) != 1 || !trs[0].IsError || !strings.HasPrefix(trs[0].Content.String(), "The user doesn't want to proceed with this tool use.") {
		t.Errorf("tool result after an interrupting deny: %+v", trs)
	}
	if n := len(h.Fake.MainRequests()); n != 4 {
		t.Errorf("%d main requests, want 4: an interrupting deny must not call the model again", n)
	}
	if err := finish(t, h); err != nil {
		t.Logf("exit: %v (the last result had is_error)", err)
	}
	record(t, h, "supervised-answers")
}

// TestSupervisedAllowAlways: allowing with updatedPermissions (a rule for this very command) does
// not stop our hook from asking about the same command again: in a supervised session the hook
// decides, so drover remembers "allow always" itself and answers the hook allow
// (PermissionUpdate.Allows).
func TestSupervisedAllowAlways(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const cmd = "echo always-$((20+22))"
	input := json.RawMessage(`{"command":"` + cmd + `"}`)
	offered := claudecode.SuggestRules("Bash", input)
	if len(offered) != 2 || !offered[0].Allows("Bash", input) {
		t.Fatalf("SuggestRules(Bash) = %+v", offered)
	}
	h := startSupervised(t, clitest.Options{}, func(req *claudecode.ControlRequest) (any, error) {
		return claudecode.AllowTool(nil, req.CanUseTool.ToolUseID).WithUpdatedPermissions(offered[0]), nil
	})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_always1", "Bash", map[string]any{"command": cmd})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_always2", "Bash", map[string]any{"command": cmd})),
		offlinemodel.Reply(offlinemodel.Text("Twice.")),
	)
	msgs := h.RunTurn(ctx, "Run it twice.")
	if res := result(t, msgs); res.IsError || res.Result != "Twice." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	for _, id := range []string{"toolu_sup_always1", "toolu_sup_always2"} {
		if requestFor(msgs, id, true) < 0 || requestFor(msgs, id, false) < 0 {
			t.Errorf("%s: hooked at %d, asked at %d; want both", id, requestFor(msgs, id, true), requestFor(msgs, id, false))
		}
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, ".claude")); !os.IsNotExist(err) {
		t.Errorf("a session rule wrote into the workspace: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "supervised-always")
}

// TestRulesInDefaultMode pins the rule format of claudecode.SuggestRules against the CLI's own
// matching, without hooks (default mode): a call allowed with a SuggestRules update is not asked
// again when it matches (and PermissionUpdate.Allows agrees), and is asked when it does not; a
// path rule made for Write also covers Edit of the same file. The CLI checks each part of a
// compound command (a && b) on its own, so a rule for the whole compound command does not spare
// its ask (drover's own Allows, used under the supervised hook, matches the whole command). It
// also pins the CLI's own suggestions: addRules with destination localSettings, which writes
// <workspace>/.claude/settings.local.json when accepted as is — why drover keeps updates in the
// session (PermissionUpdate.InSession).
func TestRulesInDefaultMode(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const cmd, other, compound = "mkdir -p ruled-dir", "mkdir -p other-dir", "mkdir -p both-dir && echo both"
	file := "" // set once the work dir is known
	h := start(t, clitest.Options{Command: permissionCommand, Handler: answerTools(func(c *claudecode.CanUseTool) claudecode.PermissionResult {
		allow := claudecode.AllowTool(nil, c.ToolUseID)
		switch c.ToolUseID {
		case "toolu_rule_cmd", "toolu_rule_write", "toolu_rule_compound", "toolu_rule_compound_again":
			return allow.WithUpdatedPermissions(claudecode.SuggestRules(c.ToolName, c.Input)[0])
		case "toolu_rule_other":
			return allow.WithUpdatedPermissions(c.Suggestions()[0]) // as the CLI offers it
		}
		return allow
	})})
	file = filepath.Join(h.WorkDir, "ruled.txt")
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_cmd", "Bash", map[string]any{"command": cmd})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_cmd_again", "Bash", map[string]any{"command": cmd})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_other", "Bash", map[string]any{"command": other})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_compound", "Bash", map[string]any{"command": compound})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_compound_again", "Bash", map[string]any{"command": compound})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_write", "Write", map[string]any{"file_path": file, "content": "one\n"})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_write_again", "Write", map[string]any{"file_path": file, "content": "two\n"})),
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_rule_edit", "Edit", map[string]any{"file_path": file, "old_string": "two", "new_string": "three"})),
		offlinemodel.Reply(offlinemodel.Text("Ruled.")),
	)
	msgs := h.RunTurn(ctx, "Run and write, twice each.")
	if res := result(t, msgs); res.IsError || res.Result != "Ruled." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	var asked []string
	for _, r := range controlRequests(msgs, claudecode.RequestCanUseTool) {
		asked = append(asked, r.CanUseTool.ToolUseID)
	}
	want := []string{"toolu_rule_cmd", "toolu_rule_other", "toolu_rule_compound", "toolu_rule_compound_again", "toolu_rule_write"}
	if !slices.Equal(asked, want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	// tool_result_meta says how each call was let through: by the person (reason_type absent) or
	// by a rule (reason_type rule; source user_temporary for a session rule).
	decisions := map[string]string{}
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		metas, _ := clitest.Object(u.Raw())["tool_result_meta"].([]any)
		for _, m := range metas {
			m, _ := m.(map[string]any)
			d, _ := m["permission_decision"].(map[string]any)
			decisions[m["id"].(string)] = fmt.Sprint(d["source"], "/", d["reason_type"])
		}
	}
	if decisions["toolu_rule_cmd"] != "user_temporary/<nil>" || decisions["toolu_rule_cmd_again"] != "user_temporary/rule" || decisions["toolu_rule_edit"] != "user_temporary/rule" {
		t.Errorf("tool_result_meta decisions %v", decisions)
	}
	first := controlRequests(msgs, claudecode.RequestCanUseTool)[0].CanUseTool
	sugg := first.Suggestions()
	if len(sugg) == 0 || sugg[0].Type != claudecode.UpdateAddRules || sugg[0].Destination != claudecode.DestinationLocalSettings ||
		len(sugg[0].Rules) != 1 || sugg[0].Rules[0] != (claudecode.PermissionRule{ToolName: "Bash", RuleContent: cmd}) {
		t.Errorf("the CLI's suggestions: %s", first.PermissionSuggestions)
	}
	var setMode bool
	for _, s := range sugg {
		setMode = setMode || (s.Type == claudecode.UpdateSetMode && s.Mode == claudecode.PermissionAcceptEdits && s.Destination == claudecode.DestinationSession)
	}
	if !setMode {
		t.Errorf("no setMode acceptEdits suggestion: %s", first.PermissionSuggestions)
	}
	rule := claudecode.SuggestRules("Bash", first.Input)[0]
	if !rule.Allows("Bash", json.RawMessage(`{"command":"`+cmd+`"}`)) || rule.Allows("Bash", json.RawMessage(`{"command":"`+other+`"}`)) {
		t.Errorf("Allows disagrees with the CLI for %+v", rule)
	}
	fileRule := claudecode.SuggestRules("Write", json.RawMessage(`{"file_path":"`+file+`"}`))[0]
	if !fileRule.Allows("Edit", json.RawMessage(`{"file_path":"`+file+`"}`)) || fileRule.Allows("Edit", json.RawMessage(`{"file_path":"`+file+`x"}`)) {
		t.Errorf("Allows disagrees with the CLI for %+v", fileRule)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "three\n" {
		t.Errorf("%s: %q, %v", file, b, err)
	}
	settings, err := os.ReadFile(filepath.Join(h.WorkDir, ".claude", "settings.local.json"))
	if err != nil || !strings.Contains(string(settings), other) || strings.Contains(string(settings), cmd) {
		t.Errorf("settings.local.json after accepting the CLI's own suggestion: %s, %v", settings, err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "rules-default-mode")
}

// TestAskUserQuestion: AskUserQuestion exists in print mode with --permission-prompt-tool=stdio
// and always comes as can_use_tool (requires_user_interaction), even under bypassPermissions and
// without a hook (the supervised matcher leaves it out). Allowing with AnswerQuestions' updatedInput
// gives the model each question="answer" and the notes; denying gives it the deny message.
func TestAskUserQuestion(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const declined = "The person chose not to answer."
	h := startSupervised(t, clitest.Options{}, func(req *claudecode.ControlRequest) (any, error) {
		c := req.CanUseTool
		if c.ToolUseID == "toolu_ask_declined" {
			return claudecode.DenyTool(declined, false), nil
		}
		qs := claudecode.QuestionsOf(c.Input)
		if len(qs) != 2 || !qs[1].MultiSelect || len(qs[1].Options) != 3 {
			return claudecode.DenyTool("unexpected questions", false), nil
		}
		in, err := claudecode.AnswerQuestions(c.Input, []claudecode.QuestionAnswer{
			{Question: qs[0].Question, Labels: []string{"Postgres"}, Notes: "we already run it"},
			{Question: qs[1].Question, Labels: []string{"Auth", "Export"}},
		})
		if err != nil {
			return nil, err
		}
		return claudecode.AllowTool(in, c.ToolUseID), nil
	})
	ask := offlinemodel.UseAskUserQuestion(
		offlinemodel.AskQuestion{Question: "Which database?", Header: "Database", Options: []string{"Postgres", "SQLite"}},
		offlinemodel.AskQuestion{Question: "Which features?", Header: "Features", MultiSelect: true, Options: []string{"Auth", "Search", "Export"}},
	)
	ask.ID = "toolu_ask_answered"
	again := ask
	again.ID = "toolu_ask_declined"
	h.Fake.Enqueue(offlinemodel.Reply(ask), offlinemodel.Reply(offlinemodel.Text("Noted.")),
		offlinemodel.Reply(again), offlinemodel.Reply(offlinemodel.Text("Fine.")))
	msgs := h.RunTurn(ctx, "Ask me.")
	if res := result(t, msgs); res.IsError || res.Result != "Noted." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	asks := controlRequests(msgs, claudecode.RequestCanUseTool)
	if len(asks) != 1 || asks[0].CanUseTool.ToolName != claudecode.ToolAskUserQuestion || !asks[0].CanUseTool.RequiresUserInteraction {
		t.Fatalf("can_use_tool %+v", asks)
	}
	if n := len(hookCallbacks(msgs, claudecode.HookPreToolUse)); n != 0 {
		t.Errorf("%d PreToolUse hooks for AskUserQuestion, want 0", n)
	}
	trs := h.Fake.MainRequests()[1].ToolResults()
	if len(trs) != 1 || trs[0].IsError || !strings.Contains(trs[0].Content, `"Which database?"="Postgres" notes: we already run it`) ||
		!strings.Contains(trs[0].Content, `"Which features?"="Auth, Export"`) {
		t.Errorf("the answers the model got: %+v", trs)
	}

	result(t, h.RunTurn(ctx, "Ask again."))
	trs = h.Fake.MainRequests()[3].ToolResults()
	if last := trs[len(trs)-1]; last.ToolUseID != "toolu_ask_declined" || !last.IsError || last.Content != declined {
		t.Errorf("the declined question's result: %+v", last)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "ask-user-question")
}

// TestSupervisedSubagent: a subagent's tool call in a supervised session is hooked and asked like
// the main agent's, with the subagent's agent_id (and agent_type on the hook) and no parent tool
// use id: the subagent's own frames (parent_tool_use_id = the Agent call) tie agent_id to the call.
// The Agent call itself is not asked.
func TestSupervisedSubagent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := startSupervised(t, clitest.Options{}, allowRequest)
	agent := offlinemodel.UseAgent("Run the sub marker", "SUBAGENT-TASK: run it.", "general-purpose")
	agent.ID = "toolu_sup_agent"
	h.Fake.Enqueue(offlinemodel.Reply(agent), offlinemodel.Reply(offlinemodel.Text("Main done.")))
	h.Fake.EnqueueSubagent(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_sup_sub_bash", "Bash", map[string]any{"command": "echo drover-sub-$((2*21))"})),
		offlinemodel.Reply(offlinemodel.Text("Subagent report.")),
	)
	msgs := h.RunTurn(ctx, "Delegate.")
	if res := result(t, msgs); res.IsError || res.Result != "Main done." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	if requestFor(msgs, agent.ID, true) >= 0 || requestFor(msgs, agent.ID, false) >= 0 {
		t.Errorf("the Agent call was hooked or asked")
	}
	var agentID string
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		if u.ParentToolUseID == agent.ID && u.AgentID != "" {
			agentID = u.AgentID
		}
	}
	hook, ask := requestFor(msgs, "toolu_sup_sub_bash", true), requestFor(msgs, "toolu_sup_sub_bash", false)
	if agentID == "" || hook < 0 || ask < 0 {
		t.Fatalf("subagent %q, hook at %d, ask at %d\n%s", agentID, hook, ask, h.Dump())
	}
	in := msgs[hook].(*claudecode.ControlRequest).HookCallback.Input
	c := msgs[ask].(*claudecode.ControlRequest).CanUseTool
	if in.AgentID != agentID || in.AgentType != "general-purpose" || c.AgentID != agentID {
		t.Errorf("hook agent %q/%q, can_use_tool agent %q; subagent frames say %q", in.AgentID, in.AgentType, c.AgentID, agentID)
	}
	if raw := clitest.Object(msgs[ask].Raw()); raw["request"].(map[string]any)["parent_tool_use_id"] != nil {
		t.Errorf("can_use_tool names a parent tool use: %s", msgs[ask].Raw())
	}
	if subs := h.Fake.RequestsOf(offlinemodel.ClassSubagent); len(subs) != 2 || !strings.Contains(subs[1].ToolResults()[0].Content, "drover-sub-42") {
		t.Errorf("the subagent's command did not run")
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "supervised-subagent")
}
