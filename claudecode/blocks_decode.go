package claudecode

import "github.com/drover-run/drover/claudecode/internal/jsonscan"

// Content blocks carry the bulk of the bytes (tool results are often hundreds of kilobytes), and their
// "string or array" and "keep unknown blocks verbatim" rules would make a reflective decoder scan them
// several times over through nested Unmarshalers. They decode in the same single pass as the rest of
// the line.

// UnmarshalJSON decodes a block, keeping Raw for unmodelled types. A value that is not an object
// leaves b zero. It fails only on invalid JSON.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	d := jsonscan.New(rawCopy(data))
	b.decode(d)
	d.End()
	return d.Err()
}

// decode reads one block; any value but an object leaves b zero.
func (b *ContentBlock) decode(d *jsonscan.Decoder) {
	*b = ContentBlock{}
	if d.Peek() != '{' {
		d.Skip()
		return
	}
	start := d.Offset()
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "type":
			d.Name(&b.Type)
		case "text":
			d.Str(&b.Text)
		case "thinking":
			d.Str(&b.Thinking)
		case "signature":
			d.Str(&b.Signature)
		case "data":
			d.Str(&b.Data)
		case "id":
			d.Name(&b.ID)
		case "name":
			d.Name(&b.Name)
		case "tool_use_id":
			d.Name(&b.ToolUseID)
		case "is_error":
			d.Bool(&b.IsError)
		case "input":
			b.Input = d.Raw()
		case "content":
			b.Content.decode(d)
		case "source":
			b.Source = decodePtr(d, b.Source, (*ImageSource).decode)
		default:
			d.Skip()
		}
	}
	switch b.Type {
	case BlockText, BlockThinking, BlockRedactedThinking, BlockToolUse, BlockToolResult, BlockImage:
	default:
		b.Raw = d.Since(start)
	}
}

func (s *ImageSource) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "type":
			d.Name(&s.Type)
		case "media_type":
			d.Name(&s.MediaType)
		case "data":
			d.Str(&s.Data)
		case "url":
			d.Str(&s.URL)
		default:
			d.Skip()
		}
	}
}

// UnmarshalJSON accepts a string, an array of blocks or null. Any other JSON value leaves c zero. It
// fails only on invalid JSON.
func (c *Content) UnmarshalJSON(data []byte) error {
	d := jsonscan.New(rawCopy(data))
	c.decode(d)
	d.End()
	return d.Err()
}

// decode reads a string or an array of blocks; any other value leaves c zero.
func (c *Content) decode(d *jsonscan.Decoder) {
	*c = Content{}
	switch d.Peek() {
	case '"':
		c.Text, _ = d.String()
	case '[':
		c.Blocks = decodeSlice(d, []ContentBlock(nil), (*ContentBlock).decode)
	default:
		d.Skip()
	}
}

// UnmarshalJSON decodes an event and keeps it verbatim in Raw. A value that is not an object leaves e
// as it was. It fails only on invalid JSON.
func (e *APIEvent) UnmarshalJSON(data []byte) error {
	d := jsonscan.New(rawCopy(data))
	e.decode(d)
	d.End()
	return d.Err()
}

// UnmarshalJSON decodes the known fields and keeps the object in Raw. A value that is not an object
// leaves h as it was. It fails only on invalid JSON.
func (h *HookInput) UnmarshalJSON(data []byte) error {
	d := jsonscan.New(rawCopy(data))
	h.decode(d)
	d.End()
	return d.Err()
}
