package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-run/drover/claudecode/internal/jsonscan"
)

//go:generate go run ./internal/wiregen/cmd/wiregen -o wire_decode.go wire.go control_wire.go content.go

// ErrNotObject is returned (wrapped) by Decode for valid JSON that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// Decode decodes one line of the CLI's stdout (without its line terminator; surrounding whitespace is
// allowed). It chooses the concrete type from a cheap scan of the object's top-level "type" (and, for
// system messages, "subtype") member, wherever it appears, then reads the line once, checking its
// syntax as it decodes the fields of that type and skipping the others without building them.
//
// Decode fails only when line is not valid JSON or not an object. An unknown type or subtype is not an
// error: it decodes to *Unknown. A field of an unexpected JSON type is left zero rather than failing
// the message. Decode copies line once: the returned message's Raw stays valid after line is reused,
// and its json.RawMessage fields are slices of Raw.
//
// Keys match exactly (encoding/json also matches them case-insensitively); a repeated key takes its
// last value; null leaves a field as it was (zero), except that it sets pointers, slices and maps to
// nil.
func Decode(line []byte) (Message, error) {
	typ, sub, isObject := probe(line)
	if !isObject {
		if !jsonscan.Valid(line) {
			return nil, fmt.Errorf("decoding message: %w", syntaxError(line))
		}
		return nil, fmt.Errorf("decoding message: %w", ErrNotObject)
	}
	var d jsonscan.Decoder
	return decodeOwned(&d, append([]byte(nil), line...), typ, sub, nil)
}

// decode is Decode of a line the Reader returned, with the Reader's table of repeated values. Like
// ReadMessage, it takes over a line assembled in the Reader's own buffer instead of copying it.
func (r *Reader) decode(line []byte) (Message, error) {
	typ, sub, isObject := probe(line)
	if !isObject {
		return Decode(line)
	}
	raw := line
	if r.owned(line) {
		r.buf = nil
	} else {
		raw = append([]byte(nil), line...)
	}
	return decodeOwned(&r.dec, raw, typ, sub, nil)
}

// decodeOwned decodes raw, which the returned message keeps, given the probe's type and subtype. It
// reuses d, which keeps the Names it was last reset with. With v, the messages of the most frequent
// types are reused from call to call instead of allocated.
func decodeOwned(d *jsonscan.Decoder, raw []byte, typ, sub string, v *views) (Message, error) {
	d.Reset(raw, d.Names())
	var msg Message
	switch typ {
	case TypeAssistant:
		m := reuse(v.assistant())
		m.raw = raw
		m.decode(d)
		msg = m
	case TypeUser:
		m := reuse(v.user())
		m.raw = raw
		m.decode(d)
		msg = m
	case TypeResult:
		m := reuse(v.result())
		m.raw = raw
		m.decode(d)
		msg = m
	case TypeStreamEvent:
		m := reuse(v.stream())
		m.raw = raw
		m.decode(d)
		msg = m
	case TypeSystem:
		msg = decodeSystem(d, raw, sub, v)
	case TypeControlRequest:
		m := &ControlRequest{line: line{raw: raw}}
		m.decode(d)
		msg = m
	case TypeControlResponse:
		m := &ControlResponse{line: line{raw: raw}}
		m.decode(d)
		msg = m
	case TypeControlCancelRequest:
		m := &ControlCancelRequest{line: line{raw: raw}}
		m.decode(d)
		msg = m
	case TypeRateLimitEvent:
		m := &RateLimitEvent{line: line{raw: raw}}
		m.decode(d)
		msg = m
	case TypeCommandLifecycle:
		m := reuse(v.lifecycle())
		m.raw = raw
		m.decode(d)
		msg = m
	default:
		m := &Unknown{line: line{raw: raw}}
		m.decode(d)
		msg = m
	}
	d.End()
	if d.Err() != nil {
		return nil, fmt.Errorf("decoding message: %w", syntaxError(raw))
	}
	return msg, nil
}

