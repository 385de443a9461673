package streamjson

import (
	"fmt"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// handleControlRequest turns a can_use_tool request into a permission_request event (unless
// the host reports its requests itself: Config.HostPermissions). Hook callbacks and other
// requests produce no event (the client answers them).
func (a *Adapter) handleControlRequest(m *claudecode.ControlRequest) {
	switch {
	case m.CanUseTool != nil:
		if len(a.permissions) >= a.cfg.MaxPending {
			clear(a.permissions)
		}
		a.permissions[m.RequestID] = true
		if !a.cfg.HostPermissions {
			a.emit(a.permissionEvent(m))
		}
	case m.HookCallback != nil:
		if len(a.permissions) >= a.cfg.MaxPending {
			clear(a.permissions)
		}
		a.permissions[m.RequestID] = false
	default:
		a.log.Debug("streamjson: ignoring control request", "subtype", m.Subtype)
	}
}

// handleControlCancel emits permission_cancelled when the CLI withdraws a permission request.
// Cancels of requests the adapter knows to be hook callbacks are ignored; a cancel for a request
// it never saw is reported, in case the host routed the request around the adapter.
func (a *Adapter) handleControlCancel(m *claudecode.ControlCancelRequest) {
	isPermission, seen := a.permissions[m.RequestID]
	if seen && !isPermission {
		return
	}
	delete(a.permissions, m.RequestID)
	if !a.cfg.HostPermissions {
		a.emit(events.AgentEvent{Type: events.TypePermissionCancelled, PendingID: m.RequestID})
	}
}

// PermissionEvent is the permission_request event of a can_use_tool request, as the adapter
// would emit it (PendingID is the CLI's request id): for a host that reports its requests
// itself, under an id of its own (Config.HostPermissions).
func (a *Adapter) PermissionEvent(m *claudecode.ControlRequest) events.AgentEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	ev := a.permissionEvent(m)
	if ev.SessionID == "" {
		ev.SessionID = a.sessionID
	}
	return ev
}

func (a *Adapter) permissionEvent(m *claudecode.ControlRequest) events.AgentEvent {
	r := m.CanUseTool
	p, title := normalizeToolCall(r.ToolName, r.Input)
	return events.AgentEvent{
		Type: events.TypePermissionRequest, PendingID: m.RequestID,
		ToolCallID: r.ToolUseID, ToolName: r.ToolName, ToolTitle: title, Normalized: p,
		ParentToolCallID: a.taskTools[r.AgentID],
		Permission:       permission(r, title),
	}
}

// handleRateLimitEvent reports the account's usage-limit state.
func (a *Adapter) handleRateLimitEvent(m *claudecode.RateLimitEvent) {
	a.noteSession(m.SessionID)
	a.emitRateLimit(events.RateLimitSourceEvent, m.RateLimitInfo)
}

// emitRateLimit reports a rate-limit state: the account's (a rate_limit_event), or the one an
// API error met (its api_error_params).
func (a *Adapter) emitRateLimit(source string, info claudecode.RateLimitInfo) {
	msg := "Rate limit status: " + info.Status
	if info.RateLimitType != "" {
		msg += " (" + info.RateLimitType + ")"
	}
	if info.ResetsAt > 0 {
		msg += ", resets at " + time.Unix(info.ResetsAt, 0).UTC().Format(time.RFC3339)
	}
	a.emit(events.AgentEvent{Type: events.TypeRateLimit, RateLimitMessage: msg, RateLimit: &events.RateLimit{
		Source: source, Status: info.Status, ResetsAt: info.ResetsAt,
		RateLimitType: info.RateLimitType, Utilization: info.Utilization,
		OverageStatus: info.OverageStatus, OverageDisabledReason: info.OverageDisabledReason,
	}})
}

// handleMalformed reports a line that was not a JSON object.
func (a *Adapter) handleMalformed(m *claudecode.Malformed) {
	msg := "malformed line from the agent"
	if m.Err != nil {
		msg = fmt.Sprintf("malformed line from the agent: %v", m.Err)
	}
	a.emit(events.AgentEvent{Type: events.TypeError, Error: &events.ErrorInfo{Kind: events.ErrorProtocol, Message: msg}})
}
