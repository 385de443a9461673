package offlinemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Rejection is a request the server refused because the real Messages API
// refuses it too. See Server.Invalid.
type Rejection struct {
	// Seq is the request's Seq; Class, Path and Model are the request's.
	Seq   int
	Class Class
	Path  string
	Model string
	// Status, Type and Message are what the server answered: 400
	// invalid_request_error, or 404 not_found_error for an unknown model.
	Status  int
	Type    string
	Message string
}

// String renders the rejection on one line, for test failures.
func (r Rejection) String() string {
	return fmt.Sprintf("request %d (%s %s, model %q): %d %s: %s", r.Seq, r.Class, r.Path, r.Model, r.Status, r.Type, r.Message)
}

// violation is why a request is invalid, as the API answers it.
type violation struct {
	status  int
	errType string
	msg     string
}

func invalid(format string, args ...any) *violation {
	return &violation{status: http.StatusBadRequest, errType: "invalid_request_error", msg: fmt.Sprintf(format, args...)}
}

// vRequest is the part of a request body validation reads. Pointers tell a
// missing field from a zero one.
type vRequest struct {
	Model     *json.RawMessage `json:"model"`
	MaxTokens *json.RawMessage `json:"max_tokens"`
	System    json.RawMessage  `json:"system"`
	Messages  *json.RawMessage `json:"messages"`
}

type vMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

type vBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// validate checks a /v1/messages (or, with countTokens, a count_tokens)
// request body the way the Messages API does. lookup finds a known model.
// It returns nil for a valid request.
func validate(body []byte, countTokens bool, lookup func(string) (Model, bool)) *violation {
	var req vRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return invalid("request body is not a JSON object")
	}

	// Fields, as the API's schema checks them.
	var model string
	if req.Model == nil || isNull(*req.Model) {
		return invalid("model: Field required")
	}
	if json.Unmarshal(*req.Model, &model) != nil {
		return invalid("model: Input should be a valid string")
	}
	var maxTokens int
	if !countTokens {
		if req.MaxTokens == nil || isNull(*req.MaxTokens) {
			return invalid("max_tokens: Field required")
		}
		if json.Unmarshal(*req.MaxTokens, &maxTokens) != nil {
			return invalid("max_tokens: Input should be a valid integer")
		}
		if maxTokens < 1 {
			return invalid("max_tokens: Input should be greater than or equal to 1")
		}
	}
	if req.Messages == nil || isNull(*req.Messages) {
		return invalid("messages: Field required")
	}
	var msgs []vMessage
	if json.Unmarshal(*req.Messages, &msgs) != nil {
		return invalid("messages: Input should be a valid list")
	}
	if v := validateSystem(req.System); v != nil {
		return v
	}
	blocks := make([][]vBlock, len(msgs))
	for i, m := range msgs {
		if m.Role == nil {
			return invalid("messages.%d.role: Field required", i)
		}
		switch *m.Role {
		case "user", "assistant", "system":
		default:
			return invalid("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		bs, v := messageBlocks(m.Content, fmt.Sprintf("messages.%d", i))
		if v != nil {
			return v
		}
		blocks[i] = bs
	}

	// The model.
	known, ok := lookup(model)
	if !ok {
		return &violation{status: http.StatusNotFound, errType: "not_found_error", msg: "model: " + model}
	}
	if !countTokens && known.MaxOutputTokens > 0 && maxTokens > known.MaxOutputTokens {
		return invalid("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s",
			maxTokens, known.MaxOutputTokens, model)
	}

	// The conversation.
	if len(msgs) == 0 {
		return invalid("messages: at least one message is required")
	}
	if *msgs[0].Role != "user" {
		return invalid(`messages: first message must use the "user" role`)
	}
	return validateConversation(msgs, blocks)
}

// validateSystem checks the system prompt: a string, or text blocks that are
// not empty.
func validateSystem(raw json.RawMessage) *violation {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil
	}
	var blocks []vBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return invalid("system: Input should be a valid string or a list of text blocks")
	}
	for i, b := range blocks {
		if b.Type != "text" {
			return invalid("system.%d.type: Input should be 'text'", i)
		}
		if v := checkText(b.Text, fmt.Sprintf("system.%d", i)); v != nil {
			return v
		}
	}
	return nil
}

