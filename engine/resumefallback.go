package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/task"
)

// resumeStep is how a process resumes the turn's session. When the CLI refuses the committed
// point, the attempt falls back one step at a time, each step keeping the whole conversation up
// to that point; none starts a new session. When every step is refused the attempt fails with
// ResumeRejected, and the task waits for a person (task.StatusNeedsAttention).
type resumeStep int

const (
	// resumeExact: the session restored from its mirror, --resume S --resume-session-at U.
	resumeExact resumeStep = iota
	// resumeChain: the transcript rebuilt from the mirror with only the entries on the chain
	// that ends at U (a branch a lost attempt or a truncating resume left beside it cannot be
	// taken for the conversation), then --resume S --resume-session-at U.
	resumeChain
	// resumePlain: the same rebuilt transcript, whose last entry is U, and a plain --resume S.
	// Neither this step nor the one before is taken when the transcript does not hold U.
	resumePlain
	numResumeSteps
)

func (s resumeStep) String() string {
	return [...]string{"at the committed message", "on a transcript rebuilt along the committed chain", "with a plain --resume"}[s]
}

// runAt gets a process at the resume point the way step says, starts the turn on it and waits
// for its end.
func (a *attempt) runAt(ctx context.Context, in prepared, at resumePoint, step resumeStep) outcome {
	ex, fresh, f := a.executor(ctx, in.workspace, at, step)
	if f != nil {
		return failed(f)
	}
	a.ex = ex
	ended, f := a.startTurn(ctx, ex, fresh, in.images)
	if f != nil {
		return failed(f)
	}
	return a.wait(ctx, ex, ended)
}

// resumeWithFallback runs the turn at its resume point and, while the CLI refuses to resume
// there, at the next resume step. A refusal comes before the CLI calls the API: nothing of the
// turn ran. Each step taken is logged and told in the task's event log.
func (a *attempt) resumeWithFallback(ctx context.Context, in prepared, at resumePoint) outcome {
	o := a.runAt(ctx, in, at, resumeExact)
	var first error
	if refused(o) {
		first = o.fail.Err
	}
	for step := resumeExact + 1; step < numResumeSteps && refused(o) && at.sessionID != "" && ctx.Err() == nil; step++ {
		a.log.Warn("claude refused the resume; trying the next way", "session_id", at.sessionID, "resume_at", at.uuid,
			"next", step.String(), "error", o.fail)
		a.emit(events.AgentEvent{Type: events.TypeError, SessionID: at.sessionID, Error: &events.ErrorInfo{
			Kind:    events.ErrorResumeRejected,
			Message: fmt.Sprintf("claude refused to resume the session (%v); resuming it %s", o.fail, step),
		}})
		a.dropRefused(ctx)
		o = a.runAt(ctx, in, at, step)
	}
	if refused(o) && first != nil {
		o.fail.Err = fmt.Errorf("%w; every way to resume the session was refused (%d tried), the last: %v", first, numResumeSteps, o.fail.Err)
	}
	return o
}

// rebuildChain prepares the transcript for the resume steps past the first (keepChain): a step
// that cannot check the transcript holds the committed message (no config folder of its own) or
// finds it does not, is refused before any process starts.
func (a *attempt) rebuildChain(at resumePoint, step resumeStep) *Error {
	if step < resumeChain || at.sessionID == "" || at.uuid == "" {
		return nil
	}
	dir := a.e.cfg.Claude.ConfigDir
	if dir == "" {
		return &Error{Type: task.ErrTypeResumeRejected, Err: errors.New("the CLI keeps its transcripts where drover does not look (DROVER_CLAUDE_CONFIG_DIR is not set): they cannot be rebuilt")}
	}
	dropped, err := keepChain(dir, at.sessionID, at.uuid)
	if err != nil {
		return &Error{Type: task.ErrTypeResumeRejected, Err: fmt.Errorf("rebuilding the transcript along its committed chain: %w", err)}
	}
	a.log.Info("rebuilt the transcript along its committed chain", "session_id", at.sessionID, "resume_at", at.uuid, "lines_left_out", dropped)
	return nil
}

