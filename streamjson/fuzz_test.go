package streamjson

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// checkBounded fails when the adapter recovered a panic or remembers more than MaxPending of
// anything.
func checkBounded(t *testing.T, a *Adapter) {
	t.Helper()
	if a.panics != 0 {
		t.Fatalf("the adapter panicked %d times", a.panics)
	}
	limit := a.cfg.MaxPending
	sizes := map[string]int{
		"tools": len(a.tools), "prompts": len(a.prompts), "taskTools": len(a.taskTools), "permissions": len(a.permissions),
		"adopted": len(a.turn.adopted), "streamMsg": len(a.turn.streamMsg), "streamedText": len(a.turn.streamedText),
		"streamedThinking": len(a.turn.streamedThk), "commands": 0,
	}
	for name, n := range sizes {
		if n > limit {
			t.Fatalf("%s holds %d entries, bound %d", name, n, limit)
		}
	}
}

// checkEventOrder checks what holds for any input: tool_update follows its own tool_call, every
// event encodes, and there is one complete per result.
func checkEventOrder(t *testing.T, evs []events.AgentEvent, results int) {
	t.Helper()
	open := map[string]bool{}
	completes := 0
	for i, ev := range evs {
		if _, err := jsonString(ev); err != nil {
			t.Fatalf("event %d does not encode: %v", i, err)
		}
		switch ev.Type {
		case events.TypeToolCall:
			if open[ev.ToolCallID] {
				t.Fatalf("event %d: tool_call %q while already open", i, ev.ToolCallID)
			}
			open[ev.ToolCallID] = true
		case events.TypeToolUpdate:
			if !open[ev.ToolCallID] {
				t.Fatalf("event %d: tool_update %q without an open tool_call", i, ev.ToolCallID)
			}
			delete(open, ev.ToolCallID)
		case events.TypeComplete:
			completes++
		}
	}
	if completes != results {
		t.Fatalf("%d complete events for %d results", completes, results)
	}
}

// FuzzAdapterLines feeds arbitrary bytes, split into lines, through the NDJSON reader into an
// adapter (partial messages on and off).
func FuzzAdapterLines(f *testing.F) {
	paths, _ := filepath.Glob("testdata/recorded/*.jsonl")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// Each line alone, too: every message kind on its own.
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(line) > 0 && len(line) < 4096 {
				f.Add(line)
			}
		}
	}
	f.Add([]byte("{}\n[]\nnull\n{\"type\":\"result\"}\n{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\"}]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, partial := range []bool{false, true} {
			rec := &recorder{}
			a, err := New(Config{Sink: rec, PartialMessages: partial, MaxPending: 8})
			if err != nil {
				t.Fatal(err)
			}
			rd := claudecode.NewReader(bytes.NewReader(data))
			results := 0
			for {
				m, err := rd.ReadMessage()
				if err != nil {
					break
				}
				if _, ok := m.(*claudecode.ResultMessage); ok {
					results++
				}
				a.Handle(m)
			}
			checkBounded(t, a)
			checkEventOrder(t, rec.evs, results)
		}
	})
}

// gen builds a message sequence from fuzz bytes: each byte picks the next message among the
// shapes the CLI writes, with ids drawn from small pools so that calls, results, messages and
// requests meet each other in every order.
type gen struct {
	data []byte
	pos  int
}

func (g *gen) next() int {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return int(b)
}

func (g *gen) pick(options ...string) string { return options[g.next()%len(options)] }

func (g *gen) parent() string { return g.pick("", "", "", "toolu_1", "toolu_t") }

