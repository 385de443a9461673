package engine

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/streamjson"
)

// maxOpenToolSpans bounds the tool spans one turn keeps open; a CLI that never
// closes its tool calls cannot grow this without limit.
const maxOpenToolSpans = 256

// tracingSink traces a turn's events under the turn's span: each tool call is
// a child span from tool_call to its tool_update, each permission request a
// child span until it is answered or withdrawn, and every other event a span
// event. Only names, ids, statuses and counts are recorded — never tool input,
// output or message text, which may hold secrets.
type tracingSink struct {
	next   streamjson.Sink
	tracer trace.Tracer
	ctx    context.Context // carries the turn's span

	mu    sync.Mutex
	tools map[string]trace.Span
	perms map[string]trace.Span
}

func newTracingSink(ctx context.Context, tracer trace.Tracer, next streamjson.Sink) *tracingSink {
	return &tracingSink{next: next, tracer: tracer, ctx: ctx, tools: map[string]trace.Span{}, perms: map[string]trace.Span{}}
}

func (s *tracingSink) Emit(ev events.AgentEvent) {
	s.trace(ev)
	s.next.Emit(ev)
}

func (s *tracingSink) trace(ev events.AgentEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	turn := trace.SpanFromContext(s.ctx)
	switch ev.Type {
	case events.TypeToolCall:
		if ev.ToolCallID == "" || len(s.tools) >= maxOpenToolSpans {
			return
		}
		if _, open := s.tools[ev.ToolCallID]; open {
			return
		}
		_, span := s.tracer.Start(s.ctx, "drover.tool "+ev.ToolName, trace.WithAttributes(
			attribute.String("drover.tool_name", ev.ToolName),
			attribute.String("drover.tool_call_id", ev.ToolCallID),
			attribute.String("drover.parent_tool_call_id", ev.ParentToolCallID),
			attribute.String("drover.tool_kind", payloadKind(ev.Normalized)),
		))
		s.tools[ev.ToolCallID] = span
	case events.TypeToolUpdate:
		span, ok := s.tools[ev.ToolCallID]
		if !ok {
			return
		}
		span.SetAttributes(attribute.String("drover.tool_status", string(ev.ToolStatus)))
		if ev.ToolStatus == events.ToolError {
			span.SetStatus(codes.Error, "tool failed")
		}
		if ev.ToolStatus != events.ToolRunning {
			span.End()
			delete(s.tools, ev.ToolCallID)
		}
	case events.TypePermissionRequest:
		if ev.PendingID == "" || len(s.perms) >= maxOpenToolSpans {
			return
		}
		_, span := s.tracer.Start(s.ctx, "drover.permission "+ev.ToolName, trace.WithAttributes(
			attribute.String("drover.pending_id", ev.PendingID),
			attribute.String("drover.tool_name", ev.ToolName),
		))
		s.perms[ev.PendingID] = span
	case events.TypePermissionCancelled:
		if span, ok := s.perms[ev.PendingID]; ok {
			span.SetAttributes(attribute.Bool("drover.cancelled", true))
			span.End()
			delete(s.perms, ev.PendingID)
		}
	case events.TypeComplete:
		if ev.Data != nil && ev.Data.Completion != nil && ev.ParentToolCallID == "" {
			c := ev.Data.Completion
			turn.SetAttributes(
				attribute.Float64("drover.cost_usd", c.CostUSD),
				attribute.Int64("drover.input_tokens", c.InputTokens),
				attribute.Int64("drover.output_tokens", c.OutputTokens),
				attribute.Int("drover.num_turns", c.NumTurns),
				attribute.String("drover.session_id", c.SessionID),
			)
		}
		turn.AddEvent(string(ev.Type))
	case events.TypeError:
		if ev.Error != nil {
			turn.AddEvent("error", trace.WithAttributes(attribute.String("drover.error_kind", string(ev.Error.Kind))))
		}
	case events.TypeMessageChunk, events.TypeReasoning, events.TypeContextWindow:
		// Too frequent to be worth a span event each.
	default:
		turn.AddEvent(string(ev.Type))
	}
}

// close ends every span still open: the turn is over.
func (s *tracingSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, span := range s.tools {
		span.SetStatus(codes.Error, "the turn ended before the tool")
		span.End()
		delete(s.tools, id)
	}
	for id, span := range s.perms {
		span.End()
		delete(s.perms, id)
	}
}

func payloadKind(p *events.NormalizedPayload) string {
	if p == nil {
		return ""
	}
	return string(p.Kind)
}
