package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// attentionChangeID gates tasks that wait for a person when their session cannot be resumed: a
// history from before them clears the session and starts the next prompt in a new one.
const attentionChangeID = "resume-refused-needs-attention"

// setAttentionHandler registers UpdateResolve.
func (s *taskState) setAttentionHandler(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateResolve, s.resolve,
		workflow.UpdateHandlerOptions{Validator: s.validateResolve, Description: "choose what a task that needs attention does"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateResolve, err)
	}
	return nil
}

// resumeRefused reports whether the turn of q failed for good because the CLI refused every way
// to resume the task's session. The task then needs attention: the prompt goes back to the head
// of the queue under a new turn number, the session stands, and nothing runs until a person
// chooses (UpdateResolve). The refused turn counts as a failed one.
func (s *taskState) resumeRefused(ctx workflow.Context, q task.QueuedPrompt, err error) bool {
	errType, msg := describeError(err)
	if errType != task.ErrTypeResumeRejected {
		return false
	}
	if workflow.GetVersion(ctx, attentionChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	s.turnGaveUp(fmt.Sprintf("turn %d failed: the CLI refused to resume the session (%s); the task needs attention: retry, or start a new session", q.Turn, msg))
	s.attention = &task.Attention{Turn: q.Turn, SessionID: s.sessionID, Error: msg, At: workflow.Now(ctx)}
	s.turn++
	again := task.QueuedPrompt{Turn: s.turn, PromptUUID: PromptUUID(s.firstRunID, s.turn), Prompt: q.Prompt}
	s.pending = append([]task.QueuedPrompt{again}, s.pending...)
	s.queuedBytes += task.PromptSize(again.Prompt)
	workflow.GetLogger(ctx).Warn("the session could not be resumed; the task needs attention", "turn", q.Turn, "session_id", s.sessionID, "error", msg)
	return true
}

// waitForAttention waits, while the task needs attention and prompts wait, for a person's
// choice, the task to close, or a reason to continue as new. A task closed meanwhile ends without
// running its waiting prompts.
func (s *taskState) waitForAttention(ctx workflow.Context) error {
	if s.closing {
		s.setLastError(fmt.Sprintf("%d waiting prompts did not run: the task closed while its session could not be resumed", len(s.pending)))
		s.pending = nil
		s.queuedBytes = 0
		s.attention = nil
		return nil
	}
	s.publish(ctx)
	return workflow.Await(ctx, func() bool { return s.attention == nil || s.closing || s.wantContinueAsNew(ctx) })
}

// validateResolve is the validator of UpdateResolve.
func (s *taskState) validateResolve(ctx workflow.Context, c task.AttentionChoice) error {
	if err := s.validateOpen(ctx); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return rejection(task.ErrTypeInvalidInput, err.Error())
	}
	if s.attention == nil || len(s.pending) == 0 {
		return rejection(task.ErrTypeNoAttentionNeeded, "the task does not need attention: its session resumes")
	}
	return nil
}

// resolve is the handler of UpdateResolve: retry resumes the session again; new_session starts
// the waiting prompt in a new session, seeded with the summary. It answers with the turn that
// runs the waiting prompt.
func (s *taskState) resolve(ctx workflow.Context, c task.AttentionChoice) (int, error) {
	defer s.publish(ctx)
	q := &s.pending[0]
	if c.Choice == task.ResolveNewSession {
		before := task.PromptSize(q.Prompt)
		q.Prompt.Text = task.SeededPrompt(c.Summary, q.Prompt.Text)
		s.queuedBytes += task.PromptSize(q.Prompt) - before
		s.sessionID, s.lastUUID = "", ""
		s.newSessionTurn = q.Turn
	}
	workflow.GetLogger(ctx).Info("attention resolved", "choice", c.Choice, "turn", q.Turn, "refused_turn", s.attention.Turn)
	s.attention = nil
	return q.Turn, nil
}

func cloneAttention(a *task.Attention) *task.Attention {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}