func (g *gen) line() string {
	p := g.parent()
	tool := "toolu_" + g.pick("1", "2", "3", "t")
	msg := "msg_" + g.pick("a", "b", "c")
	uuid := "u" + g.pick("1", "2", "3", "4")
	switch g.next() % 24 {
	case 0:
		return initLine(g.pick(sess, "1111bbbb-0000-4000-8000-000000000000"), g.pick("compact", "review"))
	case 1:
		return assistantLine(msg, uuid, p, textBlock(g.pick("Hello", "", "world")))
	case 2:
		return assistantLine(msg, uuid, p, thinkBlock(g.pick("hmm", "")))
	case 3:
		return assistantLine(msg, uuid, p, toolUseBlock(tool, g.pick("Bash", "Edit", "Task", "Read", "mcp__s__t", "Write", "TodoWrite"),
			g.pick(`{"command":"ls"}`, `{}`, `null`, `{"file_path":"a","content":"x"}`, `[1]`)))
	case 4:
		return toolResultLine(uuid, tool, p, g.pick("ok", "Exit code 2\nx", ""), g.next()%2 == 0,
			g.pick("", `"Error: boom"`, `{"stdout":"x"}`, `{"type":"create","filePath":"a","content":"x","structuredPatch":[]}`,
				`{"structuredPatch":[{"oldStart":1,"oldLines":1,"newStart":1,"newLines":1,"lines":["-a","+b"]}]}`, `{"type":"text","file":{"numLines":1}}`, `[]`, `7`))
	case 5:
		return streamLine(p, messageStart(msg))
	case 6:
		return streamLine(p, textDelta(g.pick("He", "llo", "")))
	case 7:
		return streamLine(p, thinkingDelta("hm"))
	case 8:
		return streamLine(p, g.pick(`{"type":"message_stop"}`, `{"type":"content_block_delta"}`, `{"type":"content_block_delta","delta":null}`, `[]`))
	case 9:
		return resultLine("r"+uuid, g.pick("Hello", ""), float64(g.next())/100, float64(g.next())/1000, "")
	case 10:
		return `{"type":"result","subtype":"` + g.pick("error_during_execution", "error_max_turns", "success") + `","is_error":true,"terminal_reason":"` +
			g.pick("aborted_tools", "api_error", "") + `","session_id":"` + sess + `","total_cost_usd":0,"usage":{},"errors":["x"],"uuid":"r"}`
	case 11:
		return `{"type":"control_request","request_id":"req` + g.pick("1", "2") + `","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm"},"tool_use_id":"` + tool + `","agent_id":"` + g.pick("", "agent1") + `"}}`
	case 12:
		return `{"type":"control_request","request_id":"req` + g.pick("1", "2") + `","request":{"subtype":"hook_callback","callback_id":"c","input":{}}}`
	case 13:
		return `{"type":"control_cancel_request","request_id":"req` + g.pick("1", "2", "3") + `"}`
	case 14:
		return `{"type":"system","subtype":"` + g.pick("task_started", "task_progress", "task_updated", "task_notification") + `","task_id":"agent` + g.pick("1", "2") +
			`","tool_use_id":"` + g.pick("toolu_t", "toolu_1", "") + `","patch":` + g.pick(`{"status":"completed"}`, `null`, `[]`) + `,"session_id":"` + sess + `","uuid":"t"}`
	case 15:
		return `{"type":"system","subtype":"status","status":` + g.pick(`"compacting"`, `null`, `"requesting"`) + `,"compact_result":"` + g.pick("", "success", "failed") + `","session_id":"` + sess + `","uuid":"s"}`
	case 16:
		return `{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":5},"session_id":"` + sess + `","uuid":"b"}`
	case 17:
		return `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":5,"error_status":` + g.pick("529", "null") + `,"error":"overloaded","session_id":"` + sess + `","uuid":"x"}`
	case 18:
		return `{"type":"user","message":{"role":"user","content":` + g.pick(`"[Request interrupted by user]"`, `"<local-command-stdout>out</local-command-stdout>"`,
			`[{"type":"text","text":"prompt"}]`, `"<command-name>/x</command-name>"`, `null`, `7`) + `},"parent_tool_use_id":` + g.pick("null", `"toolu_t"`) +
			`,"session_id":"` + sess + `","uuid":"` + uuid + `","isReplay":` + g.pick("true", "false") + `}`
	case 19:
		return `{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"` + tool + `","message":"no","session_id":"` + sess + `","uuid":"d"}`
	case 20:
		return `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":` + g.pick("0", "1767225600", "-5") + `},"session_id":"` + sess + `"}`
	case 21:
		return `{"type":"assistant","message":{"id":"syn","model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}],"usage":{}},"parent_tool_use_id":null,"uuid":"` + uuid + `","error":"` + g.pick("", "server_error") + `","user_message_uuid":"p1","session_id":"` + sess + `"}`
	case 22:
		return g.pick(`{"type":"mystery"}`, `not json`, `{"type":"system","subtype":"new_thing"}`, `{"type":"control_response","response":{}}`)
	default:
		return `{"type":"command_lifecycle","command_uuid":"p1","state":"queued","uuid":"c"}`
	}
}

// FuzzAdapterSequences feeds generated sequences of well-formed messages, interleaved with the
// host's own calls (PromptSent, HandleInitialize, TurnState).
func FuzzAdapterSequences(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 0, 3, 4, 9, 0})
	f.Add([]byte("a quick brown fox jumps over the lazy dog 0123456789"))
	f.Add(bytes.Repeat([]byte{3, 4, 11, 13, 14, 9}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		rec := &recorder{}
		a, err := New(Config{Sink: rec, PartialMessages: len(data)%2 == 0, MaxPending: 6, ResumedSessionID: sess})
		if err != nil {
			t.Fatal(err)
		}
		results := 0
		for g.pos < len(g.data) {
			switch g.next() % 16 {
			case 0:
				a.PromptSent(g.pick("p1", "p2", ""), g.pick("prompt", "x"))
				continue
			case 1:
				a.HandleInitialize(claudecode.InitializeResponse{Commands: []claudecode.SlashCommand{{Name: g.pick("compact", "x"), Description: g.pick("d", "")}}})
				continue
			case 2:
				_ = a.TurnState()
				continue
			}
			line := g.line()
			rd := claudecode.NewReader(bytes.NewReader([]byte(line)))
			m, err := rd.ReadMessage()
			if err != nil {
				t.Fatalf("reading %q: %v", line, err)
			}
			if _, ok := m.(*claudecode.ResultMessage); ok {
				results++
			}
			a.Handle(m)
		}
		checkBounded(t, a)
		checkEventOrder(t, rec.evs, results)
		if n := len(a.commands); n > 3 {
			t.Fatalf("%d commands from a pool of 3 names", n)
		}
		last := ""
		for _, ev := range rec.evs {
			if ev.Type != events.TypeSessionStatus {
				continue
			}
			if ev.SessionID == last {
				t.Fatalf("session_status twice for session %q", last)
			}
			last = ev.SessionID
		}
	})
}
