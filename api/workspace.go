package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/workspace"
)

// Bounds of a diff's page: the one place they are set.
const (
	// DefaultDiffPageBytes and MaxDiffPageBytes bound one page of a patch (?limit=).
	DefaultDiffPageBytes = 256 << 10
	MaxDiffPageBytes     = 4 << 20
)

// FileChange is one file a diff changes.
type FileChange struct {
	Path string `json:"path"`
	// Added and Deleted count lines; both are 0 for a binary file.
	Added   int  `json:"added"`
	Deleted int  `json:"deleted"`
	Binary  bool `json:"binary"`
}

// TaskDiff is the answer of GET /api/v1/tasks/{id}/diff: what the task's work changed, whole (base
// to its newest checkpoint) or in one turn (the turn before's checkpoint, or the base, to the
// turn's), and one page of the patch.
type TaskDiff struct {
	TaskID string `json:"task_id"`
	// Turn is the turn shown alone; 0 means the whole task.
	Turn int `json:"turn,omitempty"`
	// FromTurn and ToTurn are the checkpoints compared (0: the base); From and To their commits.
	FromTurn int    `json:"from_turn"`
	ToTurn   int    `json:"to_turn"`
	From     string `json:"from"`
	To       string `json:"to"`
	// Turns lists the turns that have a checkpoint.
	Turns []int        `json:"turns"`
	Files []FileChange `json:"files"`
	// File, when asked for, is the one file the patch shows.
	File string `json:"file,omitempty"`
	// Patch is the page of the unified diff from byte Offset: whole lines, binary files named
	// and not shown. Empty with stat=1.
	Patch  string `json:"patch"`
	Offset int    `json:"offset"`
	// NextOffset is where the next page starts; 0 when this page ends the patch.
	NextOffset int `json:"next_offset,omitempty"`
	// PatchBytes is the size of the whole patch.
	PatchBytes int `json:"patch_bytes"`
}

// diffQuery is what a diff request asks for.
type diffQuery struct {
	turn          int
	stat          bool
	file          string
	offset, limit int
}

func parseDiffQuery(r *http.Request) (diffQuery, *taskerr.Error) {
	q := r.URL.Query()
	dq := diffQuery{file: q.Get("file"), limit: DefaultDiffPageBytes}
	ints := []struct {
		name string
		to   *int
		min  int
	}{{"turn", &dq.turn, 1}, {"offset", &dq.offset, 0}, {"limit", &dq.limit, 1}}
	for _, p := range ints {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < p.min {
			return dq, errorf(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("%s is a whole number of at least %d, not %s", p.name, p.min, strconv.Quote(v)))
		}
		*p.to = n
	}
	dq.limit = min(dq.limit, MaxDiffPageBytes)
	if v := q.Get("stat"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return dq, errorf(http.StatusBadRequest, CodeInvalidInput, "stat is 1, true, 0 or false, not "+strconv.Quote(v))
		}
		dq.stat = b
	}
	return dq, nil
}

