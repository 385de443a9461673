package workflows

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

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

// promptSize is the size of p as it travels in a payload: the default data
// converter encodes it with encoding/json, escapes included.
func promptSize(p task.Prompt) int {
	// encoding/json is deterministic for a struct of strings; workflowcheck
	// flags it only for the caches and map encoding it may use.
	//workflowcheck:ignore
	b, err := json.Marshal(p)
	if err != nil {
		// A Prompt holds only strings; json.Marshal cannot fail on it.
		return len(p.Text)
	}
	return len(b)
}

// validatePrompt is the validator of UpdatePrompt: it runs before anything is
// written to history and must not change state.
func (s *taskState) validatePrompt(ctx workflow.Context, p task.Prompt) error {
	if _, dup := s.recentAnswer(updateID(ctx)); dup {
		return nil // answered before: the handler repeats that answer
	}
	if s.final != "" {
		return rejection(ErrTypeTaskClosed, fmt.Sprintf("task has ended (%s); it accepts no more prompts", s.final))
	}
	if s.closing {
		return rejection(ErrTypeTaskClosed, "task is closing; it accepts no more prompts")
	}
	if strings.TrimSpace(p.Text) == "" {
		return rejection(ErrTypeInvalidPrompt, "prompt is empty")
	}
	for _, a := range p.Attachments {
		if !filepath.IsLocal(a) {
			return rejection(ErrTypeInvalidPrompt, fmt.Sprintf("attachment %q is not a path inside the workspace", a))
		}
	}
	size := promptSize(p)
	if size > s.lim.maxPromptBytes {
		return rejection(ErrTypeInvalidPrompt, fmt.Sprintf("prompt is %d bytes, more than the %d allowed", size, s.lim.maxPromptBytes))
	}
	if len(s.pending) >= s.lim.maxPending {
		return rejection(ErrTypeQueueFull, fmt.Sprintf("%d prompts are already waiting; wait for some to run", len(s.pending)))
	}
	if s.queuedBytes+size > s.lim.maxQueuedBytes {
		return rejection(ErrTypeQueueFull, fmt.Sprintf("waiting prompts already hold %d bytes; this one (%d bytes) would pass the %d allowed, wait for some to run",
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
	s.turn++
	q := task.QueuedPrompt{Turn: s.turn, PromptUUID: PromptUUID(s.firstRunID, s.turn), Prompt: p}
	ahead := len(s.pending)
	if s.running != 0 {
		ahead++
	}
	s.pending = append(s.pending, q)
	s.queuedBytes += promptSize(p)
	workflow.GetLogger(ctx).Info("prompt queued", "turn", q.Turn, "prompt_uuid", q.PromptUUID, "ahead", ahead)
	a := task.PromptAccepted{Turn: q.Turn, PromptUUID: q.PromptUUID, Queued: ahead}
	s.remember(id, a)
	return a, nil
}

// updateID is the id of the Update being handled, or "" outside one.
func updateID(ctx workflow.Context) string {
	if info := workflow.GetCurrentUpdateInfo(ctx); info != nil {
		return info.ID
	}
	return ""
}
