package realcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// The plan a scripted model writes into the plan file, and what a reviewer answers to the first
// ExitPlanMode.
const (
	testPlan     = "# Plan\n\n1. Add the flag.\n2. Test it.\n"
	reviewReason = "Reviewer: add a step for the docs."
	planningDeny = "Plan mode: nothing may change before the plan is approved."
)

// scripted returns a fake configuration whose main requests are answered by steps, in order; a
// step sees the request (to find the plan file, for instance). Requests past the last step get
// the fake's default reply.
func scripted(steps ...func(*offlinemodel.Request) offlinemodel.Response) offlinemodel.Config {
	var mu sync.Mutex
	next := 0
	return offlinemodel.Config{Responder: func(r *offlinemodel.Request) (offlinemodel.Response, bool) {
		if r.Class != offlinemodel.ClassMain {
			return offlinemodel.Response{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		if next >= len(steps) {
			return offlinemodel.Response{}, false
		}
		next++
		return steps[next-1](r), true
	}}
}

// reply is a step that ignores the request.
func reply(blocks ...offlinemodel.Block) func(*offlinemodel.Request) offlinemodel.Response {
	return func(*offlinemodel.Request) offlinemodel.Response { return offlinemodel.Reply(blocks...) }
}

// writePlan is a step that writes testPlan into the plan file the CLI's plan-mode reminder names.
func writePlan(r *offlinemodel.Request) offlinemodel.Response {
	return offlinemodel.Reply(offlinemodel.ToolUseID("toolu_plan_write", "Write", map[string]any{
		"file_path": offlinemodel.PlanFilePath(r), "content": testPlan,
	}))
}

// exitPlan is a step calling ExitPlanMode with id; the model's own plan text is replaced by the
// CLI with the plan file's.
func exitPlan(id string) func(*offlinemodel.Request) offlinemodel.Response {
	b := offlinemodel.UseExitPlanMode("the model's own words, which the CLI replaces")
	b.ID = id
	return reply(b)
}

// planReviewer answers ExitPlanMode as a reviewer: the first is denied with reviewReason, later
// ones allowed. Other requests made while planning are denied with planningDeny, after the
// approval allowed. It records the tool use ids of the requests it saw.
type planReviewer struct {
	mu       sync.Mutex
	exits    int
	approved bool
	asked    []string
}

func (p *planReviewer) answer(req *claudecode.ControlRequest) (any, error) {
	c := req.CanUseTool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, c.ToolUseID)
	switch {
	case c.ToolName == claudecode.ToolExitPlanMode:
		p.exits++
		if p.exits == 1 {
			return claudecode.DenyTool(reviewReason, false), nil
		}
		p.approved = true
		return claudecode.AllowTool(nil, c.ToolUseID), nil
	case !p.approved:
		return claudecode.DenyTool(planningDeny, false), nil
	}
	return claudecode.AllowTool(nil, c.ToolUseID), nil
}

func (p *planReviewer) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// modes returns the permission modes system/status frames report in msgs, in order.
func modes(msgs []claudecode.Message) []string {
	var out []string
	for _, s := range ofType[*claudecode.SystemStatus](msgs) {
		if s.PermissionMode != "" {
			out = append(out, s.PermissionMode)
		}
	}
	return out
}

// checkExitPlanRequests checks the two ExitPlanMode requests of a plan turn: each carries the plan
// file's content and path (not the model's input) and needs a person; the denial reached the model
// as the error result of the first, with no change of mode; the approval's result shows the plan.
func checkExitPlanRequests(t *testing.T, h *clitest.Harness, msgs []claudecode.Message) {
	t.Helper()
	var exits []*claudecode.CanUseTool
	for _, r := range controlRequests(msgs, claudecode.RequestCanUseTool) {
		if r.CanUseTool.ToolName == claudecode.ToolExitPlanMode {
			exits = append(exits, r.CanUseTool)
		}
	}
	if len(exits) != 2 {
		t.Fatalf("%d ExitPlanMode requests, want 2\n%s", len(exits), h.Dump())
	}
	for _, c := range exits {
		plan, path := claudecode.PlanOf(c.Input)
		if plan != testPlan || !strings.HasPrefix(path, filepath.Join(h.ConfigDir, "plans")+"/") || !c.RequiresUserInteraction {
			t.Errorf("ExitPlanMode request: plan %q path %q requires_user_interaction %v", plan, path, c.RequiresUserInteraction)
		}
	}
	var denied, approved *claudecode.ContentBlock
	for _, tr := range toolResultFrames(msgs) {
		switch tr.ToolUseID {
		case "toolu_exit_denied":
			denied = &tr
		case "toolu_exit_approved":
			approved = &tr
		}
	}
	if denied == nil || !denied.IsError || denied.Content.String() != reviewReason {
		t.Errorf("the denied plan's result: %+v", denied)
	}
	if approved == nil || approved.IsError || !strings.Contains(approved.Content.String(), "## Approved Plan:\n"+testPlan) {
		t.Errorf("the approved plan's result: %+v", approved)
	}
	// No change of mode between the denial and the second ExitPlanMode.
	between := msgs[requestFor(msgs, "toolu_exit_denied", false):requestFor(msgs, "toolu_exit_approved", false)]
	if m := modes(between); len(m) != 0 {
		t.Errorf("mode changed after the denial: %v", m)
	}
}

// TestPlanModeAtLaunch: --permission-mode plan. The model may write its plan file without asking;
// a write elsewhere is asked (decision_reason_type "mode"); a non-read-only Bash command goes to
// the auto-mode classifier, which does not run against a local API, so it is refused without
// asking (system/permission_denied). ExitPlanMode is asked with the plan file's content; a denial
// keeps the session in plan mode and gives the model the reason; an approval moves it to default
// mode (system/status), not to bypassPermissions, and the process may not switch to
// bypassPermissions later, since it was not launched in it.
func TestPlanModeAtLaunch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	rev := &planReviewer{}
	h := start(t, clitest.Options{
		Command: claudecode.Command{PermissionMode: claudecode.PermissionPlan, PermissionPromptToolStdio: true},
		Handler: supervisedHandler(rev.answer),
		Fake: scripted(
			writePlan,
			reply(offlinemodel.ToolUseID("toolu_plan_bash", "Bash", map[string]any{"command": "mkdir -p made-in-plan"})),
			reply(offlinemodel.ToolUseID("toolu_plan_other", "Write", map[string]any{"file_path": "elsewhere.txt", "content": "x\n"})),
			exitPlan("toolu_exit_denied"),
			exitPlan("toolu_exit_approved"),
			reply(offlinemodel.ToolUseID("toolu_after_bash", "Bash", map[string]any{"command": "mkdir -p made-after-plan"})),
			reply(offlinemodel.Text("Planned and done.")),
		),
	})
	msgs := h.RunTurn(ctx, "Plan the change, then make it.")
	if res := result(t, msgs); res.IsError || res.Result != "Planned and done." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	if init := ofType[*claudecode.SystemInit](msgs); init[0].PermissionMode != claudecode.PermissionPlan {
		t.Errorf("system/init permission mode %q", init[0].PermissionMode)
	}
	if want := []string{"toolu_plan_other", "toolu_exit_denied", "toolu_exit_approved", "toolu_after_bash"}; !slices.Equal(rev.seen(), want) {
		t.Errorf("asked %v, want %v", rev.seen(), want)
	}
	other := controlRequests(msgs, claudecode.RequestCanUseTool)[0].CanUseTool
	if other.DecisionReasonType != "mode" {
		t.Errorf("write outside the plan file: decision_reason_type %q", other.DecisionReasonType)
	}
	var refused *claudecode.SystemPermissionDenied
	for _, d := range ofType[*claudecode.SystemPermissionDenied](msgs) {
		if d.ToolUseID == "toolu_plan_bash" {
			refused = d
		}
	}
	if refused == nil || refused.DecisionReasonType != "classifier" {
		t.Errorf("the plan-mode Bash command: permission_denied %+v", refused)
	}
	checkExitPlanRequests(t, h, msgs)
	if m := modes(msgs); !slices.Equal(m, []string{claudecode.PermissionDefault}) {
		t.Errorf("modes after the approval %v, want [default]", m)
	}
	if after := controlRequests(msgs, claudecode.RequestCanUseTool)[3].CanUseTool; len(after.Suggestions()) == 0 {
		t.Errorf("the command after the approval was not asked as in default mode: %s", after.PermissionSuggestions)
	}
	for name, want := range map[string]bool{"made-in-plan": false, "elsewhere.txt": false, "made-after-plan": true} {
		if _, err := os.Stat(filepath.Join(h.WorkDir, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	err := h.SetPermissionMode(ctx, claudecode.PermissionBypass)
	var refusedMode *claudecode.RequestError
	if !errors.As(err, &refusedMode) || !strings.Contains(refusedMode.Message, "not launched with --dangerously-skip-permissions") {
		t.Errorf("set_permission_mode bypassPermissions after plan mode at launch: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "plan-launch")
}

// TestPlanModeSupervised is how drover runs a plan task whose profile continues supervised: the
// CLI is launched in bypassPermissions with the supervised hooks and switched to plan mode with
// set_permission_mode before the first prompt. In plan mode the hook (which sees
// permission_mode "plan") has no opinion, so the CLI's plan mode decides: the plan file is written
// without asking, a read-only command runs, a change is asked and denied. ExitPlanMode is asked
// with the plan; a denial keeps plan mode, an approval returns the session to the mode it had
// before (bypassPermissions), where the hook asks again: supervised.
func TestPlanModeSupervised(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	rev := &planReviewer{}
	h := startSupervised(t, clitest.Options{Fake: scripted(
		writePlan,
		reply(offlinemodel.ToolUseID("toolu_plan_ls", "Bash", map[string]any{"command": "ls"})),
		reply(offlinemodel.ToolUseID("toolu_plan_bash", "Bash", map[string]any{"command": "mkdir -p made-in-plan"})),
		exitPlan("toolu_exit_denied"),
		exitPlan("toolu_exit_approved"),
		reply(offlinemodel.ToolUseID("toolu_after_bash", "Bash", map[string]any{"command": "mkdir -p made-after-plan"})),
		reply(offlinemodel.Text("Planned, approved, done.")),
	)}, rev.answer)
	if err := h.SetPermissionMode(ctx, claudecode.PermissionPlan); err != nil {
		t.Fatalf("set_permission_mode plan: %v", err)
	}
	msgs := h.RunTurn(ctx, "Plan the change, then make it.")
	if res := result(t, msgs); res.IsError || res.Result != "Planned, approved, done." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	if want := []string{"toolu_plan_bash", "toolu_exit_denied", "toolu_exit_approved", "toolu_after_bash"}; !slices.Equal(rev.seen(), want) {
		t.Errorf("asked %v, want %v", rev.seen(), want)
	}
	var hookModes []string
	for _, r := range hookCallbacks(msgs, claudecode.HookPreToolUse) {
		hookModes = append(hookModes, r.HookCallback.ToolUseID+"="+r.HookCallback.Input.PermissionMode)
	}
	wantModes := []string{"toolu_plan_write=plan", "toolu_plan_ls=plan", "toolu_plan_bash=plan", "toolu_after_bash=bypassPermissions"}
	if !slices.Equal(hookModes, wantModes) {
		t.Errorf("PreToolUse hooks %v, want %v (none for ExitPlanMode)", hookModes, wantModes)
	}
	checkExitPlanRequests(t, h, msgs)
	// The switch to plan is announced before the turn, the return to bypass at the approval.
	if m := modes(msgs); !slices.Equal(m, []string{claudecode.PermissionPlan, claudecode.PermissionBypass}) {
		t.Errorf("modes %v, want [plan bypassPermissions]", m)
	}
	if a := controlRequests(msgs, claudecode.RequestCanUseTool)[3].CanUseTool; a.DecisionReason != supervisedReason {
		t.Errorf("after the approval the hook did not ask: %+v", a)
	}
	for name, want := range map[string]bool{"made-in-plan": false, "made-after-plan": true} {
		if _, err := os.Stat(filepath.Join(h.WorkDir, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	// The switch itself: answered {"mode":"plan"}, then announced with system/status.
	var answered, announced bool
	for _, l := range h.Stdout() {
		o := clitest.Object(l)
		if r, ok := o["response"].(map[string]any); ok && o["type"] == claudecode.TypeControlResponse {
			if p, ok := r["response"].(map[string]any); ok && p["mode"] == claudecode.PermissionPlan {
				answered = true
			}
		}
		announced = announced || (o["subtype"] == claudecode.SubtypeStatus && o["permissionMode"] == claudecode.PermissionPlan)
	}
	if !answered || !announced {
		t.Errorf("set_permission_mode plan: answered %v, announced %v", answered, announced)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "plan-supervised")
}

// TestPlanModeAutonomous: the same switch for a profile that continues autonomous. The supervised
// hook stays registered (one launch configuration serves every mode) and answers {} in every mode:
// after the approval the session is back in bypassPermissions, the hook still fires, and nothing
// is asked any more.
func TestPlanModeAutonomous(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	rev := &planReviewer{exits: 1} // approve the first plan
	noOpinion := claudecode.HandlerFunc(func(_ context.Context, req *claudecode.ControlRequest) (any, error) {
		if req.CanUseTool != nil {
			return rev.answer(req)
		}
		return claudecode.HookOutput{}, nil
	})
	h := start(t, clitest.Options{Command: supervisedCommand, Handler: noOpinion, Fake: scripted(
		writePlan,
		exitPlan("toolu_exit_approved"),
		reply(offlinemodel.ToolUseID("toolu_after_bash", "Bash", map[string]any{"command": "mkdir -p made-after-plan"})),
		reply(offlinemodel.Text("Done on my own.")),
	)})
	if _, err := h.Initialize(ctx, claudecode.InitializeRequest{Hooks: claudecode.SupervisedHooks(toolCallback, "")}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := h.SetPermissionMode(ctx, claudecode.PermissionPlan); err != nil {
		t.Fatalf("set_permission_mode plan: %v", err)
	}
	msgs := h.RunTurn(ctx, "Plan it, then do it.")
	if res := result(t, msgs); res.IsError || res.Result != "Done on my own." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	if want := []string{"toolu_exit_approved"}; !slices.Equal(rev.seen(), want) {
		t.Errorf("asked %v, want %v", rev.seen(), want)
	}
	if m := modes(msgs); !slices.Equal(m, []string{claudecode.PermissionPlan, claudecode.PermissionBypass}) {
		t.Errorf("modes %v, want [plan bypassPermissions]", m)
	}
	if i := requestFor(msgs, "toolu_after_bash", true); i < 0 || msgs[i].(*claudecode.ControlRequest).HookCallback.Input.PermissionMode != claudecode.PermissionBypass {
		t.Errorf("no PreToolUse hook in bypassPermissions for the command after the approval")
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-after-plan")); err != nil {
		t.Errorf("the command after the approval did not run: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "plan-autonomous")
}

// TestPlanHooksWithoutPlanMode: the other way to ask for a plan's approval, a PreToolUse hook on
// ExitPlanMode under bypassPermissions without plan mode, holds nothing on this version: outside
// plan mode the CLI refuses ExitPlanMode before any hook ("You are not in plan mode"), and every
// change runs unasked.
func TestPlanHooksWithoutPlanMode(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: supervisedCommand, Handler: supervisedHandler(allowRequest), Fake: scripted(
		exitPlan("toolu_exit_unhooked"),
		reply(offlinemodel.ToolUseID("toolu_free_bash", "Bash", map[string]any{"command": "mkdir -p made-freely"})),
		reply(offlinemodel.Text("Nothing stopped me.")),
	)})
	if _, err := h.Initialize(ctx, claudecode.InitializeRequest{Hooks: map[string][]claudecode.HookMatcher{
		claudecode.HookPreToolUse: {{Matcher: "^ExitPlanMode$", HookCallbackIDs: []string{toolCallback}}},
	}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	msgs := h.RunTurn(ctx, "Plan it.")
	if res := result(t, msgs); res.IsError || res.Result != "Nothing stopped me." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}
	if n := len(ofType[*claudecode.ControlRequest](msgs)); n != 0 {
		t.Errorf("%d control requests, want none", n)
	}
	trs := toolResultFrames(msgs)
	if len(trs) != 2 || !trs[0].IsError || !strings.Contains(trs[0].Content.String(), "You are not in plan mode") {
		t.Errorf("ExitPlanMode outside plan mode: %+v", trs)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-freely")); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "plan-hooks-only")
}