func (s *Server) taskDiff(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	dq, e := parseDiffQuery(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	d, err := s.diff(r.Context(), id, dq)
	if err != nil {
		s.writeError(w, r, s.workspaceError(r.Context(), id, err))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// diff reads the task's checkpoints from the remote and compares them as dq asks.
func (s *Server) diff(ctx context.Context, id string, dq diffQuery) (TaskDiff, error) {
	m := s.cfg.Workspaces
	if m == nil {
		return TaskDiff{}, errNoRemote
	}
	wd, err := m.ReadTaskDiff(ctx, id, dq.turn, dq.stat || dq.file != "", func(ctx context.Context, turns []int) ([]int, error) {
		return store.CommittedTurns(ctx, s.cfg.DB, id, turns)
	})
	out := TaskDiff{TaskID: id, Turn: dq.turn, Turns: wd.Turns, FromTurn: wd.FromTurn, ToTurn: wd.ToTurn,
		File: dq.file, Offset: dq.offset, Files: []FileChange{}}
	if err != nil {
		return out, err
	}
	out.From, out.To = wd.From, wd.To
	for _, f := range wd.Files {
		out.Files = append(out.Files, FileChange{Path: f.Path, Added: f.Added, Deleted: f.Deleted, Binary: f.Binary})
	}
	patch := wd.Patch
	if dq.file != "" && !dq.stat {
		if patch, err = m.Patch(ctx, m.Stored(id), out.FromTurn, out.ToTurn, dq.file); err != nil {
			return out, err
		}
	}
	out.PatchBytes = len(patch)
	out.Patch, out.NextOffset = page(patch, dq.offset, dq.limit)
	return out, nil
}

// page cuts patch at offset into a page of at most limit bytes that ends at a line's end (a line
// longer than limit is its own page, cut), and returns it and the next page's offset (0: none).
func page(patch string, offset, limit int) (string, int) {
	if offset >= len(patch) {
		return "", 0
	}
	end := offset + limit
	if end >= len(patch) {
		return patch[offset:], 0
	}
	if nl := strings.LastIndexByte(patch[offset:end], '\n'); nl >= 0 {
		end = offset + nl + 1
	}
	return patch[offset:end], end
}

// errNoRemote: the server was started without a workspace remote.
var errNoRemote = errors.New("this server reads no workspace remote")

// workspaceError names a failure to read a task's workspace; a task the remote knows nothing
// of is not_found when no task of that id exists at all.
func (s *Server) workspaceError(ctx context.Context, id string, err error) *taskerr.Error {
	if errors.Is(err, errNoRemote) {
		return errorf(http.StatusServiceUnavailable, taskerr.CodeUnavailable, err.Error())
	}
	if errors.Is(err, workspace.ErrNotManaged) {
		if _, serr := s.cfg.Reader.Show(ctx, id); serr != nil {
			return fromError(serr)
		}
	}
	return fromError(err)
}

// PublishRequest is the body of POST /api/v1/tasks/{id}/publish.
type PublishRequest struct {
	// Remote is a git URL or path the server can push to; Branch the branch to push to.
	Remote string `json:"remote"`
	Branch string `json:"branch"`
	// Force replaces the branch's commits when they are not in the task's work. Without it
	// such a branch is refused (branch_not_ours), unless it is the task's own (drover/<id>).
	Force bool `json:"force,omitempty"`
}

// Published is the answer of a publish.
type Published struct {
	TaskID string `json:"task_id"`
	Remote string `json:"remote"`
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	// Turn is the turn whose checkpoint was pushed (0: the base).
	Turn int `json:"turn"`
}

func (s *Server) publishTask(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	var body PublishRequest
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	if body.Remote == "" || body.Branch == "" {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, "remote and branch are required"))
		return
	}
	p, err := s.publish(r.Context(), id, body)
	if err != nil {
		s.writeError(w, r, s.workspaceError(r.Context(), id, err))
		return
	}
	writeJSON(w, http.StatusOK, Published{TaskID: id, Remote: body.Remote, Ref: p.Ref, Commit: p.Commit, Turn: p.Turn})
}

func (s *Server) publish(ctx context.Context, id string, body PublishRequest) (workspace.Published, error) {
	m := s.cfg.Workspaces
	if m == nil {
		return workspace.Published{}, errNoRemote
	}
	t := m.Stored(id)
	if err := m.Fetch(ctx, t); err != nil {
		return workspace.Published{}, err
	}
	return m.Publish(ctx, t, body.Remote, body.Branch, body.Force)
}

// RewindRequest is the body of POST /api/v1/tasks/{id}/rewind.
type RewindRequest struct {
	// Turn is the turn whose end the task goes back to; 0 is its start.
	Turn *int `json:"turn"`
}

// Rewound is the answer of a rewind.
type Rewound struct {
	TaskID string `json:"task_id"`
	task.Rewound
}

func (s *Server) rewindTask(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	var body RewindRequest
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	if body.Turn == nil || *body.Turn < 0 {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, "turn is required: the turn whose end the task goes back to (0: its start)"))
		return
	}
	var out task.Rewound
	if e := s.command(r, id, true, func(ctx context.Context) (err error) {
		out, err = s.cfg.Tasks.Rewind(ctx, id, *body.Turn)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, Rewound{TaskID: id, Rewound: out})
}

// ForkRequest is the body of POST /api/v1/tasks/{id}/fork.
type ForkRequest struct {
	// Turn is the turn whose end the new task starts from; 0 is the task's start.
	Turn *int `json:"turn"`
	// ID names the new task; empty means a new uuid.
	ID string `json:"id,omitempty"`
	// Prompt, when given, is the new task's first prompt; without one it waits for a prompt.
	Prompt string `json:"prompt,omitempty"`
}

// Forked is the answer of a fork.
type Forked struct {
	TaskID     string `json:"task_id"`
	ForkedFrom string `json:"forked_from"`
	AtTurn     int    `json:"at_turn"`
	// Prompt is the first prompt's acceptance, when one was given.
	Prompt *Accepted `json:"prompt,omitempty"`
}

func (s *Server) forkTask(w http.ResponseWriter, r *http.Request) {
	src, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	var body ForkRequest
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	if body.Turn == nil || *body.Turn < 0 {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, "turn is required: the turn whose end the new task starts from (0: the task's start)"))
		return
	}
	dst := body.ID
	if dst == "" {
		dst = uuid.NewString()
	}
	prompt := task.Prompt{Text: body.Prompt}
	if body.Prompt != "" {
		if err := task.ValidatePrompt(prompt); err != nil {
			s.writeError(w, r, invalidInput(err))
			return
		}
	}
	var acc task.PromptAccepted
	if e := s.command(r, src, true, func(ctx context.Context) (err error) {
		acc, err = s.cfg.Tasks.Fork(ctx, src, dst, *body.Turn, prompt)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	out := Forked{TaskID: dst, ForkedFrom: src, AtTurn: *body.Turn}
	if body.Prompt != "" {
		a := accepted(dst, acc)
		out.Prompt = &a
	}
	writeJSON(w, http.StatusCreated, out)
}
