package claudecode

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// RequestError is the CLI's error answer to one of our control requests.
type RequestError struct {
	Subtype string // our request's subtype
	Message string // the CLI's error text
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("claude refused %s: %s", e.Subtype, e.Message)
}

// Request sends a control request of the given subtype with body's members (body must marshal to a
// JSON object, or be nil) and waits for its answer. It returns the success payload verbatim (nil when
// the CLI sent none), a *RequestError for an error answer, ErrStreamEnded (wrapped) when the CLI's
// output ends first, or the context's error when ctx ends or ClientConfig.RequestTimeout passes.
func (c *Client) Request(ctx context.Context, subtype string, body any) (json.RawMessage, error) {
	id := c.prefix + "-" + strconv.FormatUint(c.seq.Add(1), 10)
	line, err := MarshalControlRequest(id, subtype, body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()

	ch := make(chan result, 1)
	c.mu.Lock()
	switch {
	case c.closing:
		c.mu.Unlock()
		return nil, fmt.Errorf("%s request: %w", subtype, ErrClosed)
	case c.inputClosed:
		c.mu.Unlock()
		return nil, fmt.Errorf("%s request: %w", subtype, ErrInputClosed)
	}
	if c.ended {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s request: %w", subtype, ErrStreamEnded)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}

	if err := c.out.WriteLine(line); err != nil {
		forget()
		return nil, fmt.Errorf("%s request: %w", subtype, err)
	}
	c.log.Debug("sent control request", "subtype", subtype, "request_id", id)

	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s request: %w", subtype, r.err)
		}
		if r.resp.Subtype == SubtypeError {
			return nil, &RequestError{Subtype: subtype, Message: r.resp.Error}
		}
		return r.resp.Response, nil
	case <-ctx.Done():
		forget()
		return nil, fmt.Errorf("%s request: %w", subtype, context.Cause(ctx))
	}
}

// Initialize sends initialize (hooks, system prompt, …) and returns the CLI's description of the
// session. It may be sent more than once.
func (c *Client) Initialize(ctx context.Context, req InitializeRequest) (InitializeResponse, error) {
	payload, err := c.Request(ctx, RequestInitialize, req)
	if err != nil {
		return InitializeResponse{}, err
	}
	resp, err := ParseInitializeResponse(payload)
	if err != nil {
		return InitializeResponse{}, fmt.Errorf("initialize request: decoding answer: %w", err)
	}
	return resp, nil
}

// Interrupt stops the running turn: it ends with an error_during_execution result, and a pending
// can_use_tool is first withdrawn with control_cancel_request. The process then takes the next prompt.
func (c *Client) Interrupt(ctx context.Context) error {
	_, err := c.Request(ctx, RequestInterrupt, nil)
	return err
}

// SetPermissionMode switches the permission mode (default, acceptEdits, bypassPermissions, plan).
func (c *Client) SetPermissionMode(ctx context.Context, mode string) error {
	_, err := c.Request(ctx, RequestSetPermission, struct {
		Mode string `json:"mode"`
	}{mode})
	return err
}

// SetModel switches the model for the next requests; "" returns to the default model.
func (c *Client) SetModel(ctx context.Context, model string) error {
	body := struct {
		Model *string `json:"model"`
	}{}
	if model != "" {
		body.Model = &model
	}
	_, err := c.Request(ctx, RequestSetModel, body)
	return err
}

// ContextUsage is the answer to get_context_usage. The totals are decoded; Raw has the breakdown.
type ContextUsage struct {
	TotalTokens  int64             `json:"totalTokens"`
	MaxTokens    int64             `json:"maxTokens"`
	RawMaxTokens int64             `json:"rawMaxTokens"`
	Percentage   float64           `json:"percentage"`
	Model        string            `json:"model"`
	Categories   []ContextCategory `json:"categories"`
	// Raw is the payload verbatim.
	Raw json.RawMessage `json:"-"`
}

// ContextCategory is one row of the context usage breakdown.
type ContextCategory struct {
	Name   string `json:"name"`
	Tokens int64  `json:"tokens"`
}

// GetContextUsage asks how full the context window is.
func (c *Client) GetContextUsage(ctx context.Context) (ContextUsage, error) {
	payload, err := c.Request(ctx, RequestGetContextUsage, nil)
	if err != nil {
		return ContextUsage{}, err
	}
	var u ContextUsage
	if len(payload) > 0 {
		if err := tolerate(json.Unmarshal(payload, &u)); err != nil {
			return ContextUsage{}, fmt.Errorf("get_context_usage request: decoding answer: %w", err)
		}
	}
	u.Raw = payload
	return u, nil
}
