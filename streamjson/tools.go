package streamjson

import (
	"bytes"
	"sort"

	"github.com/drover-run/drover/events"
)

// toolCall emits a tool_call for a tool_use block and remembers it until its result.
func (a *Adapter) toolCall(id, name string, input []byte, parent string) {
	if id == "" {
		return
	}
	if _, dup := a.tools[id]; dup {
		return
	}
	if len(a.tools) >= a.cfg.MaxPending {
		// Bound memory over a long session: give up on every open call. At this size they can
		// only be subagent calls whose end the CLI never reported.
		a.closeTools(func(*openTool) bool { return true }, events.ToolError, "no result: too many open tool calls")
	}
	p, title := normalizeToolCall(name, input)
	// The input is copied: a message's bytes may be reused after Handle returns (see
	// claudecode.Reader.ReadMessageView), and a copy pins less than the whole line would.
	a.tools[id] = &openTool{name: name, title: title, input: bytes.Clone(input), parent: parent}
	a.emit(events.AgentEvent{Type: events.TypeToolCall, ToolCallID: id, ToolName: name, ToolTitle: title,
		ToolStatus: events.ToolRunning, Normalized: p, ParentToolCallID: parent})
}

// toolUpdate emits the tool_update for a tool result and forgets the call. A result for a call
// the adapter never saw is ignored.
func (a *Adapter) toolUpdate(id string, r toolResult) {
	o := a.tools[id]
	if o == nil {
		a.log.Debug("streamjson: tool result for an unknown tool call", "tool_use_id", id)
		return
	}
	delete(a.tools, id)
	// A fresh payload: the tool_call event's payload may still be held by the sink.
	p, _ := normalizeToolCall(o.name, o.input)
	status, errText := applyToolResult(p, r)
	a.emit(events.AgentEvent{Type: events.TypeToolUpdate, ToolCallID: id, ToolName: o.name, ToolTitle: o.title,
		ToolStatus: status, Normalized: p, ToolError: errText, ParentToolCallID: o.parent})
}

// closeTools ends the open tool calls that match, in tool_use_id order so that output is
// deterministic.
func (a *Adapter) closeTools(match func(*openTool) bool, status events.ToolStatus, reason string) {
	var ids []string
	for id, o := range a.tools {
		if match(o) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		o := a.tools[id]
		delete(a.tools, id)
		p, _ := normalizeToolCall(o.name, o.input)
		ev := events.AgentEvent{Type: events.TypeToolUpdate, ToolCallID: id, ToolName: o.name, ToolTitle: o.title,
			ToolStatus: status, Normalized: p, ParentToolCallID: o.parent}
		if status == events.ToolError {
			ev.ToolError = reason
		}
		a.emit(ev)
	}
}