// messageBlocks parses a message content (a string or a list of blocks) and
// checks each block's shape. A string is one text block.
func messageBlocks(raw json.RawMessage, at string) ([]vBlock, *violation) {
	if len(raw) == 0 || isNull(raw) {
		return nil, invalid("%s.content: Field required", at)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if v := checkText(&s, at+".content"); v != nil {
			return nil, v
		}
		return []vBlock{{Type: "text", Text: &s}}, nil
	}
	var blocks []vBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, invalid("%s.content: Input should be a valid string or a list of content blocks", at)
	}
	for k, b := range blocks {
		where := fmt.Sprintf("%s.content.%d", at, k)
		switch b.Type {
		case "":
			return nil, invalid("%s.type: Field required", where)
		case "text":
			if v := checkText(b.Text, where); v != nil {
				return nil, v
			}
		case "tool_use":
			if b.ID == "" {
				return nil, invalid("%s.id: Field required", where)
			}
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, invalid("%s.tool_use_id: Field required", where)
			}
			if v := checkNestedText(b.Content, where); v != nil {
				return nil, v
			}
		}
	}
	return blocks, nil
}

// checkNestedText checks the text blocks of a tool_result's content.
func checkNestedText(raw json.RawMessage, at string) *violation {
	var nested []vBlock
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &nested) != nil {
		return nil
	}
	for j, n := range nested {
		if n.Type == "text" {
			if v := checkText(n.Text, fmt.Sprintf("%s.content.%d", at, j)); v != nil {
				return v
			}
		}
	}
	return nil
}

// checkText refuses a missing, empty or blank text.
func checkText(text *string, at string) *violation {
	switch {
	case text == nil:
		return invalid("%s.text: Field required", at)
	case *text == "":
		return invalid("%s: text content blocks must be non-empty", at)
	case strings.TrimSpace(*text) == "":
		return invalid("%s: text content blocks must contain non-whitespace text", at)
	}
	return nil
}

// validateConversation checks what the API checks across messages: user
// and assistant turns alternate (messages with role "system" stand outside
// the alternation), only a final assistant message may be empty, every
// tool_use is answered by a tool_result in the very next message, which is a
// user message, every tool_result answers a tool_use of the message just
// before it, and tool_use ids are unique.
func validateConversation(msgs []vMessage, blocks [][]vBlock) *violation {
	lastTurn := ""
	seenIDs := map[string]bool{}
	for i, m := range msgs {
		role := *m.Role
		if len(blocks[i]) == 0 && (role != "assistant" || i != len(msgs)-1) {
			return invalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		if role != "system" {
			if role == lastTurn {
				return invalid(`messages.%d: roles must alternate between "user" and "assistant", but found multiple %q roles in a row`, i, role)
			}
			lastTurn = role
		}

		var uses []string
		for k, b := range blocks[i] {
			switch b.Type {
			case "tool_use":
				if role != "assistant" {
					return invalid("messages.%d.content.%d: `tool_use` blocks are only allowed in assistant messages", i, k)
				}
				if seenIDs[b.ID] {
					return invalid("messages.%d.content.%d: `tool_use` ids must be unique", i, k)
				}
				seenIDs[b.ID] = true
				uses = append(uses, b.ID)
			case "tool_result":
				if role != "user" {
					return invalid("messages.%d.content.%d: `tool_result` blocks are only allowed in user messages", i, k)
				}
				if !answers(msgs, blocks, i, b.ToolUseID) {
					return invalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
						"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, k, b.ToolUseID)
				}
			}
		}
		if missing := unanswered(msgs, blocks, i, uses); len(missing) > 0 {
			return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
				"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
	}
	return nil
}

// answers reports whether message i-1 is an assistant message with a
// tool_use of id.
func answers(msgs []vMessage, blocks [][]vBlock, i int, id string) bool {
	if i == 0 || *msgs[i-1].Role != "assistant" {
		return false
	}
	for _, b := range blocks[i-1] {
		if b.Type == "tool_use" && b.ID == id {
			return true
		}
	}
	return false
}

// unanswered returns the ids of uses (tool_use ids of message i) that the
// next message, a user message, does not answer.
func unanswered(msgs []vMessage, blocks [][]vBlock, i int, uses []string) []string {
	if len(uses) == 0 {
		return nil
	}
	got := map[string]bool{}
	if i+1 < len(msgs) && *msgs[i+1].Role == "user" {
		for _, b := range blocks[i+1] {
			if b.Type == "tool_result" {
				got[b.ToolUseID] = true
			}
		}
	}
	var missing []string
	for _, id := range uses {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
