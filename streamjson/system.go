package streamjson

import (
	"encoding/json"
	"fmt"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// handleInit handles system/init, which the CLI sends at the start of every turn.
func (a *Adapter) handleInit(m *claudecode.SystemInit) {
	a.startTurn()
	if m.SessionID != "" {
		a.sessionID = m.SessionID
	}
	if m.Model != "" {
		a.setMainModel(m.Model)
	}
	if a.sessionID != "" && a.sessionID != a.statusSentID {
		status := events.SessionNew
		if a.cfg.ResumedSessionID != "" && a.sessionID == a.cfg.ResumedSessionID && a.statusSentID == "" {
			status = events.SessionResumed
		}
		a.statusSentID = a.sessionID
		a.emit(events.AgentEvent{Type: events.TypeSessionStatus, Data: &events.Data{SessionStatus: status}})
	}
	changed := false
	for _, name := range m.SlashCommands {
		changed = a.addCommand(events.Command{Name: name}) || changed
	}
	if changed {
		a.emitCommands()
	}
}

// handleStatus handles system/status: only compaction is of interest.
func (a *Adapter) handleStatus(m *claudecode.SystemStatus) {
	a.noteSession(m.SessionID)
	switch {
	case m.Status == "compacting":
		if !a.turn.compacting {
			a.turn.compacting = true
			a.emit(events.AgentEvent{Type: events.TypeCompaction, Compaction: &events.Compaction{Phase: events.CompactionStarted}})
		}
	case m.CompactResult != "" && m.CompactResult != "success":
		// A failed compaction has no compact_boundary: this is its end.
		a.turn.compacting = false
		a.emit(events.AgentEvent{Type: events.TypeCompaction, Compaction: &events.Compaction{
			Phase: events.CompactionFinished, Result: m.CompactResult, Error: m.CompactError,
		}})
	}
}

// handleCompactBoundary handles system/compact_boundary: a compaction finished.
func (a *Adapter) handleCompactBoundary(m *claudecode.SystemCompactBoundary) {
	a.noteSession(m.SessionID)
	a.turn.compacting = false
	md := m.CompactMetadata
	a.emit(events.AgentEvent{Type: events.TypeCompaction, Compaction: &events.Compaction{
		Phase: events.CompactionFinished, Trigger: md.Trigger, PreTokens: md.PreTokens, PostTokens: md.PostTokens, Result: "success",
	}})
}

// handleAPIRetry handles system/api_retry: an API request failed and will be retried.
func (a *Adapter) handleAPIRetry(m *claudecode.SystemAPIRetry) {
	a.noteSession(m.SessionID)
	what := m.Error
	if m.ErrorStatus != 0 {
		what = fmt.Sprintf("HTTP %d %s", m.ErrorStatus, m.Error)
	}
	msg := fmt.Sprintf("API request failed (%s); retry %d of %d in %d ms", what, m.Attempt, m.MaxRetries, m.RetryDelayMS)
	a.emit(events.AgentEvent{Type: events.TypeRateLimit, RateLimitMessage: msg, RateLimit: &events.RateLimit{
		Source: events.RateLimitSourceAPIRetry, Attempt: int(m.Attempt), MaxRetries: int(m.MaxRetries),
		RetryDelayMS: m.RetryDelayMS, ErrorStatus: int(m.ErrorStatus), Error: m.Error,
	}})
}

// taskInfo is the part of system/task_* messages the adapter uses.
type taskInfo struct {
	Subtype      string
	TaskID       string
	ToolUseID    string
	Description  string
	TaskType     string
	Status       string
	Summary      string
	LastToolName string
	Patch        json.RawMessage
	Usage        json.RawMessage
}

// handleTask handles system/task_started, task_progress, task_updated and task_notification:
// progress of subagents and background commands.
func (a *Adapter) handleTask(sessionID string, t taskInfo) {
	a.noteSession(sessionID)
	toolID := t.ToolUseID
	if toolID == "" {
		toolID = a.taskTools[t.TaskID]
	} else if t.TaskID != "" && t.Subtype != claudecode.SubtypeTaskNotification {
		setMap(&a.taskTools, t.TaskID, toolID, a.cfg.MaxPending)
	}
	status := t.Status
	if status == "" && len(t.Patch) > 0 {
		var patch struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(t.Patch, &patch)
		status = patch.Status
	}
	a.emit(events.AgentEvent{Type: events.TypeSubagentTask, ToolCallID: toolID, Subagent: &events.SubagentProgress{
		Phase: t.Subtype, TaskID: t.TaskID, TaskType: t.TaskType, Description: t.Description, Status: status,
		Summary: t.Summary, LastToolName: t.LastToolName, Usage: compactJSON(t.Usage),
	}})
	if t.Subtype == claudecode.SubtypeTaskNotification {
		// The task is over: its tool calls that never got a result never will.
		delete(a.taskTools, t.TaskID)
		if toolID != "" {
			a.closeTools(func(o *openTool) bool { return o.parent == toolID }, events.ToolError, "no result: the subagent ended first")
		}
	}
}

// handlePermissionDenied handles system/permission_denied: the CLI refused a tool call without
// asking.
func (a *Adapter) handlePermissionDenied(m *claudecode.SystemPermissionDenied) {
	a.noteSession(m.SessionID)
	ev := events.AgentEvent{Type: events.TypePermissionDenied, ToolCallID: m.ToolUseID, ToolName: m.ToolName,
		Permission: &events.Permission{
			Message: m.Message, DecisionReason: m.DecisionReason, DecisionReasonType: m.DecisionReasonType, AgentID: m.AgentID,
		}}
	if o := a.tools[m.ToolUseID]; o != nil {
		ev.Normalized, ev.ToolTitle = normalizeToolCall(o.name, o.input)
		ev.ParentToolCallID = o.parent
	}
	a.emit(ev)
}

// handleUnknown handles messages the wire package does not model: they are ignored.
func (a *Adapter) handleUnknown(m *claudecode.Unknown) {
	a.noteSession(m.SessionID)
	a.log.Debug("streamjson: ignoring message", "type", m.MessageType, "subtype", m.Subtype)
}
