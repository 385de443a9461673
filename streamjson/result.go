package streamjson

import (
	"sort"
	"strings"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// handleResult handles the end of a turn.
func (a *Adapter) handleResult(m *claudecode.ResultMessage) {
	a.noteSession(m.SessionID)
	if m.SessionID != "" {
		a.sessionID = m.SessionID
	}

	// Tool calls of the main agent that never got a result never will. (A subagent may outlive
	// the turn: its calls stay open until its task_notification.)
	status, reason := events.ToolComplete, ""
	if m.IsError {
		status, reason = events.ToolError, "no result: the turn ended first"
	}
	a.closeTools(func(o *openTool) bool { return o.parent == "" }, status, reason)

	// The result text is the last text block, which was already emitted unless nothing was.
	if !m.IsError && m.Result != "" && !a.turn.textEmitted {
		a.emitText(events.TypeMessageChunk, m.Result, "", "")
	}

	// Assistant entries become resume points only when the turn succeeded.
	if !m.IsError && a.pendingUUID != "" {
		a.commit(a.pendingUUID)
	}
	a.pendingUUID = ""

	for name, u := range m.ModelUsage {
		if u.ContextWindow > 0 {
			a.windows[name] = u.ContextWindow
		}
	}
	if u, ok := a.mainModelUsage(m.ModelUsage); ok && u.ContextWindow > 0 && u.ContextWindow != a.windowSize {
		a.windowSize = u.ContextWindow
		a.emitContextWindow()
	}

	c := a.completion(m)
	a.last = c
	if m.IsError {
		a.emit(events.AgentEvent{Type: events.TypeError, Error: resultError(m)})
	}
	cc := *c
	a.emit(events.AgentEvent{Type: events.TypeComplete, Data: &events.Data{Completion: &cc}})

	a.endTurn()
	clear(a.permissions)
}

// mainModelUsage returns the result's usage entry of the main model. When the main model is not
// known and there is a single entry, that one.
func (a *Adapter) mainModelUsage(usage map[string]claudecode.ModelUsage) (claudecode.ModelUsage, bool) {
	if u, ok := usage[a.mainModel]; ok && a.mainModel != "" {
		return u, true
	}
	if len(usage) == 1 && a.mainModel == "" {
		for _, u := range usage {
			return u, true
		}
	}
	return claudecode.ModelUsage{}, false
}

// completion computes this turn's accounting.
//
// The CLI's total_cost_usd and modelUsage are running totals over the process and across
// --resume; model_usage_since_last_result is this turn's usage per model (subagents and
// compaction included), and is what the turn's cost and tokens come from. When a result lacks it
// (a rejected resume, an older CLI), the cost is the growth of the running total since the last
// result (or since Config.PriorTotalCostUSD) and the tokens are the result's usage. Either way
// the per-turn costs add up to the CLI's final total.
func (a *Adapter) completion(m *claudecode.ResultMessage) *events.Completion {
	c := &events.Completion{
		TotalCostUSD:    m.TotalCostUSD,
		DurationMS:      m.DurationMS,
		NumTurns:        int(m.NumTurns),
		LastMessageUUID: a.lastUUID,
		SessionID:       a.sessionID,
		ResultUUID:      m.UUID,
		StopReason:      m.StopReason,
		TerminalReason:  m.TerminalReason,
		Subtype:         m.Subtype,
		IsError:         m.IsError,
	}
	if m.ModelUsageSinceLastResult != nil {
		models := make([]string, 0, len(m.ModelUsageSinceLastResult))
		for name := range m.ModelUsageSinceLastResult {
			models = append(models, name)
		}
		sort.Strings(models) // a fixed order keeps the float sum reproducible
		for _, name := range models {
			u := m.ModelUsageSinceLastResult[name]
			c.CostUSD += u.CostUSD
			c.InputTokens += u.InputTokens
			c.OutputTokens += u.OutputTokens
			c.CacheCreationInputTokens += u.CacheCreationInputTokens
			c.CacheReadInputTokens += u.CacheReadInputTokens
			if c.Models == nil {
				c.Models = map[string]events.ModelUsage{}
			}
			c.Models[name] = events.ModelUsage{
				InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
				CacheReadInputTokens: u.CacheReadInputTokens, CostUSD: u.CostUSD, ContextWindow: a.windows[name],
			}
		}
	} else {
		c.CostUSD = max(m.TotalCostUSD-a.lastTotalCost, 0)
		c.InputTokens = m.Usage.InputTokens
		c.OutputTokens = m.Usage.OutputTokens
		c.CacheCreationInputTokens = m.Usage.CacheCreationInputTokens
		c.CacheReadInputTokens = m.Usage.CacheReadInputTokens
	}
	a.lastTotalCost = max(a.lastTotalCost, m.TotalCostUSD)
	return c
}

// resultError classifies a failed turn and picks the best message for it.
func resultError(m *claudecode.ResultMessage) *events.ErrorInfo {
	e := &events.ErrorInfo{
		Subtype: m.Subtype, TerminalReason: m.TerminalReason, APIErrorStatus: int(m.APIErrorStatus), Errors: m.Errors,
		APIError: m.APIError, APIErrorCode: m.APIErrorCode,
	}
	detail := firstNonEmpty(strings.TrimSpace(m.Result), firstUsefulError(m.Errors))
	joined := strings.Join(m.Errors, "\n")
	switch {
	case strings.HasPrefix(m.TerminalReason, "aborted"):
		e.Kind, e.Message = events.ErrorInterrupted, "the turn was interrupted"
	case m.Subtype == claudecode.SubtypeErrorMaxTurns || m.TerminalReason == "max_turns":
		e.Kind, e.Message = events.ErrorMaxTurns, firstNonEmpty(detail, "reached the maximum number of turns")
	case m.Subtype == claudecode.SubtypeErrorMaxBudgetUSD:
		e.Kind, e.Message = events.ErrorMaxBudget, firstNonEmpty(detail, "reached the maximum budget")
	case m.TerminalReason == "api_error" || m.APIErrorStatus != 0 || strings.HasPrefix(m.Result, "API Error"):
		e.Kind, e.Message = events.ErrorAPI, firstNonEmpty(detail, "the API request failed")
	case strings.Contains(joined, "No message found with message.uuid") || strings.Contains(joined, "No conversation found"):
		e.Kind, e.Message = events.ErrorResumeRejected, firstNonEmpty(detail, "the session could not be resumed")
	default:
		e.Kind, e.Message = events.ErrorExecution, firstNonEmpty(detail, "the turn failed ("+m.Subtype+")")
	}
	return e
}

// firstUsefulError returns the first entry of errors that is not one of the CLI's internal
// diagnostics.
func firstUsefulError(errs []string) string {
	for _, e := range errs {
		if e = strings.TrimSpace(e); e != "" && !strings.HasPrefix(e, "[ede_diagnostic]") {
			return e
		}
	}
	return ""
}

// setMainModel records the main session's model; its window, when known, becomes the one
// context_window events report.
func (a *Adapter) setMainModel(model string) {
	a.mainModel = model
	if w := a.windows[model]; w > 0 && w != a.windowSize {
		a.windowSize = w
		a.emitContextWindow()
	}
}

// SetContextWindow tells the adapter a model's context window, as the CLI reported it
// (get_context_usage), when its results did not. An empty model means the main session's.
func (a *Adapter) SetContextWindow(model string, size int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if size <= 0 {
		return
	}
	if model == "" {
		model = a.mainModel
	}
	if model != "" {
		a.windows[model] = size
	}
	if model == a.mainModel || a.mainModel == "" {
		if a.mainModel == "" {
			a.mainModel = model
		}
		a.windowSize = size
		a.emitContextWindow()
	}
}
