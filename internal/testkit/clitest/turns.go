package clitest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/drover-run/drover/claudecode"
)

// Send writes a prompt to the CLI and records the line. It fails the test on error, so call it from
// the test's goroutine.
func (h *Harness) Send(ctx context.Context, p claudecode.Prompt) {
	h.tb.Helper()
	r := h.current()
	line, err := claudecode.MarshalPrompt(p)
	if err != nil {
		h.tb.Fatalf("marshalling prompt: %v", err)
	}
	r.rec.wrote(line)
	if err := r.proc.Client().SendUser(ctx, p); err != nil {
		h.tb.Fatalf("sending prompt: %v", err)
	}
}

// RunTurn sends a text prompt and returns the messages of the turn, up to and including its result.
func (h *Harness) RunTurn(ctx context.Context, prompt string) []claudecode.Message {
	h.tb.Helper()
	return h.Turn(ctx, claudecode.Prompt{Text: prompt})
}

// Turn sends p and returns the messages of the turn, up to and including its result.
func (h *Harness) Turn(ctx context.Context, p claudecode.Prompt) []claudecode.Message {
	h.tb.Helper()
	h.Send(ctx, p)
	return h.UntilResult(ctx)
}

// UntilResult reads messages up to and including the next result. It fails the test if the output
// ends (or ctx does) first.
func (h *Harness) UntilResult(ctx context.Context) []claudecode.Message {
	h.tb.Helper()
	msgs, err := h.ReadUntil(ctx, func(m claudecode.Message) bool {
		_, ok := m.(*claudecode.ResultMessage)
		return ok
	})
	if err != nil {
		h.tb.Fatalf("waiting for a result: %v\n%s", err, h.Dump())
	}
	return msgs
}

// ReadUntil reads messages until one satisfies match and returns them all, that one last. When the
// output ends first it returns what it read and the end error: io.EOF for a clean exit, or the
// process's typed error (*claudecode.ExitError, *claudecode.ResumeRejectedError, …).
func (h *Harness) ReadUntil(ctx context.Context, match func(claudecode.Message) bool) ([]claudecode.Message, error) {
	p := h.Process()
	var msgs []claudecode.Message
	for {
		m, err := p.Recv(ctx)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
		if match(m) {
			return msgs, nil
		}
	}
}

// Initialize sends initialize and records the line. Safe from any goroutine.
func (h *Harness) Initialize(ctx context.Context, req claudecode.InitializeRequest) (claudecode.InitializeResponse, error) {
	var resp claudecode.InitializeResponse
	err := h.request(claudecode.RequestInitialize, req, func(c *claudecode.Client) error {
		var err error
		resp, err = c.Initialize(ctx, req)
		return err
	})
	return resp, err
}

// Interrupt sends interrupt and records the line. Safe from any goroutine.
func (h *Harness) Interrupt(ctx context.Context) error {
	return h.request(claudecode.RequestInterrupt, nil, func(c *claudecode.Client) error {
		return c.Interrupt(ctx)
	})
}

// SetPermissionMode sends set_permission_mode and records the line. Safe from any goroutine.
func (h *Harness) SetPermissionMode(ctx context.Context, mode string) error {
	return h.request(claudecode.RequestSetPermission, map[string]string{"mode": mode}, func(c *claudecode.Client) error {
		return c.SetPermissionMode(ctx, mode)
	})
}

// Answer answers one of the CLI's control requests through claudecode.Client.Answer, outside the
// Handler, and records the line it writes.
func (h *Harness) Answer(requestID string, payload any) error {
	r := h.current()
	line, err := claudecode.MarshalControlResponse(requestID, payload)
	if err != nil {
		return err
	}
	if err := r.proc.Client().Answer(requestID, payload); err != nil {
		return err
	}
	r.rec.wrote(line)
	return nil
}

// request runs one of our control requests through do and records its line in the place it was
// written. The client chooses the request id; it is learned from the CLI's answer, so requests go
// one at a time. An unanswered request is recorded with request_id "unanswered".
func (h *Harness) request(subtype string, body any, do func(*claudecode.Client) error) error {
	h.reqMu.Lock()
	defer h.reqMu.Unlock()
	r := h.current()
	slot := r.rec.reserve()
	err := do(r.proc.Client())
	id := r.rec.takeOurID()
	if id == "" {
		id = "unanswered"
	}
	line, merr := claudecode.MarshalControlRequest(id, subtype, body)
	if merr != nil {
		return fmt.Errorf("recording %s request: %w", subtype, merr)
	}
	r.rec.fill(slot, line)
	return err
}

// Stdout returns the current process's stdout lines so far, verbatim.
func (h *Harness) Stdout() [][]byte { return h.current().rec.stdoutLines() }

// Stdin returns the lines written to the current process's stdin so far.
func (h *Harness) Stdin() [][]byte { return h.current().rec.stdinLines() }

// Stderr returns the last lines of the current process's stderr.
func (h *Harness) Stderr() []string { return h.Process().Stderr() }

// Dump renders the current process's output so far (long lines cut) and its stderr, for failure
// messages.
func (h *Harness) Dump() string {
	var b strings.Builder
	b.WriteString("stdout:\n")
	for _, l := range h.Stdout() {
		s := string(l)
		if len(s) > 800 {
			s = s[:800] + "…"
		}
		b.WriteString(s)
		b.WriteByte('\n')
	}
	b.WriteString("stderr:\n")
	for _, l := range h.Stderr() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Object decodes a raw JSON object into a map, for assertions on fields the wire types do not
// model. It returns nil when raw is not an object.
func Object(raw []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
