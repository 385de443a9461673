package streamjson

import "github.com/drover-run/drover/events"

// Sink receives the adapter's events in order. Emit is called on the goroutine that feeds the
// adapter and must not call back into it.
type Sink interface {
	Emit(events.AgentEvent)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(events.AgentEvent)

// Emit calls f(ev).
func (f SinkFunc) Emit(ev events.AgentEvent) { f(ev) }
