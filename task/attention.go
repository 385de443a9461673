package task

import (
	"fmt"
	"strings"
	"time"
)

// A task needs attention when the CLI refused every way drover has to resume its session (see
// ErrTypeResumeRejected): it runs nothing and never starts a new session by itself. A person
// chooses (UpdateResolve): retry the resume, or start a new session seeded with a summary of the
// old one.

// StatusNeedsAttention: the task's session could not be resumed; its prompts wait until a person
// chooses what to do (State.Attention says why and since when).
const StatusNeedsAttention Status = "needs_attention"

// UpdateResolve answers a task that needs attention (an AttentionChoice); its result is the
// turn that runs the waiting prompt.
const UpdateResolve = "resolve"

// ErrTypeNoAttentionNeeded: an UpdateResolve for a task that does not need attention.
const ErrTypeNoAttentionNeeded = "NoAttentionNeeded"

// Attention says why a task needs a person.
type Attention struct {
	// Turn is the turn whose session could not be resumed; its prompt waits, first in the queue.
	Turn int `json:"turn"`
	// SessionID is the session the CLI refused to resume.
	SessionID string `json:"session_id,omitempty"`
	// Error is what the CLI said.
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// Resolution is what a person chose for a task that needs attention.
type Resolution string

const (
	// ResolveRetry tries to resume the session again (after a person repaired what kept it
	// from resuming, or to try once more).
	ResolveRetry Resolution = "retry"
	// ResolveNewSession starts a new session whose first prompt carries a summary of the old
	// one before the waiting prompt.
	ResolveNewSession Resolution = "new_session"
)

// Resolutions lists every Resolution.
func Resolutions() []Resolution { return []Resolution{ResolveRetry, ResolveNewSession} }

// AttentionChoice is the argument of UpdateResolve.
type AttentionChoice struct {
	Choice Resolution `json:"choice"`
	// Summary seeds the new session (ResolveNewSession): what the old one did. The caller builds
	// it from the task's event log (taskview.SessionSummary) unless a person wrote one.
	Summary string `json:"summary,omitempty"`
}

// MaxSummaryBytes bounds AttentionChoice.Summary.
const MaxSummaryBytes = 64 << 10

// Validate checks a choice.
func (c AttentionChoice) Validate() error {
	switch c.Choice {
	case ResolveRetry, ResolveNewSession:
	default:
		return fmt.Errorf("unknown choice %q (allowed: retry, new_session)", c.Choice)
	}
	if len(c.Summary) > MaxSummaryBytes {
		return fmt.Errorf("the summary is %d bytes; at most %d", len(c.Summary), MaxSummaryBytes)
	}
	return nil
}

// SeededPrompt is the first prompt of a new session that continues a task: the old session's
// summary, then the prompt that waited.
func SeededPrompt(summary, prompt string) string {
	var b strings.Builder
	b.WriteString("This task continues in a new session: the previous session could not be resumed.")
	if s := strings.TrimSpace(summary); s != "" {
		b.WriteString(" What was done so far:\n\n")
		b.WriteString(s)
	}
	b.WriteString("\n\nThe request to continue with:\n\n")
	b.WriteString(prompt)
	return b.String()
}