// decodeSystem decodes a system message of this subtype.
func decodeSystem(d *jsonscan.Decoder, raw []byte, subtype string, v *views) Message {
	h := SystemHeader{line: line{raw: raw}}
	switch subtype {
	case SubtypeInit:
		m := reuse(v.sysInit())
		m.raw = raw
		m.decode(d)
		return m
	case SubtypeStatus:
		m := reuse(v.sysStatus())
		m.raw = raw
		m.decode(d)
		return m
	case SubtypeAPIRetry:
		m := &SystemAPIRetry{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypeCompactBoundary:
		m := &SystemCompactBoundary{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypeTaskStarted, SubtypeTaskProgress, SubtypeTaskUpdated, SubtypeTaskNotification:
		m := &SystemTask{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypeThinkingTokens:
		m := &SystemThinkingTokens{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypePermissionDenied:
		m := &SystemPermissionDenied{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypeHookStarted, SubtypeHookProgress, SubtypeHookResponse:
		m := &SystemHook{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypeInformational:
		m := &SystemInformational{SystemHeader: h}
		m.decode(d)
		return m
	case SubtypeNotification:
		m := &SystemNotification{SystemHeader: h}
		m.decode(d)
		return m
	default:
		m := &Unknown{line: line{raw: raw}}
		m.decode(d)
		return m
	}
}

// views holds the messages a Reader reuses for ReadMessageView, one of each frequent type.
type views struct {
	assistantMsg *AssistantMessage
	userMsg      *UserMessage
	resultMsg    *ResultMessage
	streamMsg    *StreamEvent
	lifecycleMsg *CommandLifecycle
	initMsg      *SystemInit
	statusMsg    *SystemStatus
}

// The slots of v, or nil when v is nil (no reuse).

func (v *views) assistant() **AssistantMessage {
	if v == nil {
		return nil
	}
	return &v.assistantMsg
}

func (v *views) user() **UserMessage {
	if v == nil {
		return nil
	}
	return &v.userMsg
}

func (v *views) result() **ResultMessage {
	if v == nil {
		return nil
	}
	return &v.resultMsg
}

func (v *views) stream() **StreamEvent {
	if v == nil {
		return nil
	}
	return &v.streamMsg
}

func (v *views) lifecycle() **CommandLifecycle {
	if v == nil {
		return nil
	}
	return &v.lifecycleMsg
}

func (v *views) sysInit() **SystemInit {
	if v == nil {
		return nil
	}
	return &v.initMsg
}

func (v *views) sysStatus() **SystemStatus {
	if v == nil {
		return nil
	}
	return &v.statusMsg
}

// reuse returns the zeroed message in s, or a new one when s is nil.
func reuse[T any](s **T) *T {
	if s == nil {
		return new(T)
	}
	if *s == nil {
		*s = new(T)
	} else {
		var zero T
		**s = zero
	}
	return *s
}

// syntaxError returns the error encoding/json reports for data, so that a malformed line is described
// in the words Go programs know. It runs only for lines that failed.
func syntaxError(data []byte) error {
	var v struct{}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// decodeSlice decodes an array with decode for each element: null gives nil, an array a non-nil
// slice (empty when the array is), anything else leaves old.
func decodeSlice[T any](d *jsonscan.Decoder, old []T, decode func(*T, *jsonscan.Decoder)) []T {
	switch d.Peek() {
	case 'n':
		d.Skip()
		return nil
	case '[':
	default:
		d.Skip()
		return old
	}
	out := []T{}
	for more := d.Array(); more; more = d.ArrayMore() {
		var zero T
		out = append(out, zero)
		decode(&out[len(out)-1], d) // in place: a value of its own would escape to the heap
	}
	return out
}

// decodePtr decodes an optional object: null gives nil, an object a new value, anything else leaves
// old.
func decodePtr[T any](d *jsonscan.Decoder, old *T, decode func(*T, *jsonscan.Decoder)) *T {
	switch d.Peek() {
	case 'n':
		d.Skip()
		return nil
	case '{':
		v := new(T)
		decode(v, d)
		return v
	}
	d.Skip()
	return old
}

// decodeNew decodes an optional value of a type whose decode reads any value (one that keeps its
// object verbatim): null gives nil, anything else a new value, as encoding/json does for a pointer
// to an Unmarshaler.
func decodeNew[T any](d *jsonscan.Decoder, decode func(*T, *jsonscan.Decoder)) *T {
	if d.Peek() == 'n' {
		d.Skip()
		return nil
	}
	v := new(T)
	decode(v, d)
	return v
}

// rawCopy returns a copy of data for the UnmarshalJSON methods, which must not keep their input.
func rawCopy(data []byte) []byte { return append(json.RawMessage(nil), data...) }
