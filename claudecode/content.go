package claudecode

import (
	"encoding/json"
	"errors"
	"strings"
)

// Content block types modelled by ContentBlock. Blocks of any other type keep their bytes in
// ContentBlock.Raw.
const (
	BlockText             = "text"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockImage            = "image"
)

// ContentBlock is one block of a message's content. Which fields are set depends on Type:
//
//   - text: Text
//   - thinking: Thinking, Signature
//   - redacted_thinking: Data
//   - tool_use: ID, Name, Input
//   - tool_result: ToolUseID, Content, IsError
//   - image: Source
//   - anything else: Raw (the block verbatim), plus whichever of the fields above it happens to carry
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty" wire:"text"`
	Thinking  string          `json:"thinking,omitempty" wire:"text"`
	Signature string          `json:"signature,omitempty" wire:"text"`
	Data      string          `json:"data,omitempty" wire:"text"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   Content         `json:"content,omitzero"`
	IsError   bool            `json:"is_error,omitempty"`
	Source    *ImageSource    `json:"source,omitempty"`
	// Raw is the block verbatim, kept only for types not listed above.
	Raw json.RawMessage `json:"-" wire:"verbatim,if=unmodelled"`
}

// ImageSource is the source of an image block.
type ImageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty" wire:"text"`
	URL       string `json:"url,omitempty" wire:"text"`
}

// Content is message or tool-result content, which the wire carries either as a plain string (Text)
// or as an array of blocks (Blocks, non-nil even when empty). The zero value means absent or null.
type Content struct {
	Text   string
	Blocks []ContentBlock
}

// IsZero reports whether c is absent.
func (c Content) IsZero() bool { return c.Text == "" && c.Blocks == nil }

// String returns the text of c: Text, or the Text of its text blocks joined by newlines.
func (c Content) String() string {
	if c.Blocks == nil {
		return c.Text
	}
	var sb strings.Builder
	for i := range c.Blocks {
		if c.Blocks[i].Type != BlockText {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(c.Blocks[i].Text)
	}
	return sb.String()
}

// MarshalJSON writes Blocks as an array when non-nil, else Text as a string.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Blocks != nil {
		return json.Marshal(c.Blocks)
	}
	return json.Marshal(c.Text)
}

// tolerate drops the type-mismatch errors of encoding/json: the decoder has then filled every field it
// could, which is what we want from a protocol that adds fields and variants over time.
func tolerate(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return nil
	}
	return err
}

// firstByte returns the first non-space byte of data, or 0.
func firstByte(data []byte) byte {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
