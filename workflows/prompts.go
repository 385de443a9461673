package workflows

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// promptNamespace is the uuid namespace of prompt uuids. Changing it changes
// the uuids of every task's future prompts.
var promptNamespace = uuid.MustParse("670fc148-e6e4-4c8f-9247-8f22fb7dc2f7")

// PromptUUID is the transcript uuid of the prompt that runs as turn of the task
// whose first run has the id firstRunID. It depends on nothing else, so it is
// the same on replay, after continue-as-new and on every attempt of the turn.
func PromptUUID(firstRunID string, turn int) string {
	return uuid.NewSHA1(promptNamespace, []byte(firstRunID+"/"+strconv.Itoa(turn))).String()
}

// validatePrompt is the validator of UpdatePrompt: it runs before anything is
// written to history and must not change state.
func (s *taskState) validatePrompt(ctx workflow.Context, p task.Prompt) error {
	if err := s.validateParams(); err != nil {
		return err
	}
	if _, dup := s.recentAnswer(updateID(ctx)); dup {
		return nil // answered before: the handler repeats that answer
	}
	if s.final != "" {
		return rejection(task.ErrTypeTaskClosed, fmt.Sprintf("task has ended (%s); it accepts no more prompts", s.final))
	}
	if s.closing {
		return rejection(task.ErrTypeTaskClosed, "task is closing; it accepts no more prompts")
	}
	if s.exhausted != nil {
		return budgetRejection(*s.exhausted)
	}
	if err := task.ValidatePrompt(p); err != nil {
		return rejection(task.ErrTypeInvalidPrompt, err.Error())
	}
	size := task.PromptSize(p)
	if len(s.pending) >= s.lim.maxPending {
		return rejection(task.ErrTypeQueueFull, fmt.Sprintf("%d prompts are already waiting; wait for some to run", len(s.pending)))
	}
	if s.queuedBytes+size > s.lim.maxQueuedBytes {
		return rejection(task.ErrTypeQueueFull, fmt.Sprintf("waiting prompts already hold %d bytes; this one (%d bytes) would pass the %d allowed, wait for some to run",
			s.queuedBytes, size, s.lim.maxQueuedBytes))
	}
	return nil
}

// acceptPrompt is the handler of UpdatePrompt: it gives the prompt the next
// turn number and its uuid and queues it. It never blocks, so an accepted
// prompt is in the queue before any other coroutine runs.
func (s *taskState) acceptPrompt(ctx workflow.Context, p task.Prompt) (task.PromptAccepted, error) {
	id := updateID(ctx)
	if a, dup := s.recentAnswer(id); dup {
		workflow.GetLogger(ctx).Info("prompt already accepted by an earlier run", "update_id", id, "turn", a.Turn)
		return a, nil
	}
	return s.enqueue(ctx, p, id), nil
}

// enqueue gives p the next turn number and its uuid, queues it, and remembers the answer under
// the Update id id.
func (s *taskState) enqueue(ctx workflow.Context, p task.Prompt, id string) task.PromptAccepted {
	s.turn++
	q := task.QueuedPrompt{Turn: s.turn, PromptUUID: PromptUUID(s.firstRunID, s.turn), Prompt: p}
	ahead := len(s.pending)
	if s.running != 0 {
		ahead++
	}
	s.pending = append(s.pending, q)
	s.queuedBytes += task.PromptSize(p)
	if s.rs.local {
		// The read side, and the host that runs the turn before it (which keeps its CLI for a
		// queued prompt), learn of the prompt now, not when its turn starts.
		s.stateChanged()
	}
	workflow.GetLogger(ctx).Info("prompt queued", "turn", q.Turn, "prompt_uuid", q.PromptUUID, "ahead", ahead)
	a := task.PromptAccepted{Turn: q.Turn, PromptUUID: q.PromptUUID, Queued: ahead}
	s.remember(id, a)
	return a
}

// takeFirst queues the prompt a new task was started with (task.Params.First), as its first
// turn, before any Update is handled. One that no task could take is recorded as the task's
// last error and dropped.
func (s *taskState) takeFirst(ctx workflow.Context) {
	f := s.p.First
	if f == nil || s.p.Carry != nil {
		return
	}
	if _, dup := s.recentAnswer(f.UpdateID); dup {
		return
	}
	if err := task.ValidatePrompt(f.Prompt); err != nil {
		s.setLastError("the first prompt was refused: " + err.Error())
		return
	}
	s.enqueue(ctx, f.Prompt, f.UpdateID)
}

// updateID is the id of the Update being handled, or "" outside one.
func updateID(ctx workflow.Context) string {
	if info := workflow.GetCurrentUpdateInfo(ctx); info != nil {
		return info.ID
	}
	return ""
}
