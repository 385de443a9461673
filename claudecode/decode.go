package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotObject is returned (wrapped) by Decode for valid JSON that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// Decode decodes one line of the CLI's stdout (without its line terminator; surrounding whitespace is
// allowed). It chooses the concrete type from a cheap scan of the object's top-level "type" (and, for
// system messages, "subtype") member, wherever it appears, then decodes the line once into that type.
//
// Decode fails only when line is not valid JSON or not an object. An unknown type or subtype is not an
// error: it decodes to *Unknown. A field of an unexpected JSON type is left zero rather than failing
// the message. Decode copies line: the returned message's Raw stays valid after line is reused.
func Decode(line []byte) (Message, error) {
	typ, sub, isObject := probe(line)
	if !isObject {
		if !json.Valid(line) {
			return nil, fmt.Errorf("decoding message: %w", syntaxError(line))
		}
		return nil, fmt.Errorf("decoding message: %w", ErrNotObject)
	}
	return decodeOwned(append([]byte(nil), line...), typ, sub)
}

// decodeOwned decodes raw, which the returned message keeps, given the probe's type and subtype.
func decodeOwned(raw []byte, typ, sub string) (Message, error) {
	var (
		msg Message
		dst any
	)
	switch typ {
	case TypeAssistant:
		m := &AssistantMessage{}
		msg, dst = m, m
	case TypeUser:
		if !validJSON(raw) {
			return nil, fmt.Errorf("decoding message: %w", syntaxError(raw))
		}
		m := &UserMessage{line: line{raw: raw}}
		m.decode(raw)
		return m, nil
	case TypeResult:
		m := &ResultMessage{}
		msg, dst = m, m
	case TypeStreamEvent:
		m := &StreamEvent{}
		msg, dst = m, m
	case TypeSystem:
		msg, dst = newSystem(sub)
	case TypeControlRequest:
		return decodeControlRequest(raw)
	case TypeControlResponse:
		return decodeControlResponse(raw)
	case TypeControlCancelRequest:
		m := &ControlCancelRequest{}
		msg, dst = m, m
	case TypeRateLimitEvent:
		m := &RateLimitEvent{}
		msg, dst = m, m
	case TypeCommandLifecycle:
		m := &CommandLifecycle{}
		msg, dst = m, m
	default:
		m := &Unknown{}
		msg, dst = m, m
	}
	if err := tolerate(json.Unmarshal(raw, dst)); err != nil {
		return nil, fmt.Errorf("decoding message: %w", err)
	}
	setRaw(msg, raw)
	return msg, nil
}

// newSystem returns the value a system message of this subtype decodes into.
func newSystem(subtype string) (Message, any) {
	var m Message
	switch subtype {
	case SubtypeInit:
		m = &SystemInit{}
	case SubtypeStatus:
		m = &SystemStatus{}
	case SubtypeAPIRetry:
		m = &SystemAPIRetry{}
	case SubtypeCompactBoundary:
		m = &SystemCompactBoundary{}
	case SubtypeTaskStarted, SubtypeTaskProgress, SubtypeTaskUpdated, SubtypeTaskNotification:
		m = &SystemTask{}
	case SubtypeThinkingTokens:
		m = &SystemThinkingTokens{}
	case SubtypePermissionDenied:
		m = &SystemPermissionDenied{}
	case SubtypeHookStarted, SubtypeHookProgress, SubtypeHookResponse:
		m = &SystemHook{}
	case SubtypeInformational:
		m = &SystemInformational{}
	case SubtypeNotification:
		m = &SystemNotification{}
	default:
		m = &Unknown{}
	}
	return m, m
}

// setRaw stores raw in the message's embedded line.
func setRaw(m Message, raw []byte) {
	if s, ok := m.(interface{ setRaw([]byte) }); ok {
		s.setRaw(raw)
	}
}

func (l *line) setRaw(raw []byte) { l.raw = raw }

func decodeControlRequest(raw []byte) (Message, error) {
	var w controlRequestWire
	if err := tolerate(json.Unmarshal(raw, &w)); err != nil {
		return nil, fmt.Errorf("decoding message: %w", err)
	}
	m := &ControlRequest{line: line{raw: raw}, RequestID: w.RequestID, Request: w.Request}
	if firstByte(w.Request) != '{' {
		return m, nil
	}
	m.Subtype = probeSubtype(w.Request)
	switch m.Subtype {
	case RequestCanUseTool:
		m.CanUseTool = &CanUseTool{}
		_ = tolerate(json.Unmarshal(w.Request, m.CanUseTool)) // already validated
	case RequestHookCallback:
		m.HookCallback = &HookCallback{}
		_ = tolerate(json.Unmarshal(w.Request, m.HookCallback))
	}
	return m, nil
}

func decodeControlResponse(raw []byte) (Message, error) {
	var w controlResponseWire
	if err := tolerate(json.Unmarshal(raw, &w)); err != nil {
		return nil, fmt.Errorf("decoding message: %w", err)
	}
	r := w.Response
	return &ControlResponse{
		line:      line{raw: raw},
		Subtype:   r.Subtype,
		RequestID: r.RequestID,
		Response:  r.Response,
		Error:     r.Error,
	}, nil
}

// syntaxError returns the error json.Unmarshal reports for data.
func syntaxError(data []byte) error {
	var v struct{}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}
