package offlinemodel

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Request is one recorded HTTP request, parsed. Fields that do not apply
// (a count_tokens request has no Stream, a 404 has no Model) are zero.
type Request struct {
	// Seq numbers requests from 1 in order of arrival.
	Seq int
	// Method and Path of the request; Path has no query (the CLI adds
	// ?beta=true).
	Method string
	Path   string
	// Class tells which conversation the request belongs to.
	Class Class
	// Account is the client the request's credential names (never the
	// credential itself).
	Account Account
	// Received is when the request arrived, by Config.Clock.
	Received time.Time
	// Header holds the request headers minus the API key, authorization and
	// any other secret-bearing header.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Invalid is why the server refused the request as the API would (see
	// Rejection), or "" for a request it answered.
	Invalid string

	// Model, MaxTokens and Stream as sent.
	Model     string
	MaxTokens int
	Stream    bool
	// System is the system prompt flattened to text: a string as is, text
	// blocks joined with newlines.
	System string
	// Messages are the conversation as sent, in order.
	Messages []Message
	// Tools are the names of the declared tools, in order.
	Tools []string
	// StructuredOutput is true when output_config.format asks for a JSON
	// answer; Schema is that JSON schema, if any.
	StructuredOutput bool
	Schema           json.RawMessage
	// Thinking and ContextManagement are the raw fields, nil when absent.
	Thinking          json.RawMessage
	ContextManagement json.RawMessage
}

// Message is one message of a request: a role ("user", "assistant", and —
// the pinned CLI sends them — "system") and its content blocks as raw JSON.
// A plain string content is kept as one text block.
type Message struct {
	Role    string
	Content []json.RawMessage
}

// ToolResult is a tool_result block the client sent back.
type ToolResult struct {
	ToolUseID string
	// Content is the result's text: a string content as is, text blocks
	// joined with newlines.
	Content string
	IsError bool
}

// Text returns the text of the message's text blocks, joined with newlines.
func (m Message) Text() string {
	var parts []string
	for _, raw := range m.Content {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &b) == nil && b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// BlockTypes returns the type of each content block, in order.
func (m Message) BlockTypes() []string {
	types := make([]string, 0, len(m.Content))
	for _, raw := range m.Content {
		var b struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &b)
		types = append(types, b.Type)
	}
	return types
}

// ToolResults returns the message's tool_result blocks.
func (m Message) ToolResults() []ToolResult {
	var out []ToolResult
	for _, raw := range m.Content {
		var b struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(raw, &b) != nil || b.Type != "tool_result" {
			continue
		}
		out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: flattenText(b.Content), IsError: b.IsError})
	}
	return out
}

// LastUserText returns the text of the last message with role "user", or "".
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// PromptCount returns how many text blocks of the request's user messages
// hold exactly prompt (surrounding white space aside). The CLI sends each
// prompt as a text block of its own, and merges consecutive user turns into
// one message, so a prompt that reached the conversation twice counts 2.
func (r Request) PromptCount(prompt string) int {
	want := strings.TrimSpace(prompt)
	n := 0
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, raw := range m.Content {
			var b struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(raw, &b) == nil && b.Type == "text" && strings.TrimSpace(b.Text) == want {
				n++
			}
		}
	}
	return n
}

// ToolResults returns the tool_result blocks of all messages, in order.
func (r Request) ToolResults() []ToolResult {
	var out []ToolResult
	for _, m := range r.Messages {
		out = append(out, m.ToolResults()...)
	}
	return out
}

// wireRequest is the part of a Messages API request body the fake reads.
type wireRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Thinking          json.RawMessage `json:"thinking"`
	ContextManagement json.RawMessage `json:"context_management"`
	OutputConfig      struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// parseBody fills the parsed fields of r from a JSON request body. It never
// fails on odd shapes: what cannot be read stays zero.
func (r *Request) parseBody(body []byte) error {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	r.Model = w.Model
	r.MaxTokens = w.MaxTokens
	r.Stream = w.Stream
	r.System = flattenText(w.System)
	for _, m := range w.Messages {
		r.Messages = append(r.Messages, Message{Role: m.Role, Content: contentBlocks(m.Content)})
	}
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	r.Thinking = nullToNil(w.Thinking)
	r.ContextManagement = nullToNil(w.ContextManagement)
	if f := w.OutputConfig.Format; f != nil {
		r.StructuredOutput = true
		r.Schema = nullToNil(f.Schema)
	}
	return nil
}

// contentBlocks turns a message content (a string or an array of blocks)
// into raw blocks.
func contentBlocks(raw json.RawMessage) []json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}
	}
	var blocks []json.RawMessage
	_ = json.Unmarshal(raw, &blocks)
	return blocks
}

// flattenText turns a string or an array of blocks into text: the string as
// is, the text of text blocks joined with newlines.
func flattenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// safeHeader returns a copy of h without headers that carry secrets.
func safeHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if secretHeader(k) {
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

// secretHeader reports whether a header may carry a credential.
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"key", "auth", "token", "cookie", "secret", "credential", "session-key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
