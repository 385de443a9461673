package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/taskview"
)

const maxPromptBytes = task.MaxPromptBytes

// Tasks is the write side the API sends commands through: *taskclient.Client. Each method
// checks its input as the command line does (task.ValidateID, task.Params.Validate,
// task.ValidatePrompt) before anything is sent. Create carries the first prompt in the task's
// start, so that it needs no worker (taskclient.Client.Create).
type Tasks interface {
	Create(ctx context.Context, taskID string, p task.Params, prompt task.Prompt, updateID string) (task.PromptAccepted, error)
	Prompt(ctx context.Context, taskID string, prompt task.Prompt, updateID string) (task.PromptAccepted, error)
	InterruptBy(ctx context.Context, taskID, by string) (task.InterruptResult, error)
	Close(ctx context.Context, taskID string) error
	CancelBy(ctx context.Context, taskID, by string) error
	UpdateBudget(ctx context.Context, taskID string, change task.BudgetChange) (task.Budget, error)
	Rewind(ctx context.Context, taskID string, turn int) (task.Rewound, error)
	Fork(ctx context.Context, src, dst string, turn int, prompt task.Prompt) (task.PromptAccepted, error)
	Resolve(ctx context.Context, taskID string, choice task.AttentionChoice) (int, error)
}

// CreateTask is the body of POST /api/v1/tasks.
type CreateTask struct {
	// ID names the task; empty means a new uuid. Creating a task that exists sends it the
	// prompt, as drover task start does.
	ID string `json:"id,omitempty"`
	// Title names the task for a person; empty means the first line of the prompt.
	Title  string `json:"title,omitempty"`
	Prompt string `json:"prompt"`
	// Attachments are image paths relative to the workspace.
	Attachments []string            `json:"attachments,omitempty"`
	Mode        task.PermissionMode `json:"mode,omitempty"`
	AfterPlan   task.PermissionMode `json:"after_plan,omitempty"`
	Model       string              `json:"model,omitempty"`
	// Workspace is the absolute path of the folder the agent works in, on the workers' hosts;
	// Cwd is another name for it.
	Workspace string `json:"workspace,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	// Repo makes the task managed: a git repository (URL, or absolute path on the workers'
	// hosts) it works on in a worktree of its own; Base is the branch, tag or commit it starts
	// from (empty: the default branch). Instead of Workspace.
	Repo            string      `json:"repo,omitempty"`
	Base            string      `json:"base,omitempty"`
	MaxTurns        int         `json:"max_turns,omitempty"`
	SystemPrompt    string      `json:"system_prompt,omitempty"`
	IdleTimeout     Duration    `json:"idle_timeout,omitempty"`
	ApprovalTimeout Duration    `json:"approval_timeout,omitempty"`
	Budget          *BudgetJSON `json:"budget,omitempty"`
}

// BudgetJSON is a task's budget in the API: task.Budget with its duration as a string.
type BudgetJSON struct {
	MaxCostUSD  float64  `json:"max_cost_usd,omitempty"`
	MaxTurns    int      `json:"max_turns,omitempty"`
	MaxDuration Duration `json:"max_duration,omitempty"`
}

// params are the task's parameters and first prompt that c describes.
func (c CreateTask) params() (task.Params, task.Prompt, *taskerr.Error) {
	ws := c.Workspace
	switch {
	case ws != "" && c.Cwd != "" && filepath.Clean(ws) != filepath.Clean(c.Cwd):
		return task.Params{}, task.Prompt{}, invalidInput(&task.InvalidError{Field: "workspace",
			Reason: "workspace and cwd name different folders; give one of them"})
	case ws == "":
		ws = c.Cwd
	}
	if ws != "" && !filepath.IsAbs(ws) {
		return task.Params{}, task.Prompt{}, invalidInput(&task.InvalidError{Field: "workspace",
			Reason: fmt.Sprintf("%q is not an absolute path; give the folder's full path on the workers' hosts", ws)})
	}
	if ws != "" {
		ws = filepath.Clean(ws)
	}
	if c.Repo != "" && !filepath.IsAbs(c.Repo) && !strings.Contains(c.Repo, ":") {
		return task.Params{}, task.Prompt{}, invalidInput(&task.InvalidError{Field: "repo",
			Reason: fmt.Sprintf("%q is neither a URL nor an absolute path; give the repository's URL or its full path on the workers' hosts", c.Repo)})
	}
	p := task.Params{
		Title:     strings.TrimSpace(c.Title),
		Workspace: ws, Repo: c.Repo, Base: c.Base,
		Profile: task.Profile{Model: c.Model, PermissionMode: c.Mode, AfterPlan: c.AfterPlan,
			MaxTurns: c.MaxTurns, AppendSystemPrompt: c.SystemPrompt},
		IdleTimeout:     time.Duration(c.IdleTimeout),
		ApprovalTimeout: time.Duration(c.ApprovalTimeout),
	}
	if c.Budget != nil {
		p.Budget = task.Budget{MaxCostUSD: c.Budget.MaxCostUSD, MaxTurns: c.Budget.MaxTurns, MaxDuration: time.Duration(c.Budget.MaxDuration)}
	}
	prompt := task.Prompt{Text: c.Prompt, Attachments: c.Attachments}
	errs := []error{p.Validate(), task.ValidatePrompt(prompt)}
	if c.ID != "" {
		errs[0] = task.ValidateStart(c.ID, p)
	}
	if err := errors.Join(errs...); err != nil {
		return p, prompt, invalidInput(err)
	}
	return p.WithTitle(prompt), prompt, nil
}

// Accepted is the answer to a prompt: its turn and place in the queue.
type Accepted struct {
	TaskID     string `json:"task_id"`
	Turn       int    `json:"turn"`
	PromptUUID string `json:"prompt_uuid"`
	// Queued is the number of prompts ahead of this one, counting a running turn; a prompt
	// sent while a turn runs waits for its own turn.
	Queued int `json:"queued"`
}

func accepted(id string, a task.PromptAccepted) Accepted {
	return Accepted{TaskID: id, Turn: a.Turn, PromptUUID: a.PromptUUID, Queued: a.Queued}
}

// Created is the answer to POST /api/v1/tasks: the task, and its first prompt's place.
type Created struct {
	Task   Task     `json:"task"`
	Prompt Accepted `json:"prompt"`
}

// createUpdatePrefix makes the id of a creation's first prompt from its Idempotency-Key: the task
// remembers the prompt's answer under it, so a creation sent again is answered once.
const createUpdatePrefix = "api-create:"

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if err := checkIdempotencyKey(key); err != nil {
		s.writeError(w, r, err)
		return
	}
	var body CreateTask
	if err := decode(r, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, prompt, perr := body.params()
	if perr != nil {
		s.writeError(w, r, perr)
		return
	}
	prompt.By = actor(r)
	id := body.ID
	if id == "" {
		id = uuid.NewString()
	}
	ctx := r.Context()
	updateID := ""
	if key != "" {
		canon, err := json.Marshal(body)
		if err != nil {
			s.writeError(w, r, fromError(err))
			return
		}
		sum := sha256.Sum256(canon)
		k, fresh, err := store.ClaimIdempotencyKey(ctx, s.cfg.DB, key, sum[:], id)
		if err != nil {
			s.writeError(w, r, fromError(err))
			return
		}
		if !fresh && string(k.RequestSHA256) != string(sum[:]) {
			s.writeError(w, r, errorf(http.StatusUnprocessableEntity, CodeIdempotencyKeyReused,
				fmt.Sprintf("this Idempotency-Key was first used with another body (task %s); use a new key for a new task", k.TaskID)))
			return
		}
		id = k.TaskID
		if !fresh && k.Response != nil {
			var acc Accepted
			if err := json.Unmarshal(k.Response, &acc); err != nil {
				s.writeError(w, r, fromError(fmt.Errorf("reading the answer of idempotency key: %w", err)))
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			s.writeCreated(w, r, acc, p)
			return
		}
		updateID = createUpdatePrefix + key
	}
	var acc task.PromptAccepted
	if e := s.command(r, id, false, func(ctx context.Context) (err error) {
		acc, err = s.cfg.Tasks.Create(ctx, id, p, prompt, updateID)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	s.recordCreated(ctx, id, p, prompt, acc)
	out := accepted(id, acc)
	if key != "" {
		b, _ := json.Marshal(out)
		if err := store.CompleteIdempotencyKey(context.WithoutCancel(ctx), s.cfg.DB, key, b); err != nil {
			// The task exists; a retry with the same key finds it, and its prompt by its id.
			s.cfg.Logger.WarnContext(ctx, "recording an idempotency key's answer failed", "task_id", id, "error", err)
		}
	}
	s.writeCreated(w, r, out, p)
}

// recordCreated puts a task just created on the read side at once, idle with its first prompt
// queued, so that it is listed and shown (GET answers 200, not 404) before any worker has run it,
// or while none runs. The row is recorded as of the epoch: the task's own first record, made by
// its workflow, always replaces it, and it never replaces one. A prompt that went to a task
// that ran already (turn past 1) records nothing. A failure is logged: the task exists all the
// same, and its workflow records it.
func (s *Server) recordCreated(ctx context.Context, id string, p task.Params, prompt task.Prompt, acc task.PromptAccepted) {
	if acc.Turn != 1 {
		return
	}
	p = p.WithDefaults().WithTitle(prompt)
	st := task.State{Status: task.StatusIdle, Title: p.Title, Workspace: p.Workspace, Repo: p.Repo, Base: p.Base, Model: p.Profile.Model,
		PermissionMode: p.Profile.PermissionMode, Budget: p.Budget,
		Pending: []task.QueuedPrompt{{Turn: 1, PromptUUID: acc.PromptUUID, Prompt: prompt}}}
	b, err := json.Marshal(st)
	if err == nil {
		err = store.RecordTaskState(context.WithoutCancel(ctx), s.cfg.DB, id, st.Status, b, time.Unix(0, 0).UTC(), 0)
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "recording a created task's first state failed; its worker records it", "task_id", id, "error", err)
	}
}

// writeCreated answers a creation with the task as it now stands: as the read side shows it,
// or, before the task has recorded itself there, as p describes it.
func (s *Server) writeCreated(w http.ResponseWriter, r *http.Request, acc Accepted, p task.Params) {
	p = p.WithDefaults()
	t := Task{Summary: taskview.Summary{ID: acc.TaskID, Title: p.Title, Status: task.StatusIdle, Mode: p.Profile.PermissionMode,
		Model: p.Profile.Model, Workspace: p.Workspace, Repo: p.Repo, Base: p.Base}}
	if d, err := s.cfg.Reader.Show(r.Context(), acc.TaskID); err == nil {
		t.Summary = d.Summary
	} else {
		// The task was created; say so even if the read side has not recorded it yet.
		s.cfg.Logger.DebugContext(r.Context(), "reading a created task failed", "task_id", acc.TaskID, "error", err)
	}
	t.TemporalURL = s.temporalURL(acc.TaskID)
	w.Header().Set("Location", "/api/v1/tasks/"+pathEscape(acc.TaskID))
	writeJSON(w, http.StatusCreated, Created{Task: t, Prompt: acc})
}

// checkIdempotencyKey refuses a key that is too long or holds anything but printable ASCII.
func checkIdempotencyKey(key string) *taskerr.Error {
	if len(key) > MaxIdempotencyKeyBytes {
		return textProblem("header Idempotency-Key",
			fmt.Sprintf("is %d bytes; use at most %d (a uuid is best)", len(key), MaxIdempotencyKeyBytes))
	}
	if strings.IndexFunc(key, func(r rune) bool { return r < ' ' || r > '~' }) >= 0 {
		return textProblem("header Idempotency-Key", "holds characters other than printable ASCII; use a uuid")
	}
	return nil
}

// commandError is the answer for a command the task refused. Temporal answers a command to a
// task whose run has ended as if the task did not exist; when the read side knows the task,
// it has ended, and the answer says so.
func (s *Server) commandError(ctx context.Context, id string, err error) *taskerr.Error {
	e := fromError(err)
	if e.Code != CodeNotFound {
		return e
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	d, rerr := s.cfg.Reader.Show(rctx, id)
	if rerr != nil {
		return e
	}
	return errorf(http.StatusConflict, taskerr.CodeTaskClosed,
		fmt.Sprintf("task %s has ended (%s); it takes no more commands: create a new task", id, d.Status))
}

// taskID is the {id} of r's path, checked as task.ValidateID checks a new task's id.
func taskID(r *http.Request) (string, *taskerr.Error) {
	id := r.PathValue("id")
	if err := task.ValidateID(id); err != nil {
		var ie *task.InvalidError
		msg := err.Error()
		if errors.As(err, &ie) {
			msg = "the task id " + ie.Reason
		}
		return "", errorf(http.StatusBadRequest, CodeInvalidID, msg)
	}
	return id, nil
}

// PromptRequest is the body of POST /api/v1/tasks/{id}/prompts.
type PromptRequest struct {
	Text        string              `json:"text"`
	Attachments []string            `json:"attachments,omitempty"`
	Mode        task.PermissionMode `json:"mode,omitempty"`
	// RequestID makes the call idempotent: a prompt sent again with the same id is answered
	// once and queued once. The Idempotency-Key header does the same.
	RequestID string `json:"request_id,omitempty"`
}

func (s *Server) promptTask(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if e := checkIdempotencyKey(key); e != nil {
		s.writeError(w, r, e)
		return
	}
	var body PromptRequest
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	prompt := task.Prompt{Text: body.Text, Attachments: body.Attachments, Mode: body.Mode, By: actor(r)}
	if err := task.ValidatePrompt(prompt); err != nil {
		s.writeError(w, r, invalidInput(err))
		return
	}
	updateID := body.RequestID
	if updateID == "" && key != "" {
		updateID = "api-prompt:" + key
	}
	var acc task.PromptAccepted
	if e := s.command(r, id, true, func(ctx context.Context) (err error) {
		acc, err = s.cfg.Tasks.Prompt(ctx, id, prompt, updateID)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	writeJSON(w, http.StatusAccepted, accepted(id, acc))
}

// Control is the answer to interrupt, close and cancel.
type Control struct {
	TaskID string `json:"task_id"`
	// Interrupted, for interrupt, is false when no turn was running.
	Interrupted *bool `json:"interrupted,omitempty"`
	Turn        int   `json:"turn,omitempty"`
}

func (s *Server) interruptTask(w http.ResponseWriter, r *http.Request) {
	s.control(w, r, true, func(ctx context.Context, id string) (Control, error) {
		res, err := s.cfg.Tasks.InterruptBy(ctx, id, actor(r))
		return Control{TaskID: id, Interrupted: &res.Interrupted, Turn: res.Turn}, err
	})
}

func (s *Server) closeTask(w http.ResponseWriter, r *http.Request) {
	s.control(w, r, true, func(ctx context.Context, id string) (Control, error) {
		return Control{TaskID: id}, s.cfg.Tasks.Close(ctx, id)
	})
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	s.control(w, r, false, func(ctx context.Context, id string) (Control, error) {
		return Control{TaskID: id}, s.cfg.Tasks.CancelBy(ctx, id, actor(r))
	})
}

// control runs one of interrupt, close and cancel, which take no body (an empty JSON object
// is allowed); cancel needs no worker.
func (s *Server) control(w http.ResponseWriter, r *http.Request, needsWorker bool, do func(context.Context, string) (Control, error)) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	var none struct{}
	if e := decodeOptional(r, &none); e != nil {
		s.writeError(w, r, e)
		return
	}
	var out Control
	if e := s.command(r, id, needsWorker, func(ctx context.Context) (err error) {
		out, err = do(ctx, id)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	writeJSON(w, http.StatusAccepted, out)
}
