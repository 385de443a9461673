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
// to {"behavior":"allow","updatedInput":{…},"toolUseID":"…"} or
// {"behavior":"deny","message":"…","interrupt":true}, leaving out empty optional members.
type PermissionResult struct {
	Behavior string
	// UpdatedInput replaces the tool's input (allow only); nil runs the tool with its input unchanged.
	UpdatedInput json.RawMessage
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

// DenyTool refuses a tool call; the model sees message. interrupt also ends the turn.
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
		Behavior     string          `json:"behavior"`
		UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
		ToolUseID    string          `json:"toolUseID,omitempty"`
	}{p.Behavior, p.UpdatedInput, p.ToolUseID})
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

// StopApprove lets the agent stop.
func StopApprove(reason string) HookOutput {
	return HookOutput{Decision: StopDecisionApprove, Reason: reason}
}

// StopBlock keeps the agent going; reason is given to the model as the reason to continue.
func StopBlock(reason string) HookOutput {
	return HookOutput{Decision: StopDecisionBlock, Reason: reason}
}
