package claudecode

import (
	"context"
	"fmt"
)

// Handler answers the CLI's control requests.
//
// HandleControl runs in its own goroutine per request. It returns the success payload (marshalled to a
// JSON object; nil means {}) — a PermissionResult for can_use_tool, a HookOutput for hook_callback — or
// an error, which the CLI receives as an error answer (for can_use_tool that denies the tool). ctx is
// cancelled with cause ErrRequestCancelled when the CLI withdraws the request (control_cancel_request),
// and when the stream ends or the Client closes; the answer of a cancelled request is not written.
// HandleControl must return once ctx is done.
type Handler interface {
	HandleControl(ctx context.Context, req *ControlRequest) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *ControlRequest) (any, error)

// HandleControl calls f.
func (f HandlerFunc) HandleControl(ctx context.Context, req *ControlRequest) (any, error) {
	return f(ctx, req)
}

// NoHandlerMessage is the deny message of a can_use_tool request when no Handler is configured.
const NoHandlerMessage = "tool use denied: this session has no permission handler"

// defaultAnswer is what a Client without Handler answers.
func defaultAnswer(req *ControlRequest) (any, error) {
	switch req.Subtype {
	case RequestCanUseTool:
		return DenyTool(NoHandlerMessage, false), nil
	case RequestHookCallback:
		return HookOutput{}, nil
	}
	return nil, fmt.Errorf("unsupported control request %q", req.Subtype)
}

// handle answers one of the CLI's requests in a goroutine of its own.
func (c *Client) handle(req *ControlRequest) {
	if req.RequestID == "" {
		c.log.Warn("ignoring a control request without request_id", "subtype", req.Subtype)
		return
	}
	ctx, cancel := context.WithCancelCause(c.base)
	h := &handling{cancel: cancel}
	c.mu.Lock()
	if prev := c.handling[req.RequestID]; prev != nil {
		prev.cancel(ErrRequestCancelled) // a repeated id supersedes the earlier request
	}
	c.handling[req.RequestID] = h
	c.mu.Unlock()
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		defer func() {
			c.mu.Lock()
			if c.handling[req.RequestID] == h {
				delete(c.handling, req.RequestID)
			}
			c.mu.Unlock()
			cancel(nil)
		}()
		payload, err := c.answer(ctx, req)
		c.mu.Lock()
		withdrawn := ctx.Err() != nil || h.answered
		h.answered = true
		c.mu.Unlock()
		if withdrawn {
			c.log.Debug("not answering a withdrawn control request", "subtype", req.Subtype,
				"request_id", req.RequestID, "cause", context.Cause(ctx))
			return
		}
		var line []byte
		if err == nil {
			line, err = MarshalControlResponse(req.RequestID, payload)
		}
		if err != nil {
			c.log.Debug("answering control request with an error", "subtype", req.Subtype,
				"request_id", req.RequestID, "error", err)
			line = MarshalControlError(req.RequestID, err.Error())
		}
		if werr := c.writeLine(line); werr != nil {
			c.log.Warn("could not answer control request", "subtype", req.Subtype,
				"request_id", req.RequestID, "error", werr)
		}
	}()
}

// handling is a CLI request being answered. answered is set, under Client.mu, by whoever writes
// the answer (the handler goroutine or Answer), so that at most one answer is written.
type handling struct {
	cancel   context.CancelCauseFunc
	answered bool
}

// Answer writes payload (what a Handler would return: a PermissionResult, a HookOutput, …; nil
// means {}) as the answer to the CLI's request requestID, from outside the Handler, for a host
// that learns its decision elsewhere. A Handler still working on that request sees its context
// cancelled with cause ErrAnsweredElsewhere and its own answer is dropped; one that is writing its
// answer at that moment wins, and Answer returns ErrAlreadyAnswered. Past that, Answer does not
// know whether the CLI still waits: it writes, and the CLI ignores an answer to a request it has
// withdrawn (control_cancel_request).
func (c *Client) Answer(requestID string, payload any) error {
	line, err := MarshalControlResponse(requestID, payload)
	if err != nil {
		return fmt.Errorf("answering %s: %w", requestID, err)
	}
	c.mu.Lock()
	if h := c.handling[requestID]; h != nil {
		if h.answered {
			c.mu.Unlock()
			return fmt.Errorf("answering %s: %w", requestID, ErrAlreadyAnswered)
		}
		h.answered = true
		h.cancel(ErrAnsweredElsewhere)
	}
	c.mu.Unlock()
	if err := c.writeLine(line); err != nil {
		return fmt.Errorf("answering %s: %w", requestID, err)
	}
	return nil
}

// answer calls the Handler (or the default), turning a panic into an error answer.
func (c *Client) answer(ctx context.Context, req *ControlRequest) (payload any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("control request handler panicked", "subtype", req.Subtype, "panic", p)
			payload, err = nil, fmt.Errorf("handler failed on %s", req.Subtype)
		}
	}()
	if c.cfg.Handler == nil {
		return defaultAnswer(req)
	}
	return c.cfg.Handler.HandleControl(ctx, req)
}
