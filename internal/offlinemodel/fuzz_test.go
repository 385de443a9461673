package offlinemodel

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseRequest checks that no request body makes parsing, validation
// or classification panic.
func FuzzParseRequest(f *testing.F) {
	// The small captured bodies: large seeds make the fuzzer crawl.
	for _, name := range []string{"hook_pretooluse", "hook_stop", "main_no_tools"} {
		b, err := os.ReadFile(filepath.Join("testdata", "requests", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		var c captured
		if err := json.Unmarshal(b, &c); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(c.Body))
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"system":"s"}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"t"}]}]}]}`))
	f.Add([]byte(`{"output_config":{"format":{"type":"json_schema","schema":{"type":"array","minItems":3}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = validate(body, false, BuiltinModel)
		_ = validate(body, true, BuiltinModel)
		var r Request
		if r.parseBody(body) != nil {
			return
		}
		r.Class = classifyMessages(&r)
		_ = r.LastUserText()
		_ = r.ToolResults()
		for _, m := range r.Messages {
			_ = m.Text()
			_ = m.BlockTypes()
		}
		if r.Class == ClassCompact || r.Class == ClassAuxiliary {
			if _, err := serveBlocks(autoReply(&r).Blocks); err != nil {
				t.Errorf("automatic reply: %v", err)
			}
		}
	})
}
