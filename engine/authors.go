package engine

import (
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/streamjson"
)

// authorSink names who caused an attempt's events that a person caused: its prompt's
// user_message (by the prompt's author, task.Prompt.By) and an interrupted event (by whoever
// asked for the interrupt, Engine.InterruptBy). The adapter knows neither; the attempt does.
type authorSink struct {
	next       streamjson.Sink
	a          *attempt
	promptUUID string
	prompted   bool // the prompt's user_message went by
}

func (a *attempt) authorSink(next streamjson.Sink) *authorSink {
	return &authorSink{next: next, a: a, promptUUID: attemptPromptUUID(a.req.PromptUUID, a.req.Attempt)}
}

// Emit is called with the adapter locked: one event at a time.
func (s *authorSink) Emit(ev events.AgentEvent) {
	if ev.By == "" && ev.ParentToolCallID == "" {
		switch ev.Type {
		case events.TypeUserMessage:
			// The prompt's echo: by its uuid, else the first user message of the turn that
			// carries the prompt's text.
			if !s.prompted && (ev.UUID == s.promptUUID || ev.Text == s.a.req.Prompt.Text) {
				s.prompted = true
				ev.By = s.a.req.Prompt.By
			}
		case events.TypeInterrupted:
			ev.By = s.a.e.interruptAuthor(s.a.req.TaskID, s.a.req.Turn)
		case events.TypeError:
			if ev.Error != nil && ev.Error.Kind == events.ErrorInterrupted {
				ev.By = s.a.e.interruptAuthor(s.a.req.TaskID, s.a.req.Turn)
			}
		}
	}
	s.next.Emit(ev)
}
