package claudecode

import (
	"bytes"
	"encoding/json"
)

// probe scans the top-level members of the JSON object in data for the string values of "type" and,
// when type is "system", "subtype". It reads no further than it needs and does not validate: the
// decoder does that afterwards. isObject is false when data does not start with '{'.
func probe(data []byte) (typ, subtype string, isObject bool) {
	s := scanner{data: data}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		return "", "", false
	}
	haveType, haveSub := false, false
	s.members(func(key []byte) bool {
		switch {
		case !haveType && keyIs(key, "type"):
			haveType = true
			typ = s.maybeString()
		case !haveSub && keyIs(key, "subtype"):
			haveSub = true
			subtype = s.maybeString()
		default:
			s.skipValue()
		}
		return !(haveType && (haveSub || typ != TypeSystem))
	})
	return typ, subtype, true
}

// probeSubtype returns the top-level "subtype" string of the object in data.
func probeSubtype(data []byte) string {
	s := scanner{data: data}
	var subtype string
	s.members(func(key []byte) bool {
		if keyIs(key, "subtype") {
			subtype = s.maybeString()
			return false
		}
		s.skipValue()
		return true
	})
	return subtype
}

// scanner walks JSON text without building values.
type scanner struct {
	data []byte
	pos  int
}

// members walks the object at the scanner's position: for each member it calls
// fn with the member's key, the scanner standing on the member's value, which
// fn must consume. fn returns false to stop early. A value that is not an
// object is skipped; malformed input ends the walk where it breaks.
func (s *scanner) members(fn func(key []byte) bool) {
	s.skipSpace()
	if !s.eat('{') {
		s.skipValue()
		return
	}
	for {
		s.skipSpace()
		key, ok := s.str()
		if !ok {
			break
		}
		s.skipSpace()
		if !s.eat(':') {
			return
		}
		s.skipSpace()
		if !fn(key) {
			return
		}
		s.skipSpace()
		if !s.eat(',') {
			break
		}
	}
	s.skipSpace()
	s.eat('}')
}

// maybeString consumes a value and returns it if it is a string, else "".
func (s *scanner) maybeString() string {
	if v, ok := s.str(); ok {
		return unquote(v)
	}
	s.skipValue()
	return ""
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// str consumes a string and returns it with its quotes; ok is false if no string starts here.
func (s *scanner) str() (quoted []byte, ok bool) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false
	}
	start := s.pos
	end, ok := stringEnd(s.data, s.pos)
	if !ok {
		s.pos = len(s.data)
		return nil, false
	}
	s.pos = end
	return s.data[start:end], true
}

// stringEnd returns the index just after the closing quote of the string whose opening quote is at i.
func stringEnd(data []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return len(data), false
		}
		q := j + k
		n := 0
		for b := q - 1; b > i && data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
}

// skipValue consumes one value of any kind.
func (s *scanner) skipValue() {
	if s.pos >= len(s.data) {
		return
	}
	switch s.data[s.pos] {
	case '"':
		if _, ok := s.str(); !ok {
			s.pos = len(s.data)
		}
	case '{', '[':
		depth := 0
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return
				}
			case '"':
				end, ok := stringEnd(s.data, s.pos)
				if !ok {
					s.pos = len(s.data)
					return
				}
				s.pos = end
				continue
			}
			s.pos++
		}
	default:
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return
			}
			s.pos++
		}
	}
}

// keyIs reports whether the quoted key q names name.
func keyIs(q []byte, name string) bool {
	if len(q) == len(name)+2 && string(q[1:len(q)-1]) == name {
		return true
	}
	return bytes.IndexByte(q, '\\') >= 0 && unquote(q) == name
}

// word returns b as a string, without allocating for the types and subtypes of this package.
func word(b []byte) string {
	switch string(b) {
	case TypeSystem:
		return TypeSystem
	case TypeAssistant:
		return TypeAssistant
	case TypeUser:
		return TypeUser
	case TypeResult:
		return TypeResult
	case TypeStreamEvent:
		return TypeStreamEvent
	case TypeControlRequest:
		return TypeControlRequest
	case TypeControlResponse:
		return TypeControlResponse
	case TypeControlCancelRequest:
		return TypeControlCancelRequest
	case TypeCommandLifecycle:
		return TypeCommandLifecycle
	case SubtypeInit:
		return SubtypeInit
	case SubtypeStatus:
		return SubtypeStatus
	case RequestCanUseTool:
		return RequestCanUseTool
	case RequestHookCallback:
		return RequestHookCallback
	}
	return string(b)
}

// unquote returns the value of a quoted JSON string, decoding escapes only when there are any.
func unquote(q []byte) string {
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return word(inner)
	}
	var v string
	if json.Unmarshal(q, &v) != nil {
		return ""
	}
	return v
}
