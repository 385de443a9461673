package taskview

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// maxSummaryAnswer bounds each turn's answer in a session summary.
const maxSummaryAnswer = 2000

// SessionSummary is what a task's committed turns did, for a person who starts the task again in
// a new session (task.ResolveNewSession): each completed turn's prompt and the last text the
// model answered it with, oldest first, within task.MaxSummaryBytes (the latest turns kept).
func (v *View) SessionSummary(ctx context.Context, taskID string) (string, error) {
	return SessionSummary(ctx, v.Pool, taskID)
}

// SessionSummary is View.SessionSummary on db.
func SessionSummary(ctx context.Context, db store.DB, taskID string) (string, error) {
	turns, err := store.ListTurns(ctx, db, taskID)
	if err != nil {
		return "", fmt.Errorf("summarizing task %s: %w", taskID, err)
	}
	evs, err := store.ListEvents(ctx, db, taskID, 0, 0)
	if err != nil {
		return "", fmt.Errorf("summarizing task %s: %w", taskID, err)
	}
	answers := lastAnswers(evs)
	var parts []string
	for _, t := range turns {
		if t.Status != task.TurnCompleted {
			continue
		}
		answer := []rune(strings.TrimSpace(answers[t.Turn]))
		if len(answer) > maxSummaryAnswer {
			answer = append(answer[:maxSummaryAnswer], '…')
		}
		parts = append(parts, fmt.Sprintf("Turn %d. Asked: %s\nAnswered: %s", t.Turn, strings.TrimSpace(t.Prompt), string(answer)))
	}
	for len(parts) > 1 && len(strings.Join(parts, "\n\n")) > task.MaxSummaryBytes-1024 {
		parts = parts[1:]
	}
	return strings.Join(parts, "\n\n"), nil
}

// lastAnswers maps each turn to the text of the last model message its last attempt streamed
// (subagents' aside).
func lastAnswers(evs []store.Event) map[int]string {
	type key struct{ turn, attempt int }
	last := map[int]int{}
	msgID := map[key]string{}
	text := map[key]*strings.Builder{}
	for _, e := range evs {
		if e.Type != string(events.TypeMessageChunk) {
			continue
		}
		var ev events.AgentEvent
		if json.Unmarshal(e.Payload, &ev) != nil || ev.ParentToolCallID != "" {
			continue
		}
		k := key{e.Turn, e.Attempt}
		if e.Attempt > last[e.Turn] {
			last[e.Turn] = e.Attempt
		}
		if msgID[k] != ev.MessageID || text[k] == nil {
			msgID[k], text[k] = ev.MessageID, &strings.Builder{}
		}
		text[k].WriteString(ev.Text)
	}
	out := map[int]string{}
	for turn, attempt := range last {
		out[turn] = text[key{turn, attempt}].String()
	}
	return out
}
