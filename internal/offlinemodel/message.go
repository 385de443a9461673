package offlinemodel

import (
	"encoding/json"
	"fmt"
)

// servedBlock is a Block made ready to send: ids and signatures generated,
// tool input marshalled.
type servedBlock struct {
	Block
	input json.RawMessage
}

// serveBlocks resolves the blocks of a Response for one answer.
func serveBlocks(blocks []Block) ([]servedBlock, error) {
	out := make([]servedBlock, 0, len(blocks))
	for i, b := range blocks {
		sb := servedBlock{Block: b}
		switch b.Type {
		case "text":
		case "thinking":
			if sb.Signature == "" {
				sb.Signature = newSignature()
			}
		case "tool_use":
			if sb.Name == "" {
				return nil, fmt.Errorf("block %d: tool_use without a name", i)
			}
			if sb.ID == "" {
				sb.ID = newID("toolu_")
			}
			in := b.Input
			if in == nil {
				in = map[string]any{}
			}
			raw, err := json.Marshal(in)
			if err != nil {
				return nil, fmt.Errorf("block %d: marshalling %s input: %w", i, b.Name, err)
			}
			if len(raw) == 0 || raw[0] != '{' {
				return nil, fmt.Errorf("block %d: %s input is not a JSON object", i, b.Name)
			}
			sb.input = raw
		default:
			return nil, fmt.Errorf("block %d: unknown block type %q", i, b.Type)
		}
		out = append(out, sb)
	}
	return out, nil
}

// full returns the complete JSON form of the block, as in a non-streaming
// message.
func (b servedBlock) full() map[string]any {
	switch b.Type {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.Signature}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": b.input}
	default:
		return map[string]any{"type": "text", "text": b.Text}
	}
}

// start returns the content_block of a content_block_start event: the block
// with its streamed fields empty.
func (b servedBlock) start() map[string]any {
	switch b.Type {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
	default:
		return map[string]any{"type": "text", "text": ""}
	}
}

// deltas returns the delta objects of the block's content_block_delta
// events: text and thinking split into several pieces, a thinking block's
// signature last, tool input as chunks of its JSON.
func (b servedBlock) deltas() []map[string]any {
	var out []map[string]any
	switch b.Type {
	case "thinking":
		for _, c := range chunks(b.Thinking, textChunk) {
			out = append(out, map[string]any{"type": "thinking_delta", "thinking": c})
		}
		out = append(out, map[string]any{"type": "signature_delta", "signature": b.Signature})
	case "tool_use":
		// The API opens with an empty partial_json.
		out = append(out, map[string]any{"type": "input_json_delta", "partial_json": ""})
		for _, c := range chunks(string(b.input), jsonChunk) {
			out = append(out, map[string]any{"type": "input_json_delta", "partial_json": c})
		}
	default:
		for _, c := range chunks(b.Text, textChunk) {
			out = append(out, map[string]any{"type": "text_delta", "text": c})
		}
	}
	return out
}

// Delta sizes, in runes.
const (
	textChunk = 12
	jsonChunk = 24
)

// chunks splits s into pieces of at most n runes; an empty s gives one
// empty piece.
func chunks(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return []string{""}
	}
	var out []string
	for len(runes) > 0 {
		k := min(n, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}

// messageJSON is a complete assistant message, as answered to a
// non-streaming request.
func messageJSON(id, model string, blocks []servedBlock, stopReason string, u Usage) map[string]any {
	content := make([]map[string]any, 0, len(blocks))
	for _, b := range blocks {
		content = append(content, b.full())
	}
	return map[string]any{
		"id":            id,
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       content,
		"stop_reason":   stopReason,
		"stop_sequence": nil,
		"usage":         u,
	}
}
