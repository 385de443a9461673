package claudecode

import "github.com/drover-run/drover/claudecode/internal/jsonscan"

// Content blocks carry the bulk of the bytes (tool results are often hundreds of kilobytes), and their
// "string or array" and "keep unknown blocks verbatim" rules would make a reflective decoder scan them
// several times over through nested Unmarshalers. They decode in the same single pass as the rest of
// the line.

// UnmarshalJSON decodes a block, keeping Raw for unmodelled types. A value that is not an object
// leaves b zero. It fails only on invalid JSON.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	*b = ContentBlock{}
	d := jsonscan.New(rawCopy(data))
	b.decode(d)
	d.End()
	return d.Err()
}

// unmodelled reports whether b is of a type ContentBlock does not model, whose bytes it keeps in Raw.
func (b *ContentBlock) unmodelled() bool {
	switch b.Type {
	case BlockText, BlockThinking, BlockRedactedThinking, BlockToolUse, BlockToolResult, BlockImage:
		return false
	}
	return true
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
		c.Blocks = decodeSlice(d, nil, (*ContentBlock).decode)
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
