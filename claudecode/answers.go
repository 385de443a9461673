package claudecode

import (
	"encoding/json"
)

// Behaviours of a can_use_tool answer.
const (
	BehaviorAllow = "allow"
	BehaviorDeny  = "deny"
)

// PermissionResult answers a can_use_tool request. Build it with AllowTool or DenyTool; it marshals
// to {"behavior":"allow","updatedInput":{…},"updatedPermissions":[…],"toolUseID":"…"} or
// {"behavior":"deny","message":"…","interrupt":true}, leaving out empty optional members.
type PermissionResult struct {
	Behavior string
	// UpdatedInput replaces the tool's input (allow only); nil runs the tool with its input unchanged.
	// The tool runs with it, while the transcript and the model keep the original tool_use input.
	UpdatedInput json.RawMessage
	// UpdatedPermissions are applied by the CLI before the tool runs (allow only): rules it checks
	// on later calls, a new mode, more directories. Under a PreToolUse hook that asks, later calls
	// are still asked: the hook decides, not the rules.
	UpdatedPermissions []PermissionUpdate
	// ToolUseID echoes CanUseTool.ToolUseID (allow only).
	ToolUseID string
	// Message tells the model why (deny only).
	Message string
	// Interrupt also stops the turn (deny only).
	Interrupt bool
}

// AllowTool lets a tool call run. updatedInput may be nil, toolUseID empty.
func AllowTool(updatedInput json.RawMessage, toolUseID string) PermissionResult {
	return PermissionResult{Behavior: BehaviorAllow, UpdatedInput: updatedInput, ToolUseID: toolUseID}
}

// WithUpdatedPermissions returns p (an allow) with updates to apply, such as one of the request's
// suggestions a person accepted (see PermissionUpdate.InSession).
func (p PermissionResult) WithUpdatedPermissions(updates ...PermissionUpdate) PermissionResult {
	p.UpdatedPermissions = append(p.UpdatedPermissions[:len(p.UpdatedPermissions):len(p.UpdatedPermissions)], updates...)
	return p
}

// DenyTool refuses a tool call; the model sees message as the tool's error result. interrupt also
// ends the turn (error_during_execution, terminal_reason aborted_tools); the model then sees the
// CLI's own rejection text instead of message, followed by an interrupt note.
func DenyTool(message string, interrupt bool) PermissionResult {
	return PermissionResult{Behavior: BehaviorDeny, Message: message, Interrupt: interrupt}
}

// MarshalJSON writes the members that belong to the behaviour.
func (p PermissionResult) MarshalJSON() ([]byte, error) {
	if p.Behavior == BehaviorDeny {
		return json.Marshal(struct {
			Behavior  string `json:"behavior"`
			Message   string `json:"message"`
			Interrupt bool   `json:"interrupt,omitempty"`
		}{p.Behavior, p.Message, p.Interrupt})
	}
	return json.Marshal(struct {
		Behavior           string             `json:"behavior"`
		UpdatedInput       json.RawMessage    `json:"updatedInput,omitempty"`
		UpdatedPermissions []PermissionUpdate `json:"updatedPermissions,omitempty"`
		ToolUseID          string             `json:"toolUseID,omitempty"`
	}{p.Behavior, p.UpdatedInput, p.UpdatedPermissions, p.ToolUseID})
}

// Permission decisions of a PreToolUse hook.
const (
	DecisionAllow = "allow" // run the tool without asking
	DecisionDeny  = "deny"  // refuse it; the model sees an error tool result
	DecisionAsk   = "ask"   // ask through can_use_tool, even under bypassPermissions
)

// Decisions of a Stop hook.
const (
	StopDecisionApprove = "approve"
	StopDecisionBlock   = "block"
)

// HookOutput answers a hook_callback request. The zero value marshals to {}: no opinion.
type HookOutput struct {
	Continue           *bool               `json:"continue,omitempty"`
	StopReason         string              `json:"stopReason,omitempty"`
	SuppressOutput     bool                `json:"suppressOutput,omitempty"`
	Decision           string              `json:"decision,omitempty"` // Stop: approve or block
	Reason             string              `json:"reason,omitempty"`
	SystemMessage      string              `json:"systemMessage,omitempty"`
	HookSpecificOutput *HookSpecificOutput `json:"hookSpecificOutput,omitempty"`
}

// HookSpecificOutput is the event-specific part of a hook answer.
type HookSpecificOutput struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	AdditionalContext        string          `json:"additionalContext,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
}

// PreToolUseDecision answers a PreToolUse hook with DecisionAllow, DecisionDeny or DecisionAsk.
func PreToolUseDecision(decision, reason string) HookOutput {
	return HookOutput{HookSpecificOutput: &HookSpecificOutput{
		HookEventName:            "PreToolUse",
		PermissionDecision:       decision,
		PermissionDecisionReason: reason,
	}}
}

// StopApprove lets the agent stop: the turn ends with its result as usual. An empty HookOutput, an
// error answer and an invalid answer do the same (the last two with a system/informational
// warning).
func StopApprove(reason string) HookOutput {
	return HookOutput{Decision: StopDecisionApprove, Reason: reason}
}

// StopBlock keeps the agent going: the CLI writes a user message "Stop hook feedback:\n<reason>"
// (isSynthetic) to the transcript and calls the model again in the same turn; the next Stop hook
// of that turn has stop_hook_active set. After 9 blocks in a row the CLI overrides the hook and
// ends the turn anyway, with an empty result text (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP raises the
// limit). Answer StopApprove while HookInput.StopHookActive to let a blocked agent stop.
func StopBlock(reason string) HookOutput {
	return HookOutput{Decision: StopDecisionBlock, Reason: reason}
}

// StopHalt ({"continue":false,"stopReason":…}) ends the turn at once, without calling the model
// again: the result comes with terminal_reason stop_hook_prevented. stopReason appears nowhere on
// stdout.
func StopHalt(stopReason string) HookOutput {
	halt := false
	return HookOutput{Continue: &halt, StopReason: stopReason}
}
