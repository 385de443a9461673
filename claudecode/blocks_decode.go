package claudecode

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Content blocks carry the bulk of the bytes (tool results are often hundreds of kilobytes), and their
// "string or array" and "keep unknown blocks verbatim" rules would make encoding/json scan them several
// times over through nested Unmarshalers. So ContentBlock and Content decode themselves in one pass
// with the scanner of probe.go, on input that encoding/json has already validated (every Decode runs
// json.Unmarshal on the whole line first). On invalid input they never panic; they stop early.
//
// Keys match exactly (encoding/json also matches case-insensitively); a value of an unexpected JSON
// type leaves its field zero; a repeated key takes its last value.

// UnmarshalJSON decodes a block, keeping Raw for unmodelled types. It never fails.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	*b = ContentBlock{}
	s := scanner{data: data}
	if firstByte(data) != '{' {
		return nil
	}
	s.members(func(key []byte) bool {
		switch keyName(key) {
		case "type":
			b.Type = s.stringValue()
		case "text":
			b.Text = s.stringValue()
		case "thinking":
			b.Thinking = s.stringValue()
		case "signature":
			b.Signature = s.stringValue()
		case "data":
			b.Data = s.stringValue()
		case "id":
			b.ID = s.stringValue()
		case "name":
			b.Name = s.stringValue()
		case "tool_use_id":
			b.ToolUseID = s.stringValue()
		case "is_error":
			b.IsError = s.boolValue(b.IsError)
		case "input":
			b.Input = append(json.RawMessage(nil), s.value()...)
		case "content":
			_ = b.Content.UnmarshalJSON(s.value())
		case "source":
			v := s.value()
			if firstByte(v) == '{' {
				b.Source = &ImageSource{}
				_ = json.Unmarshal(v, b.Source) // small; a type mismatch leaves fields zero
			} else if firstByte(v) == 'n' {
				b.Source = nil
			}
		default:
			s.skipValue()
		}
		return true
	})
	switch b.Type {
	case BlockText, BlockThinking, BlockRedactedThinking, BlockToolUse, BlockToolResult, BlockImage:
	default:
		b.Raw = append(json.RawMessage(nil), data...)
	}
	return nil
}

// UnmarshalJSON accepts a string, an array of blocks or null. Any other JSON value leaves c zero. It
// never fails.
func (c *Content) UnmarshalJSON(data []byte) error {
	*c = Content{}
	s := scanner{data: data}
	s.skipSpace()
	if s.pos >= len(data) {
		return nil
	}
	switch data[s.pos] {
	case '"':
		c.Text = s.stringValue()
	case '[':
		s.pos++
		c.Blocks = []ContentBlock{}
		for {
			s.skipSpace()
			if s.pos >= len(data) || data[s.pos] == ']' {
				break
			}
			start := s.pos
			s.skipValue()
			if s.pos == start {
				break // not a value: invalid input
			}
			var b ContentBlock
			_ = b.UnmarshalJSON(data[start:s.pos])
			c.Blocks = append(c.Blocks, b)
			s.skipSpace()
			if !s.eat(',') {
				break
			}
		}
	}
	return nil
}

// value consumes one value and returns its bytes.
func (s *scanner) value() []byte {
	start := s.pos
	s.skipValue()
	return s.data[start:s.pos]
}

// stringValue consumes one value and returns it if it is a string, else "".
func (s *scanner) stringValue() string {
	if q, ok := s.str(); ok {
		return decodeString(q)
	}
	s.skipValue()
	return ""
}

// boolValue consumes one value and returns it if it is a boolean, else old (null and other types
// leave the field as it was, as in encoding/json).
func (s *scanner) boolValue(old bool) bool {
	v := s.value()
	switch string(v) {
	case "true":
		return true
	case "false":
		return false
	}
	return old
}

// keyName returns the unquoted key, without allocating for keys without escapes.
func keyName(q []byte) string {
	if len(q) < 2 {
		return ""
	}
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]) // the compiler does not allocate for a switch on this
	}
	return decodeString(q)
}

// decodeString returns the value of the quoted JSON string q with encoding/json's rules: escapes
// decoded, invalid UTF-8 and unpaired surrogates replaced by U+FFFD.
func decodeString(q []byte) string {
	if len(q) < 2 {
		return ""
	}
	in := q[1 : len(q)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var out strings.Builder // grows without zeroing and hands over its bytes without a copy
	out.Grow(len(in))
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\\')
		run := in
		if i >= 0 {
			run = in[:i]
		}
		writeValidUTF8(&out, run)
		if i < 0 {
			break
		}
		in = in[i:]
		if len(in) < 2 {
			break
		}
		switch in[1] {
		case '"', '\\', '/', '\'':
			out.WriteByte(in[1])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := hex4(in[2:])
			if !ok {
				return out.String() // invalid input: stop
			}
			in = in[6:]
			if utf16.IsSurrogate(r) {
				if len(in) >= 6 && in[0] == '\\' && in[1] == 'u' {
					if r2, ok := hex4(in[2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							in = in[6:]
							out.WriteRune(dec)
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out.WriteRune(r)
			continue
		default:
			return out.String() // invalid escape: stop
		}
		in = in[2:]
	}
	return out.String()
}

// writeValidUTF8 writes run, replacing each invalid byte by U+FFFD.
func writeValidUTF8(out *strings.Builder, run []byte) {
	if utf8.Valid(run) {
		out.Write(run)
		return
	}
	for len(run) > 0 {
		r, size := utf8.DecodeRune(run)
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError)
		} else {
			out.Write(run[:size])
		}
		run = run[size:]
	}
}

// hex4 decodes four hexadecimal digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// decodeUser fills m from raw, a valid JSON object, in one pass. User frames carry the tool results,
// the largest lines of a session, so they skip encoding/json's extra scan of nested values.
func (m *UserMessage) decode(raw []byte) {
	s := scanner{data: raw}
	s.members(func(key []byte) bool {
		switch keyName(key) {
		case "message":
			m.Message.decode(&s)
		case "parent_tool_use_id":
			m.ParentToolUseID = s.stringValue()
		case "uuid":
			m.UUID = s.stringValue()
		case "session_id":
			m.SessionID = s.stringValue()
		case "tool_use_result":
			m.ToolUseResult = append(json.RawMessage(nil), s.value()...)
		case "isReplay":
			m.IsReplay = s.boolValue(m.IsReplay)
		case "isSynthetic":
			m.IsSynthetic = s.boolValue(m.IsSynthetic)
		case "agent_id":
			m.AgentID = s.stringValue()
		case "timestamp":
			m.Timestamp = s.stringValue()
		case "priority":
			m.Priority = s.stringValue()
		default:
			s.skipValue()
		}
		return true
	})
}

// decode consumes the "message" value of a user frame.
func (u *UserContent) decode(s *scanner) {
	s.members(func(key []byte) bool {
		switch keyName(key) {
		case "role":
			u.Role = s.stringValue()
		case "content":
			_ = u.Content.UnmarshalJSON(s.value())
		default:
			s.skipValue()
		}
		return true
	})
}
