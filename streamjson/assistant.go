package streamjson

import (
	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// handleAssistant handles one assistant frame: one content block of a model message.
func (a *Adapter) handleAssistant(m *claudecode.AssistantMessage) {
	a.noteSession(m.SessionID)
	main := m.ParentToolUseID == ""
	if main {
		a.startTurn()
	}
	synthetic := m.Message.Model == syntheticModel
	apiError := m.IsAPIErrorMessage || (synthetic && m.Error != "")
	id := m.Message.ID
	if main && m.UserMessageUUID != "" {
		a.adoptPrompt(m.UserMessageUUID)
	}
	for i := range m.Message.Content {
		b := &m.Message.Content[i]
		switch b.Type {
		case claudecode.BlockText:
			// An API error's synthetic text is the error message: the error event carries it.
			if apiError || b.Text == "" || (a.cfg.PartialMessages && a.turn.streamedText[id]) {
				continue
			}
			a.emitText(events.TypeMessageChunk, b.Text, id, m.ParentToolUseID)
		case claudecode.BlockThinking:
			if b.Thinking == "" || (a.cfg.PartialMessages && a.turn.streamedThk[id]) {
				continue
			}
			a.emitText(events.TypeReasoning, b.Thinking, id, m.ParentToolUseID)
		case claudecode.BlockToolUse:
			a.toolCall(b.ID, b.Name, b.Input, m.ParentToolUseID)
		}
	}
	if apiError && m.APIErrorParams != nil && m.APIErrorParams.RateLimitInfo != nil {
		a.emitRateLimit(events.RateLimitSourceAPIError, *m.APIErrorParams.RateLimitInfo)
	}
	if !main || synthetic {
		// Subagent entries are not on the main chain, and the CLI's synthetic messages are not
		// always assistant entries of the transcript: neither is a resume point.
		return
	}
	if m.UUID != "" {
		a.pendingUUID = m.UUID
	}
	if m.Message.Model != "" {
		a.setMainModel(m.Message.Model)
	}
	if id != "" && id != a.usageMsgID {
		a.usageMsgID = id
		u := m.Message.Usage
		a.windowUsed = u.InputTokens + u.OutputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		a.emitContextWindow()
	}
}

// emitText emits a message_chunk or reasoning event.
func (a *Adapter) emitText(typ events.Type, text, messageID, parent string) {
	ev := events.AgentEvent{Type: typ, MessageID: messageID, ParentToolCallID: parent}
	if typ == events.TypeReasoning {
		ev.ReasoningText = text
	} else {
		ev.Text = text
		if parent == "" {
			a.turn.textEmitted = true
		}
	}
	a.emit(ev)
}

// emitContextWindow emits the main session's context window when it changed. It waits until
// the window's size is known and something was used.
func (a *Adapter) emitContextWindow() {
	if a.windowSize <= 0 || a.usageMsgID == "" {
		return
	}
	cw := events.NewContextWindow(a.windowSize, a.windowUsed)
	cw.Model = a.mainModel
	if a.windowKnown && *cw == a.lastWindow {
		return
	}
	a.windowKnown, a.lastWindow = true, *cw
	a.emit(events.AgentEvent{Type: events.TypeContextWindow, ContextWindow: cw})
}

// handleStreamEvent handles the raw API events of --include-partial-messages: text and thinking
// deltas are emitted as they come.
func (a *Adapter) handleStreamEvent(m *claudecode.StreamEvent) {
	a.noteSession(m.SessionID)
	if !a.cfg.PartialMessages {
		return
	}
	ev := &m.Event
	parent := m.ParentToolUseID
	if parent == "" {
		a.startTurn()
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			setMap(&a.turn.streamMsg, parent, ev.Message.ID, a.cfg.MaxPending)
		}
	case "content_block_delta":
		if ev.Delta == nil {
			return
		}
		id := a.turn.streamMsg[parent]
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text == "" {
				return
			}
			setMap(&a.turn.streamedText, id, true, a.cfg.MaxPending)
			a.emitText(events.TypeMessageChunk, ev.Delta.Text, id, parent)
		case "thinking_delta":
			if ev.Delta.Thinking == "" {
				return
			}
			setMap(&a.turn.streamedThk, id, true, a.cfg.MaxPending)
			a.emitText(events.TypeReasoning, ev.Delta.Thinking, id, parent)
		}
	}
}
