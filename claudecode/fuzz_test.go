package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzDecode: Decode never panics, keeps the input as Raw, accepts every JSON object, rejects
// everything else, and decodes its own Raw to the same message.
func FuzzDecode(f *testing.F) {
	for _, l := range seedLines() {
		f.Add(l)
	}
	for _, s := range []string{`{"type":"user","message":{"content":"x"}}`, `{"typ\u0065":"system","subtype":"init"}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","input":"notobject"}]}}`, `[]`, `{`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		isObject := json.Valid(data) && firstByte(data) == '{'
		if err != nil {
			if isObject {
				t.Fatalf("Decode rejected a JSON object: %v", err)
			}
			return
		}
		if !isObject {
			t.Fatalf("Decode accepted a non-object: %T", m)
		}
		if !bytes.Equal(m.Raw(), data) {
			t.Fatal("Raw differs from the input")
		}
		m2, err := Decode(m.Raw())
		if err != nil || !sameMessage(m, m2) {
			t.Fatalf("re-decoding differs: %v", err)
		}
	})
}

// FuzzClient feeds arbitrary output to a Client while a request is pending and handlers answer (or
// block until cancelled): no panic, no deadlock, and everything ends once the output does.
func FuzzClient(f *testing.F) {
	inline := seedLines()
	inline = inline[:len(inline)-len(fileLines())]
	f.Add(bytes.Join(inline, []byte("\n")))
	for _, name := range []string{"perm.jsonl", "interrupt.jsonl"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "cli", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(lineCanUseTool + "\n" + lineHookCB + "\n" + lineCtlCancel + "\n" + lineResult))
	f.Add([]byte(`{"type":"control_request","request_id":"block-1","request":{"subtype":"can_use_tool"}}` + "\n" +
		`{"type":"control_request","request_id":"block-1","request":{"subtype":"hook_callback"}}` + "\n" +
		`{"type":"control_cancel_request","request_id":"block-1"}` + "\n" + "garbage\r\n\n" +
		`{"type":"control_request","request":{"subtype":"can_use_tool"}}`))
	f.Add([]byte(`{"type":"control_response","response":{"subtype":"success","request_id":"x"}}` + "\n{\"type\":\"control_response\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		c := NewClient(outR, inW, ClientConfig{Handler: HandlerFunc(func(ctx context.Context, r *ControlRequest) (any, error) {
			if strings.HasPrefix(r.RequestID, "block") {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			if r.CanUseTool != nil {
				return AllowTool(r.CanUseTool.Input, r.CanUseTool.ToolUseID), nil
			}
			if r.HookCallback != nil {
				return HookOutput{}, nil
			}
			return nil, errors.New("unsupported")
		})})
		drained := make(chan struct{})
		go func() { // the CLI's stdin: swallow what the client writes
			defer close(drained)
			_, _ = io.Copy(io.Discard, inR)
		}()
		reqErr := make(chan error, 1)
		go func() {
			_, err := c.Request(context.Background(), RequestInterrupt, nil)
			reqErr <- err
		}()
		go func() {
			_, _ = outW.Write(data)
			_ = outW.Close()
		}()

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			m, err := c.Recv(ctx)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Recv ended with %v", err)
				}
				break
			}
			if m.Raw() == nil {
				t.Fatalf("%T without Raw", m)
			}
		}
		select {
		case <-reqErr:
		case <-ctx.Done():
			t.Fatal("pending request never ended")
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		_ = inR.Close()
		<-drained
	})
}

// FuzzContentBlock: the generated block decoder never panics on any input, and on valid input it
// agrees with encoding/json for the modelled string fields.
func FuzzContentBlock(f *testing.F) {
	for _, s := range []string{`{"type":"text","text":"hi"}`, `{"type":"tool_result","content":[{"type":"text","text":"a"}],"is_error":true}`,
		`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}`, `{"type":"image","source":{"type":"base64","data":"x"}}`,
		`{"type":"x","text":5}`, `{"type":"text","text":"a","text":"b"}`, `{"typ`, `[1,`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b ContentBlock
		_ = b.UnmarshalJSON(data)
		var c Content
		_ = c.UnmarshalJSON(data)
		if !json.Valid(data) {
			return
		}
		var ref struct {
			Type, Text, ID, Name, Thinking any
		}
		if json.Unmarshal(data, &ref) != nil {
			return
		}
		check := func(field string, got string, want any) {
			if s, ok := want.(string); ok && s != got {
				// encoding/json matches keys case-insensitively; only compare exact-case inputs.
				if bytes.Contains(data, []byte(`"`+field+`"`)) && !hasCaseVariant(data, field) {
					t.Fatalf("%s = %q, encoding/json says %q", field, got, s)
				}
			}
		}
		check("type", b.Type, ref.Type)
		check("text", b.Text, ref.Text)
		check("id", b.ID, ref.ID)
		check("name", b.Name, ref.Name)
	})
}

// hasCaseVariant reports whether data holds a key spelling field with different case or with escapes.
func hasCaseVariant(data []byte, field string) bool {
	lower := bytes.ToLower(data)
	return bytes.Count(lower, []byte(`"`+field+`"`)) != bytes.Count(data, []byte(`"`+field+`"`)) ||
		bytes.Contains(data, []byte(`\u`))
}