// refused reports whether o is the CLI's refusal of the resume point.
func refused(o outcome) bool { return o.fail != nil && o.fail.Type == task.ErrTypeResumeRejected }

// dropRefused stops the process that refused the resume and detaches it from the attempt.
func (a *attempt) dropRefused(ctx context.Context) {
	if a.ex == nil {
		return
	}
	if a.inTurn {
		a.ex.approvals.Store(nil)
		a.e.drop(ctx, a.ex, "claude refused the resume")
		a.ex.endTurn("", "", "")
	} else {
		a.e.drop(ctx, a.ex, "claude refused the resume")
	}
	if a.sink != nil {
		a.sink.close()
		a.sink = nil
	}
	a.ex, a.inTurn = nil, false
}

// errNotInTranscript: the session's transcript does not hold the committed message. No fallback
// resumes there: a plain --resume would continue from an earlier point and lose the turns after
// it without a word.
var errNotInTranscript = errors.New("the session's transcript does not hold the committed message")

// keepChain rewrites the session's transcripts in configDir to the entries on the chain that ends
// at uuid, and the lines that are no conversation entry (they carry no uuid), in their order: the
// conversation the CLI loads is then the one the turn committed. It reports how many lines it
// left out, or errNotInTranscript when no transcript holds uuid.
func keepChain(configDir, sessionID, uuid string) (int, error) {
	paths, err := filepath.Glob(filepath.Join(configDir, "projects", "*", sessionID+".jsonl"))
	if err != nil {
		return 0, err
	}
	dropped, found := 0, false
	for _, path := range paths {
		content, err := os.ReadFile(path)
		if err != nil {
			return dropped, fmt.Errorf("reading the transcript: %w", err)
		}
		kept, n, held := chainLines(content, uuid)
		found = found || held
		if n == 0 {
			continue
		}
		if err := writeAtomically(path, kept); err != nil {
			return dropped, fmt.Errorf("rewriting the transcript: %w", err)
		}
		dropped += n
	}
	if !found {
		return 0, errNotInTranscript
	}
	return dropped, nil
}

// transcriptLine is what keepChain reads of a transcript line.
type transcriptLine struct {
	UUID              string `json:"uuid"`
	ParentUUID        string `json:"parentUuid"`
	LogicalParentUUID string `json:"logicalParentUuid"`
}

// chainLines returns content with only the lines on the chain that ends at leaf (and those that
// carry no uuid), how many it left out, and whether content holds leaf (when not, content is
// returned as it is). A line cut short (the CLI was stopped writing it) is left out.
func chainLines(content []byte, leaf string) ([]byte, int, bool) {
	lines := bytes.SplitAfter(content, []byte("\n"))
	parsed := make([]transcriptLine, len(lines))
	byUUID := map[string]int{}
	for i, l := range lines {
		if json.Unmarshal(l, &parsed[i]) == nil && parsed[i].UUID != "" {
			byUUID[parsed[i].UUID] = i
		}
	}
	if _, ok := byUUID[leaf]; !ok {
		return content, 0, false
	}
	on := map[int]bool{}
	for u := leaf; u != ""; {
		i, ok := byUUID[u]
		if !ok || on[i] {
			break
		}
		on[i] = true
		u = parsed[i].ParentUUID
		if u == "" {
			u = parsed[i].LogicalParentUUID // a compaction's boundary continues the conversation
		}
	}
	var out []byte
	dropped := 0
	for i, l := range lines {
		whole := len(l) > 0 && l[len(l)-1] == '\n' && json.Valid(l)
		switch {
		case len(bytes.TrimSpace(l)) == 0:
		case whole && (on[i] || parsed[i].UUID == ""):
			out = append(out, l...)
		default:
			dropped++
		}
	}
	return out, dropped, true
}
