package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/drover-run/drover/claudecode"
)

// recorder keeps what went through one process's stdio.
type recorder struct {
	mu     sync.Mutex
	stdout [][]byte
	stdin  [][]byte // nil entries are reserved for requests still waiting for their id
	initAt time.Time
	// cliIDs are the ids of the CLI's own control requests; a control_response with any other id
	// answers one of ours.
	cliIDs map[string]bool
	ourID  string // id of the last answer to one of our requests
}

func newRecorder() *recorder { return &recorder{cliIDs: map[string]bool{}} }

// tapHead is what tap needs of a line.
type tapHead struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Response  struct {
		RequestID string `json:"request_id"`
	} `json:"response"`
}

// tap is the client's Tap: it runs on the reader goroutine, before the line is dispatched.
func (r *recorder) tap(line []byte) {
	cp := bytes.Clone(line)
	var head tapHead
	_ = json.Unmarshal(cp, &head) // a malformed line is still recorded
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stdout = append(r.stdout, cp)
	switch head.Type {
	case claudecode.TypeSystem:
		if head.Subtype == claudecode.SubtypeInit && r.initAt.IsZero() {
			r.initAt = time.Now()
		}
	case claudecode.TypeControlRequest:
		r.cliIDs[head.RequestID] = true
	case claudecode.TypeControlResponse:
		if id := head.Response.RequestID; !r.cliIDs[id] {
			r.ourID = id
		}
	}
}

func (r *recorder) firstInit() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initAt
}

func (r *recorder) stdoutLines() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stdout)
}

func (r *recorder) stdinLines() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]byte, 0, len(r.stdin))
	for _, l := range r.stdin {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

// wrote records one stdin line.
func (r *recorder) wrote(line []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stdin = append(r.stdin, line)
}

// reserve keeps the place of a stdin line whose content is known later; it also forgets the id
// of any earlier answer.
func (r *recorder) reserve() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ourID = ""
	r.stdin = append(r.stdin, nil)
	return len(r.stdin) - 1
}

// fill completes a reserved stdin line.
func (r *recorder) fill(slot int, line []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stdin[slot] = line
}

// takeOurID returns the id of the last answer to one of our requests.
func (r *recorder) takeOurID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.ourID
	r.ourID = ""
	return id
}

// recordingHandler answers the CLI's control requests with next (or claudecode's defaults) and
// records the line the client writes for the answer.
type recordingHandler struct {
	next claudecode.Handler
	rec  *recorder
}

func (h *recordingHandler) HandleControl(ctx context.Context, req *claudecode.ControlRequest) (any, error) {
	var payload any
	var err error
	if h.next != nil {
		payload, err = h.next.HandleControl(ctx, req)
	} else {
		payload, err = defaultAnswer(req)
	}
	if ctx.Err() != nil {
		return payload, err // withdrawn: the client writes nothing
	}
	// The same construction as the client's, so the record is byte for byte what it writes.
	var line []byte
	merr := err
	if merr == nil {
		line, merr = claudecode.MarshalControlResponse(req.RequestID, payload)
	}
	if merr != nil {
		line = claudecode.MarshalControlError(req.RequestID, merr.Error())
	}
	h.rec.wrote(line)
	return payload, err
}

// defaultAnswer mirrors what a claudecode.Client without Handler answers.
func defaultAnswer(req *claudecode.ControlRequest) (any, error) {
	switch req.Subtype {
	case claudecode.RequestCanUseTool:
		return claudecode.DenyTool(claudecode.NoHandlerMessage, false), nil
	case claudecode.RequestHookCallback:
		return claudecode.HookOutput{}, nil
	}
	return nil, fmt.Errorf("unsupported control request %q", req.Subtype)
}
