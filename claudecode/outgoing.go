package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Prompt is a user prompt we write to the CLI's stdin.
type Prompt struct {
	// Text is the prompt text. It may be empty only when Images is not.
	Text string
	// Images are sent before the text, as base64 image blocks.
	Images []Image
	// UUID, when set, is adopted by the CLI as the uuid of the prompt's transcript entry (so we know it
	// before the turn runs), and makes the CLI emit command_lifecycle frames. It must look like a UUID.
	UUID string
}

// Image is an image attached to a prompt.
type Image struct {
	// MediaType is image/png, image/jpeg, image/gif or image/webp.
	MediaType string
	// Data is the image itself (not base64).
	Data []byte
}

type promptWire struct {
	Type            string        `json:"type"`
	Message         promptMessage `json:"message"`
	ParentToolUseID *string       `json:"parent_tool_use_id"`
	UUID            string        `json:"uuid,omitempty"`
}

type promptMessage struct {
	Role    string        `json:"role"`
	Content []promptBlock `json:"content"`
}

type promptBlock struct {
	Type   string             `json:"type"`
	Text   string             `json:"text,omitempty"`
	Source *promptImageSource `json:"source,omitempty"`
}

type promptImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"` // encoding/json writes []byte as standard base64
}

// MarshalPrompt returns the stdin line (without newline) for p:
// {"type":"user","message":{"role":"user","content":[…]},"parent_tool_use_id":null,"uuid":…}.
func MarshalPrompt(p Prompt) ([]byte, error) {
	if p.Text == "" && len(p.Images) == 0 {
		return nil, errors.New("marshalling prompt: empty prompt")
	}
	if p.UUID != "" && !IsUUID(p.UUID) {
		return nil, fmt.Errorf("marshalling prompt: uuid %q is not a UUID", p.UUID)
	}
	w := promptWire{Type: TypeUser, Message: promptMessage{Role: "user"}, UUID: p.UUID}
	for i, img := range p.Images {
		switch img.MediaType {
		case "image/png", "image/jpeg", "image/gif", "image/webp":
		default:
			return nil, fmt.Errorf("marshalling prompt: image %d: unsupported media type %q", i, img.MediaType)
		}
		if len(img.Data) == 0 {
			return nil, fmt.Errorf("marshalling prompt: image %d: no data", i)
		}
		w.Message.Content = append(w.Message.Content, promptBlock{
			Type:   BlockImage,
			Source: &promptImageSource{Type: "base64", MediaType: img.MediaType, Data: img.Data},
		})
	}
	if p.Text != "" {
		w.Message.Content = append(w.Message.Content, promptBlock{Type: BlockText, Text: p.Text})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("marshalling prompt: %w", err)
	}
	return b, nil
}

// MarshalControlRequest returns the stdin line for one of our control requests:
// {"type":"control_request","request_id":id,"request":{"subtype":subtype,…body}}. body must marshal to a
// JSON object (its members are merged after subtype) or be nil.
func MarshalControlRequest(requestID, subtype string, body any) ([]byte, error) {
	if requestID == "" || subtype == "" {
		return nil, errors.New("marshalling control request: empty request id or subtype")
	}
	members, err := objectMembers(body)
	if err != nil {
		return nil, fmt.Errorf("marshalling %s request: %w", subtype, err)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"control_request","request_id":`)
	writeJSONString(&b, requestID)
	b.WriteString(`,"request":{"subtype":`)
	writeJSONString(&b, subtype)
	if len(members) > 0 {
		b.WriteByte(',')
		b.Write(members)
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

// MarshalControlResponse returns the stdin line answering the CLI's request requestID with payload
// (nil means {}), in the envelope the CLI accepts:
// {"type":"control_response","response":{"subtype":"success","request_id":…,"response":{…}}}.
func MarshalControlResponse(requestID string, payload any) ([]byte, error) {
	var body []byte
	switch p := payload.(type) {
	case nil:
		body = []byte("{}")
	case json.RawMessage:
		if len(p) == 0 {
			body = []byte("{}")
		} else {
			body = p
		}
	default:
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return nil, fmt.Errorf("marshalling control response: %w", err)
		}
	}
	if firstByte(body) != '{' || !json.Valid(body) {
		return nil, errors.New("marshalling control response: payload is not a JSON object")
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"control_response","response":{"subtype":"success","request_id":`)
	writeJSONString(&b, requestID)
	b.WriteString(`,"response":`)
	if err := json.Compact(&b, body); err != nil {
		return nil, fmt.Errorf("marshalling control response: %w", err)
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

// MarshalControlError returns the stdin line answering the CLI's request requestID with an error:
// {"type":"control_response","response":{"subtype":"error","request_id":…,"error":msg}}.
func MarshalControlError(requestID, msg string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"control_response","response":{"subtype":"error","request_id":`)
	writeJSONString(&b, requestID)
	b.WriteString(`,"error":`)
	writeJSONString(&b, msg)
	b.WriteString("}}")
	return b.Bytes()
}

// objectMembers marshals v and returns the members of the resulting object without braces.
func objectMembers(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	var b []byte
	if r, ok := v.(json.RawMessage); ok {
		if len(r) == 0 {
			return nil, nil
		}
		b = r
	} else {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, err
	}
	b = c.Bytes()
	if bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, errors.New("body is not a JSON object")
	}
	return b[1 : len(b)-1], nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// IsUUID reports whether s has the textual form of a UUID (8-4-4-4-12 hexadecimal digits).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
