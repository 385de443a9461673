package streamjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// recorder collects events.
type recorder struct{ evs []events.AgentEvent }

func (r *recorder) Emit(ev events.AgentEvent) { r.evs = append(r.evs, ev) }

func (r *recorder) ofType(typ events.Type) []events.AgentEvent {
	var out []events.AgentEvent
	for _, ev := range r.evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func (r *recorder) types() []events.Type {
	out := make([]events.Type, len(r.evs))
	for i, ev := range r.evs {
		out[i] = ev.Type
	}
	return out
}

func (r *recorder) reset() { r.evs = nil }

func newTestAdapter(t *testing.T, cfg Config) (*Adapter, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.Sink = rec
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, rec
}

// feed decodes each line as the CLI would have written it and hands it to the adapter.
func feed(t *testing.T, a *Adapter, lines ...string) {
	t.Helper()
	for _, l := range lines {
		m, err := claudecode.Decode([]byte(l))
		if err != nil {
			t.Fatalf("test line does not decode: %v\n%s", err, l)
		}
		a.Handle(m)
	}
}

const sess = "9d282941-196a-4e61-a404-d73ceb66ad91"

// Line builders shaped like the pinned CLI's output.

func initLine(session string, commands ...string) string {
	cmds, _ := json.Marshal(commands)
	return fmt.Sprintf(`{"type":"system","subtype":"init","cwd":"/w","session_id":%q,"tools":["Bash","Read"],"mcp_servers":[],"model":"claude-opus-5-5","permissionMode":"default","slash_commands":%s,"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.332","uuid":"init-%s"}`, session, cmds, session[:4])
}

func assistantLine(msgID, uuid, parent string, block string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"type":"assistant","message":{"id":%q,"type":"message","role":"assistant","model":"claude-opus-5-5","content":[%s],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":1,"cache_creation_input_tokens":10,"cache_read_input_tokens":5}},"parent_tool_use_id":%s,"session_id":%q,"uuid":%q}`, msgID, block, p, sess, uuid)
}

func textBlock(s string) string { return fmt.Sprintf(`{"type":"text","text":%q}`, s) }
func thinkBlock(s string) string {
	return fmt.Sprintf(`{"type":"thinking","thinking":%q,"signature":"sig"}`, s)
}
func toolUseBlock(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input)
}

func toolResultLine(uuid, toolID, parent, content string, isError bool, structured string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	s := ""
	if structured != "" {
		s = `,"tool_use_result":` + structured
	}
	return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":%q,"type":"tool_result","content":%q,"is_error":%v}]},"parent_tool_use_id":%s,"session_id":%q,"uuid":%q%s}`, toolID, content, isError, p, sess, uuid, s)
}

func streamLine(parent, event string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"type":"stream_event","event":%s,"session_id":%q,"parent_tool_use_id":%s,"uuid":"se-%d"}`, event, sess, p, len(event))
}

func messageStart(id string) string {
	return fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","model":"claude-opus-5-5","content":[],"usage":{"input_tokens":50,"output_tokens":1}}}`, id)
}

func textDelta(s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, s)
}

func thinkingDelta(s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":%q}}`, s)
}

// resultLine is a successful result; extra is spliced in (", …") to override or add fields.
func resultLine(uuid, text string, total, turnCost float64, extra string) string {
	return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"duration_ms":370,"duration_api_ms":100,"num_turns":1,"result":%q,"stop_reason":"end_turn","session_id":%q,"total_cost_usd":%v,"usage":{"input_tokens":50,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":20},"modelUsage":{"claude-opus-5-5":{"inputTokens":50,"outputTokens":20,"cacheReadInputTokens":5,"cacheCreationInputTokens":10,"costUSD":%v,"contextWindow":1000000}},"model_usage_since_last_result":{"claude-opus-5-5":{"inputTokens":50,"outputTokens":20,"cacheReadInputTokens":5,"cacheCreationInputTokens":10,"costUSD":%v,"contextWindow":1000000}},"permission_denials":[],"terminal_reason":"completed","uuid":%q%s}`, text, sess, total, total, turnCost, uuid, extra)
}

func TestNewRequiresSink(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a sink succeeded")
	}
	if _, err := New(Config{Sink: &recorder{}, PriorTotalCostUSD: -1}); err == nil {
		t.Fatal("New with a negative prior cost succeeded")
	}
}

func TestSessionStatusOncePerSession(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		resumed string
		inits   []string
		want    []events.SessionStatus
	}{
		{"new", "", []string{sess, sess, sess}, []events.SessionStatus{events.SessionNew}},
		{"resumed", sess, []string{sess, sess}, []events.SessionStatus{events.SessionResumed}},
		{"resumed elsewhere", "0000aaaa-0000-4000-8000-000000000000", []string{sess}, []events.SessionStatus{events.SessionNew}},
		{"id changes", sess, []string{sess, "1111bbbb-0000-4000-8000-000000000000", "1111bbbb-0000-4000-8000-000000000000"},
			[]events.SessionStatus{events.SessionResumed, events.SessionNew}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, rec := newTestAdapter(t, Config{ResumedSessionID: c.resumed})
			for _, id := range c.inits {
				feed(t, a, initLine(id, "compact"))
			}
			var got []events.SessionStatus
			for _, ev := range rec.ofType(events.TypeSessionStatus) {
				got = append(got, ev.Data.SessionStatus)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("session statuses %v, want %v", got, c.want)
			}
			if last := c.inits[len(c.inits)-1]; a.TurnState().SessionID != last {
				t.Errorf("session id %q, want %q", a.TurnState().SessionID, last)
			}
		})
	}
}

func TestAvailableCommandsDeduplicated(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	a.HandleInitialize(claudecode.InitializeResponse{Commands: []claudecode.SlashCommand{
		{Name: "compact", Description: "Clear history but keep a summary", ArgumentHint: "<instructions>"},
		{Name: "review", Description: "Review a pull request"},
	}})
	feed(t, a, initLine(sess, "compact", "review"), initLine(sess, "review", "compact"))
	a.HandleInitialize(claudecode.InitializeResponse{Commands: []claudecode.SlashCommand{{Name: "review", Description: "Review a pull request"}}})
	feed(t, a, initLine(sess, "compact", "review", "context"))

	got := rec.ofType(events.TypeAvailableCommands)
	if len(got) != 2 {
		t.Fatalf("%d available_commands events, want 2 (initialize, then the new /context): %+v", len(got), got)
	}
	want := []events.Command{
		{Name: "compact", Description: "Clear history but keep a summary", ArgumentHint: "<instructions>"},
		{Name: "review", Description: "Review a pull request"},
		{Name: "context"},
	}
	if !reflect.DeepEqual(got[1].AvailableCommands, want) {
		t.Errorf("commands %+v, want %+v", got[1].AvailableCommands, want)
	}
}

// chunks returns the concatenated message_chunk texts and the reasoning texts.
func chunks(rec *recorder) (text, reasoning string) {
	for _, ev := range rec.evs {
		switch ev.Type {
		case events.TypeMessageChunk:
			text += ev.Text + "|"
		case events.TypeReasoning:
			reasoning += ev.ReasoningText + "|"
		}
	}
	return text, reasoning
}

func TestTextComesFromOneSource(t *testing.T) {
	t.Parallel()
	// One turn as the CLI writes it with --include-partial-messages: deltas, then the frames
	// of the same message, then a subagent's frame (never streamed) and the result.
	turn := []string{
		initLine(sess),
		streamLine("", messageStart("msg_1")),
		streamLine("", thinkingDelta("Let me think.")),
		assistantLine("msg_1", "u-a1", "", thinkBlock("Let me think.")),
		streamLine("", textDelta("Hel")),
		streamLine("", textDelta("lo")),
		assistantLine("msg_1", "u-a2", "", textBlock("Hello")),
		assistantLine("msg_2", "u-s1", "toolu_p", textBlock("from the subagent")),
		resultLine("r1", "Hello", 0.001, 0.001, ""),
	}
	cases := []struct {
		partial       bool
		text, thought string
	}{
		{true, "Hel|lo|from the subagent|", "Let me think.|"},
		{false, "Hello|from the subagent|", "Let me think.|"},
	}
	for _, c := range cases {
		a, rec := newTestAdapter(t, Config{PartialMessages: c.partial})
		feed(t, a, turn...)
		text, thought := chunks(rec)
		if text != c.text || thought != c.thought {
			t.Errorf("partial=%v: text %q reasoning %q, want %q %q", c.partial, text, thought, c.text, c.thought)
		}
	}
}

func TestResultTextOnlyWhenNothingStreamed(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{PartialMessages: true})
	// A local command's turn: no model text at all, the output is only in the result.
	feed(t, a, initLine(sess), resultLine("r1", "Total cost: $0.00", 0, 0, `,"num_turns":0`))
	// A model turn: the text was emitted, the result repeats it.
	feed(t, a, initLine(sess), assistantLine("msg_1", "u1", "", textBlock("Done.")), resultLine("r2", "Done.", 0.1, 0.1, ""))
	// A subagent's text does not count as the main agent's.
	feed(t, a, initLine(sess), assistantLine("msg_2", "u2", "toolu_p", textBlock("sub")), resultLine("r3", "Main.", 0.2, 0.1, ""))
	text, _ := chunks(rec)
	if want := "Total cost: $0.00|Done.|sub|Main.|"; text != want {
		t.Errorf("text %q, want %q", text, want)
	}
}

func TestAPIErrorTextIsTheErrorNotAChunk(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{PartialMessages: true})
	feed(t, a,
		initLine(sess),
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":573,"error_status":500,"error":"server_error","session_id":"`+sess+`","uuid":"x"}`,
		`{"type":"assistant","message":{"id":"3bd3a440","container":null,"model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","type":"message","usage":{"input_tokens":0,"output_tokens":0},"content":[{"type":"text","text":"API Error: 500 boom."}]},"parent_tool_use_id":null,"session_id":"`+sess+`","uuid":"u-synth","error":"server_error","isApiErrorMessage":true,"api_error_status":500,"user_message_uuid":"11111111-1111-4111-8111-111111111111"}`,
		`{"type":"result","subtype":"success","is_error":true,"duration_ms":1027,"duration_api_ms":0,"num_turns":1,"result":"API Error: 500 boom.","stop_reason":"stop_sequence","session_id":"`+sess+`","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0},"modelUsage":{},"model_usage_since_last_result":{},"terminal_reason":"api_error","api_error_status":500,"uuid":"r1"}`,
	)
	if got := rec.ofType(events.TypeMessageChunk); len(got) != 0 {
		t.Errorf("API error text became chunks: %+v", got)
	}
	errs := rec.ofType(events.TypeError)
	if len(errs) != 1 || errs[0].Error.Kind != events.ErrorAPI || errs[0].Error.Message != "API Error: 500 boom." || errs[0].Error.APIErrorStatus != 500 {
		t.Fatalf("error events %+v", errs)
	}
	rl := rec.ofType(events.TypeRateLimit)
	if len(rl) != 1 || rl[0].RateLimit.ErrorStatus != 500 || rl[0].RateLimit.Attempt != 1 || rl[0].RateLimitMessage == "" {
		t.Errorf("rate_limit events %+v", rl)
	}
	// The prompt the CLI adopted is the resume point; the synthetic message is not.
	if got := a.TurnState().LastMessageUUID; got != "11111111-1111-4111-8111-111111111111" {
		t.Errorf("resume point %q", got)
	}
	// error comes right before complete, which ends the turn.
	types := rec.types()
	if types[len(types)-2] != events.TypeError || types[len(types)-1] != events.TypeComplete {
		t.Errorf("event order %v", types)
	}
}

func TestToolCallsAndResults(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		initLine(sess),
		assistantLine("msg_1", "u1", "", toolUseBlock("toolu_1", "Edit", `{"file_path":"a.txt","old_string":"line2","new_string":"LINE2"}`)),
		toolResultLine("u2", "toolu_1", "", "The file a.txt has been updated successfully.", false,
			`{"filePath":"a.txt","oldString":"line2","newString":"LINE2","structuredPatch":[{"oldStart":1,"oldLines":3,"newStart":1,"newLines":3,"lines":[" line1","-line2","+LINE2"," line3"]}]}`),
		toolResultLine("u3", "toolu_unknown", "", "stray", false, ""),
	)
	calls, updates := rec.ofType(events.TypeToolCall), rec.ofType(events.TypeToolUpdate)
	if len(calls) != 1 || len(updates) != 1 {
		t.Fatalf("%d calls, %d updates; want 1 and 1 (a result for an unknown call is ignored)", len(calls), len(updates))
	}
	c, u := calls[0], updates[0]
	if c.ToolStatus != events.ToolRunning || c.ToolTitle != "Edit a.txt" || c.Normalized.ModifyFile.Mutations[0].Diff != "" {
		t.Errorf("tool_call %+v", c)
	}
	wantDiff := "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n line1\n-line2\n+LINE2\n line3\n"
	if u.ToolStatus != events.ToolComplete || u.Normalized.ModifyFile.Mutations[0].Diff != wantDiff {
		t.Errorf("tool_update %+v", u.Normalized.ModifyFile)
	}
	if c.Normalized == u.Normalized {
		t.Error("tool_call and tool_update share a payload: the update changed an emitted event")
	}
}

func TestDanglingToolsClosedAtResult(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		initLine(sess),
		assistantLine("msg_1", "u1", "", toolUseBlock("toolu_b", "Bash", `{"command":"sleep 1"}`)),
		assistantLine("msg_1", "u2", "", toolUseBlock("toolu_a", "Read", `{"file_path":"x"}`)),
		assistantLine("msg_2", "u3", "toolu_task", toolUseBlock("toolu_sub", "Bash", `{"command":"echo sub"}`)),
		`{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":10,"num_turns":1,"session_id":"`+sess+`","total_cost_usd":0.01,"usage":{},"modelUsage":{},"model_usage_since_last_result":{},"terminal_reason":"aborted_tools","errors":["[ede_diagnostic] result_type=user"],"uuid":"r1"}`,
	)
	var closed []string
	for _, ev := range rec.ofType(events.TypeToolUpdate) {
		if ev.ToolStatus != events.ToolError || !strings.HasPrefix(ev.ToolError, "no result") {
			t.Errorf("dangling call closed as %s %q", ev.ToolStatus, ev.ToolError)
		}
		closed = append(closed, ev.ToolCallID)
	}
	if !reflect.DeepEqual(closed, []string{"toolu_a", "toolu_b"}) {
		t.Errorf("closed %v, want the main agent's calls in id order", closed)
	}
	errs := rec.ofType(events.TypeError)
	if len(errs) != 1 || errs[0].Error.Kind != events.ErrorInterrupted {
		t.Errorf("errors %+v", errs)
	}
	// The subagent's call outlives the turn and ends with its task.
	rec.reset()
	feed(t, a, `{"type":"system","subtype":"task_notification","task_id":"agent1","tool_use_id":"toolu_task","status":"completed","summary":"done","session_id":"`+sess+`","uuid":"n1"}`)
	types := rec.types()
	if len(types) != 2 || types[0] != events.TypeSubagentTask || types[1] != events.TypeToolUpdate || rec.evs[1].ToolCallID != "toolu_sub" {
		t.Errorf("after the task ended: %+v", rec.evs)
	}
	if len(a.tools) != 0 {
		t.Errorf("%d tool calls still open", len(a.tools))
	}
}

func TestDanglingToolCompleteOnSuccess(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a, initLine(sess),
		assistantLine("msg_1", "u1", "", toolUseBlock("toolu_1", "Bash", `{"command":"true"}`)),
		resultLine("r1", "", 0, 0, ""))
	u := rec.ofType(events.TypeToolUpdate)
	if len(u) != 1 || u[0].ToolStatus != events.ToolComplete || u[0].ToolError != "" {
		t.Errorf("tool_update %+v", u)
	}
}

func TestResumePoint(t *testing.T) {
	t.Parallel()
	prompt := "11111111-1111-4111-8111-111111111111"
	a, _ := newTestAdapter(t, Config{PartialMessages: true})
	step := func(line, want string) {
		t.Helper()
		feed(t, a, line)
		if got := a.TurnState().LastMessageUUID; got != want {
			t.Errorf("after %.60s…: resume point %q, want %q", line, got, want)
		}
	}
	step(initLine(sess), "")
	// Our prompt's echo: a user entry, safe at once.
	step(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"do it"}]},"session_id":"`+sess+`","parent_tool_use_id":null,"uuid":"`+prompt+`","isReplay":true}`, prompt)
	// Stream events' uuids are not entries.
	step(streamLine("", messageStart("msg_1")), prompt)
	// Assistant entries wait for the result.
	step(assistantLine("msg_1", "u-a1", "", toolUseBlock("toolu_1", "Bash", `{"command":"ls"}`)), prompt)
	// A tool result is a user entry: safe at once.
	step(toolResultLine("u-tr1", "toolu_1", "", "a.txt", false, `{"stdout":"a.txt","stderr":"","interrupted":false}`), "u-tr1")
	// Subagent entries never count.
	step(assistantLine("msg_s", "u-sub", "toolu_task", textBlock("sub")), "u-tr1")
	step(toolResultLine("u-subtr", "toolu_x", "toolu_task", "x", false, ""), "u-tr1")
	step(assistantLine("msg_2", "u-a2", "", textBlock("Done.")), "u-tr1")
	// The result confirms the pending assistant entry; its own uuid is not an entry.
	step(resultLine("r1", "Done.", 0.1, 0.1, ""), "u-a2")
	if c := a.TurnState().Last; c == nil || c.LastMessageUUID != "u-a2" || c.ResultUUID != "r1" {
		t.Errorf("completion %+v", c)
	}

	// A failed turn drops its pending assistant entries; its user entries stay.
	step(initLine(sess), "u-a2")
	step(assistantLine("msg_3", "u-a3", "", textBlock("partial")), "u-a2")
	step(`{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":5,"num_turns":1,"session_id":"`+sess+`","total_cost_usd":0.1,"usage":{},"modelUsage":{},"terminal_reason":"aborted_streaming","uuid":"r2"}`, "u-a2")
	step(initLine(sess), "u-a2")
	step(assistantLine("msg_4", "u-a4", "", toolUseBlock("toolu_2", "Bash", `{"command":"ls"}`)), "u-a2")
	step(toolResultLine("u-tr2", "toolu_2", "", "ok", false, ""), "u-tr2")
	step(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"parent_tool_use_id":null,"session_id":"`+sess+`","uuid":"u-int"}`, "u-int")
	step(`{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":5,"num_turns":1,"session_id":"`+sess+`","total_cost_usd":0.1,"usage":{},"modelUsage":{},"terminal_reason":"aborted_tools","uuid":"r3"}`, "u-int")

	// Without prompt echoes, the prompt is known from the first assistant frame that names it.
	step(initLine(sess), "u-int")
	adopted := "22222222-2222-4222-8222-222222222222"
	line := strings.Replace(assistantLine("msg_5", "u-a5", "", textBlock("hi")), `"uuid":"u-a5"`, `"uuid":"u-a5","user_message_uuid":"`+adopted+`"`, 1)
	step(line, adopted)
	step(resultLine("r4", "hi", 0.2, 0.1, ""), "u-a5")

	// The CLI's synthetic messages (local command output) are not resume points.
	step(initLine(sess), "u-a5")
	step(`{"type":"assistant","message":{"id":"c9b1","model":"<synthetic>","role":"assistant","type":"message","usage":{"input_tokens":0,"output_tokens":0},"content":[{"type":"text","text":"## Context Usage"}]},"parent_tool_use_id":null,"session_id":"`+sess+`","uuid":"u-synth"}`, "u-a5")
	step(resultLine("r5", "## Context Usage", 0.2, 0, ""), "u-a5")
}

func TestTurnCosts(t *testing.T) {
	t.Parallel()
	t.Run("per-turn usage", func(t *testing.T) {
		t.Parallel()
		a, rec := newTestAdapter(t, Config{PriorTotalCostUSD: 5})
		feed(t, a,
			initLine(sess), resultLine("r1", "a", 5.5, 0.5, ""),
			initLine(sess), resultLine("r2", "b", 5.75, 0.25, ""))
		var costs []float64
		for _, ev := range rec.ofType(events.TypeComplete) {
			costs = append(costs, ev.Data.CostUSD)
			if ev.Data.InputTokens != 50 || ev.Data.OutputTokens != 20 || ev.Data.CacheCreationInputTokens != 10 || ev.Data.CacheReadInputTokens != 5 {
				t.Errorf("tokens %+v", ev.Data.Completion)
			}
		}
		if !reflect.DeepEqual(costs, []float64{0.5, 0.25}) {
			t.Errorf("costs %v", costs)
		}
	})
	t.Run("several models", func(t *testing.T) {
		t.Parallel()
		a, rec := newTestAdapter(t, Config{})
		feed(t, a, `{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"ok","session_id":"`+sess+`","total_cost_usd":0.75,"usage":{"input_tokens":100,"output_tokens":40},"modelUsage":{},"model_usage_since_last_result":{"claude-opus-5-5":{"inputTokens":150,"outputTokens":60,"costUSD":0.5},"claude-haiku-5":{"inputTokens":10,"outputTokens":5,"costUSD":0.25}},"uuid":"r1"}`)
		c := rec.ofType(events.TypeComplete)[0].Data.Completion
		if c.CostUSD != 0.75 || c.InputTokens != 160 || c.OutputTokens != 65 || len(c.Models) != 2 || c.Models["claude-haiku-5"].CostUSD != 0.25 {
			t.Errorf("completion %+v", c)
		}
	})
	t.Run("running totals only", func(t *testing.T) {
		t.Parallel()
		// Without model_usage_since_last_result the cost is the growth of the running total,
		// which continues from the host's prior total across --resume.
		a, rec := newTestAdapter(t, Config{PriorTotalCostUSD: 1.0})
		line := func(uuid string, total float64) string {
			return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"x","session_id":%q,"total_cost_usd":%v,"usage":{"input_tokens":7,"output_tokens":3},"uuid":%q}`, sess, total, uuid)
		}
		feed(t, a, line("r1", 1.25), line("r2", 1.5),
			// A rejected resume reports a zeroed total: it costs nothing.
			`{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"`+sess+`","total_cost_usd":0,"usage":{},"modelUsage":{},"errors":["No conversation found with session ID: x"],"uuid":"r3"}`,
			line("r4", 2.0))
		var costs []float64
		for _, ev := range rec.ofType(events.TypeComplete) {
			costs = append(costs, ev.Data.CostUSD)
		}
		if !reflect.DeepEqual(costs, []float64{0.25, 0.25, 0, 0.5}) {
			t.Errorf("costs %v", costs)
		}
		if c := rec.ofType(events.TypeComplete)[0].Data; c.InputTokens != 7 || c.OutputTokens != 3 {
			t.Errorf("tokens %+v", c.Completion)
		}
	})
}

func TestResultErrorKinds(t *testing.T) {
	t.Parallel()
	base := `"session_id":"` + sess + `","total_cost_usd":0,"usage":{},"uuid":"r"`
	cases := []struct {
		line string
		kind events.ErrorKind
		msg  string
	}{
		{`{"type":"result","subtype":"error_max_turns","is_error":true,"terminal_reason":"max_turns","errors":["Reached maximum number of turns (2)"],` + base + `}`,
			events.ErrorMaxTurns, "Reached maximum number of turns (2)"},
		{`{"type":"result","subtype":"error_max_budget_usd","is_error":true,"errors":[],` + base + `}`,
			events.ErrorMaxBudget, "reached the maximum budget"},
		{`{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_streaming","errors":["[ede_diagnostic] x"],` + base + `}`,
			events.ErrorInterrupted, "the turn was interrupted"},
		{`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 overloaded","terminal_reason":"api_error","api_error_status":529,` + base + `}`,
			events.ErrorAPI, "API Error: 529 overloaded"},
		{`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No message found with message.uuid of: bbbb"],` + base + `}`,
			events.ErrorResumeRejected, "No message found with message.uuid of: bbbb"},
		{`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: x"],` + base + `}`,
			events.ErrorResumeRejected, "No conversation found with session ID: x"},
		{`{"type":"result","subtype":"error_max_structured_output_retries","is_error":true,` + base + `}`,
			events.ErrorExecution, "the turn failed (error_max_structured_output_retries)"},
	}
	for _, c := range cases {
		a, rec := newTestAdapter(t, Config{})
		feed(t, a, c.line)
		errs := rec.ofType(events.TypeError)
		if len(errs) != 1 || errs[0].Error.Kind != c.kind || errs[0].Error.Message != c.msg {
			t.Errorf("%s:\n got %+v\nwant kind %s message %q", c.line, errs, c.kind, c.msg)
		}
	}
}

func TestContextWindow(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		initLine(sess),
		assistantLine("msg_1", "u1", "", textBlock("a")),
		assistantLine("msg_1", "u2", "", toolUseBlock("toolu_1", "Bash", `{"command":"ls"}`)), // same message: no new event
		assistantLine("msg_s", "u3", "toolu_p", textBlock("sub")),                             // subagent usage is not the main context
		resultLine("r1", "a", 0.1, 0.1, ""),
	)
	got := rec.ofType(events.TypeContextWindow)
	// No size is guessed: the first event comes when the result reveals the model's window.
	want := []events.ContextWindow{withModel(events.NewContextWindow(1000000, 66), "claude-opus-5-5")}
	if len(got) != len(want) {
		t.Fatalf("%d context_window events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if *got[i].ContextWindow != want[i] {
			t.Errorf("context_window %d: %+v, want %+v", i, *got[i].ContextWindow, want[i])
		}
	}

	// A window the host learnt from the CLI (get_context_usage) is there from the first frame.
	a2, rec2 := newTestAdapter(t, Config{})
	a2.SetContextWindow("", 500000)
	feed(t, a2, initLine(sess), assistantLine("msg_1", "u1", "", textBlock("a")))
	if cw := rec2.ofType(events.TypeContextWindow); len(cw) != 1 || cw[0].ContextWindow.Size != 500000 || cw[0].ContextWindow.Model != "claude-opus-5-5" {
		t.Errorf("window from the host: %+v", cw)
	}
	a3, rec3 := newTestAdapter(t, Config{ContextWindowSize: 400000})
	feed(t, a3, assistantLine("msg_1", "u1", "", textBlock("a")))
	if cw := rec3.ofType(events.TypeContextWindow); len(cw) != 1 || cw[0].ContextWindow.Size != 400000 {
		t.Errorf("configured window: %+v", cw)
	}
}

func withModel(cw *events.ContextWindow, model string) events.ContextWindow {
	cw.Model = model
	return *cw
}

func TestPermissionEvents(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		initLine(sess),
		`{"type":"system","subtype":"task_started","task_id":"agent1","tool_use_id":"toolu_task","description":"Investigate","task_type":"local_agent","session_id":"`+sess+`","uuid":"t1"}`,
		`{"type":"control_request","request_id":"req-1","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"rm -rf /tmp/x"},"description":"rm -rf /tmp/x","permission_suggestions":[{"type":"addDirectories","directories":["/tmp"],"destination":"session"}],"blocked_path":"/tmp/x","decision_reason":"\u001b[1mPath\u001b[0m is outside allowed working directories","decision_reason_type":"workingDir","tool_use_id":"toolu_1","agent_id":"agent1"}}`,
		`{"type":"control_request","request_id":"hook-1","request":{"subtype":"hook_callback","callback_id":"tool_approval","input":{"hook_event_name":"PreToolUse","tool_name":"Bash"},"tool_use_id":"toolu_2"}}`,
		`{"type":"control_cancel_request","request_id":"hook-1"}`,
		`{"type":"control_cancel_request","request_id":"req-1"}`,
		`{"type":"control_cancel_request","request_id":"req-routed-elsewhere"}`,
		`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"allow"}}}`,
		`{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"toolu_3","message":"Claude requested permissions to write to /w/x, but you haven't granted it yet.","uuid":"pd","session_id":"`+sess+`"}`,
	)
	reqs := rec.ofType(events.TypePermissionRequest)
	if len(reqs) != 1 {
		t.Fatalf("permission requests %+v", reqs)
	}
	r := reqs[0]
	if r.PendingID != "req-1" || r.ToolCallID != "toolu_1" || r.ToolTitle != "Run `rm -rf /tmp/x`" || r.Normalized.ShellExec.Command != "rm -rf /tmp/x" ||
		r.ParentToolCallID != "toolu_task" || r.Permission.BlockedPath != "/tmp/x" ||
		r.Permission.DecisionReason != "Path is outside allowed working directories" ||
		string(r.Permission.Suggestions) != `[{"type":"addDirectories","directories":["/tmp"],"destination":"session"}]` {
		t.Errorf("permission_request %+v %+v", r, r.Permission)
	}
	var cancelled []string
	for _, ev := range rec.ofType(events.TypePermissionCancelled) {
		cancelled = append(cancelled, ev.PendingID)
	}
	if !reflect.DeepEqual(cancelled, []string{"req-1", "req-routed-elsewhere"}) {
		t.Errorf("cancelled %v (a hook callback's cancel is not a permission)", cancelled)
	}
	denied := rec.ofType(events.TypePermissionDenied)
	if len(denied) != 1 || denied[0].ToolName != "Write" || denied[0].ToolCallID != "toolu_3" || !strings.HasPrefix(denied[0].Permission.Message, "Claude requested") {
		t.Errorf("permission_denied %+v", denied)
	}
}

func TestRateLimitEvent(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a, `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1767225600,"rateLimitType":"five_hour","utilization":0.9},"uuid":"x","session_id":"`+sess+`"}`)
	rl := rec.ofType(events.TypeRateLimit)
	if len(rl) != 1 {
		t.Fatalf("%+v", rec.evs)
	}
	want := events.RateLimit{Source: events.RateLimitSourceEvent, Status: "allowed_warning", ResetsAt: 1767225600, RateLimitType: "five_hour", Utilization: 0.9}
	if *rl[0].RateLimit != want || rl[0].RateLimitMessage != "Rate limit status: allowed_warning (five_hour), resets at 2026-01-01T00:00:00Z" {
		t.Errorf("rate_limit %+v %q", *rl[0].RateLimit, rl[0].RateLimitMessage)
	}
}

func TestCompactionEvents(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		`{"type":"system","subtype":"status","status":"compacting","session_id":"`+sess+`","uuid":"s1"}`,
		`{"type":"system","subtype":"status","status":"compacting","session_id":"`+sess+`","uuid":"s1b"}`,
		`{"type":"system","subtype":"status","status":null,"compact_result":"success","session_id":"`+sess+`","uuid":"s2"}`,
		initLine(sess),
		`{"type":"system","subtype":"compact_boundary","session_id":"`+sess+`","uuid":"b1","compact_metadata":{"trigger":"manual","pre_tokens":85,"post_tokens":2552,"duration_ms":187}}`,
		`{"type":"system","subtype":"status","status":"compacting","session_id":"`+sess+`","uuid":"s3"}`,
		`{"type":"system","subtype":"status","status":null,"compact_result":"failed","compact_error":"Error during compaction: summarization produced empty response","session_id":"`+sess+`","uuid":"s4"}`,
	)
	var got []events.Compaction
	for _, ev := range rec.ofType(events.TypeCompaction) {
		got = append(got, *ev.Compaction)
	}
	want := []events.Compaction{
		{Phase: events.CompactionStarted},
		{Phase: events.CompactionFinished, Trigger: "manual", PreTokens: 85, PostTokens: 2552, Result: "success"},
		{Phase: events.CompactionStarted},
		{Phase: events.CompactionFinished, Result: "failed", Error: "Error during compaction: summarization produced empty response"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("compaction events\n got %+v\nwant %+v", got, want)
	}
}

func TestSubagentTaskEvents(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		`{"type":"system","subtype":"task_started","task_id":"aee8","run_id":"r","tool_use_id":"toolu_42","description":"Investigate","subagent_type":"general-purpose","is_backgrounded":true,"task_type":"local_agent","prompt":"p","uuid":"1","session_id":"`+sess+`"}`,
		`{"type":"system","subtype":"task_progress","task_id":"aee8","tool_use_id":"toolu_42","description":"Running echo from-sub","usage":{"total_tokens":66,"tool_uses":1,"duration_ms":259},"last_tool_name":"Bash","uuid":"2","session_id":"`+sess+`"}`,
		`{"type":"system","subtype":"task_updated","task_id":"aee8","patch":{"status":"completed","end_time":1796228725183},"uuid":"3","session_id":"`+sess+`"}`,
		`{"type":"system","subtype":"task_notification","task_id":"aee8","tool_use_id":"toolu_42","status":"completed","summary":"sub result text","usage":{"total_tokens":85},"uuid":"4","session_id":"`+sess+`"}`,
		`{"type":"system","subtype":"task_updated","task_id":"aee8","patch":{"status":"killed"},"uuid":"5","session_id":"`+sess+`"}`,
	)
	var got []string
	for _, ev := range rec.ofType(events.TypeSubagentTask) {
		s := ev.Subagent
		got = append(got, strings.Join([]string{ev.ToolCallID, s.Phase, s.TaskID, s.TaskType, s.Description, s.Status, s.Summary, s.LastToolName, string(s.Usage)}, "|"))
	}
	want := []string{
		"toolu_42|task_started|aee8|local_agent|Investigate||||",
		`toolu_42|task_progress|aee8||Running echo from-sub|||Bash|{"total_tokens":66,"tool_uses":1,"duration_ms":259}`,
		"toolu_42|task_updated|aee8|||completed|||",
		`toolu_42|task_notification|aee8|||completed|sub result text||{"total_tokens":85}`,
		"|task_updated|aee8|||killed|||", // the task was forgotten at its notification
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("subagent events\n got %q\nwant %q", got, want)
	}
}

func TestPromptEchoes(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	echo := func(uuid, content string) string {
		return `{"type":"user","message":{"role":"user","content":` + content + `},"session_id":"` + sess + `","parent_tool_use_id":null,"uuid":"` + uuid + `","isReplay":true}`
	}
	a.PromptSent("p1", "first")
	a.PromptSent("", "no uuid")
	feed(t, a,
		initLine(sess),
		echo("p1", `[{"type":"text","text":"first"}]`),
		echo("cli-assigned", `"no uuid"`),
		echo("p3", `"not announced"`),
		echo("p4", `"<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args>focus on tests</command-args>"`),
		echo("p5", `"<local-command-stdout>Compacted </local-command-stdout>"`),
		`{"type":"user","message":{"role":"user","content":"This session is being continued from a previous conversation."},"session_id":"`+sess+`","parent_tool_use_id":null,"uuid":"syn","isReplay":false,"isSynthetic":true}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"subagent prompt"}]},"parent_tool_use_id":"toolu_t","agent_id":"a1","session_id":"`+sess+`","uuid":"sub"}`,
	)
	var got []string
	for _, ev := range rec.evs {
		switch ev.Type {
		case events.TypeUserMessage:
			got = append(got, "user:"+ev.UUID+":"+ev.Text)
		case events.TypeMessageChunk:
			got = append(got, "chunk:"+ev.Text)
		}
	}
	want := []string{"user:p1:first", "user::no uuid", "user:p3:not announced", "user:p4:/compact focus on tests", "chunk:Compacted"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestInterruptedOncePerTurn(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	note := `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},"parent_tool_use_id":null,"session_id":"` + sess + `","uuid":"n1"}`
	feed(t, a, initLine(sess), note, note, resultLine("r", "", 0, 0, ""), initLine(sess), note)
	if n := len(rec.ofType(events.TypeInterrupted)); n != 2 {
		t.Errorf("%d interrupted events, want one per turn (2)", n)
	}
}

func TestIgnoresUnknownAndReportsMalformed(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{})
	feed(t, a,
		`{"type":"future_thing","x":1}`,
		`{"type":"system","subtype":"background_tasks_changed","tasks":[],"uuid":"x","session_id":"`+sess+`"}`,
		`{"type":"system","subtype":"thinking_tokens","estimated_tokens":4,"session_id":"`+sess+`","uuid":"y"}`,
		`{"type":"command_lifecycle","command_uuid":"c","state":"queued","uuid":"z","session_id":"`+sess+`"}`,
		`{"type":"control_response","response":{"subtype":"success","request_id":"int-1","response":{"still_queued":[]}}}`,
		`{"type":"system","subtype":"hook_started","hook_id":"h","hook_name":"n","hook_event":"Stop","session_id":"`+sess+`","uuid":"h1"}`,
		`{"type":"system","subtype":"status","status":"requesting","session_id":"`+sess+`","uuid":"s"}`,
		`{"type":"control_request","request_id":"q","request":{"subtype":"mcp_message","server_name":"s"}}`,
	)
	if len(rec.evs) != 0 {
		t.Errorf("unknown or uninteresting messages produced events: %+v", rec.evs)
	}
	rd := claudecode.NewReader(strings.NewReader("not json\n"))
	m, err := rd.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	a.Handle(m)
	a.Handle(nil)
	errs := rec.ofType(events.TypeError)
	if len(errs) != 1 || errs[0].Error.Kind != events.ErrorProtocol || !strings.Contains(errs[0].Error.Message, "line 1") {
		t.Errorf("malformed line: %+v", rec.evs)
	}
	if a.TurnState().SessionID != sess {
		t.Errorf("session id not learned from ignored messages: %q", a.TurnState().SessionID)
	}
}

func TestClockStampsEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, rec := newTestAdapter(t, Config{Clock: func() time.Time { return at }})
	feed(t, a, initLine(sess))
	a2, rec2 := newTestAdapter(t, Config{})
	feed(t, a2, initLine(sess))
	if len(rec.evs) == 0 || !rec.evs[0].Time.Equal(at) || !rec2.evs[0].Time.IsZero() {
		t.Errorf("times %v / %v", rec.evs, rec2.evs)
	}
}

func TestPendingBounded(t *testing.T) {
	t.Parallel()
	a, rec := newTestAdapter(t, Config{MaxPending: 4})
	for i := range 10 {
		feed(t, a, assistantLine(fmt.Sprintf("m%d", i), "u", "toolu_task", toolUseBlock(fmt.Sprintf("toolu_%02d", i), "Bash", `{"command":"x"}`)))
		if len(a.tools) > 4 {
			t.Fatalf("%d open tool calls with MaxPending 4", len(a.tools))
		}
	}
	if n := len(rec.ofType(events.TypeToolUpdate)); n != 8 {
		t.Errorf("%d calls given up, want 8", n)
	}
	for i := range 10 {
		a.PromptSent(fmt.Sprintf("p%d", i), "x")
	}
	if len(a.prompts) > 4 {
		t.Errorf("%d remembered prompts with MaxPending 4", len(a.prompts))
	}
}

func TestTurnStateInTurn(t *testing.T) {
	t.Parallel()
	a, _ := newTestAdapter(t, Config{})
	if ts := a.TurnState(); ts.InTurn || ts.Last != nil {
		t.Errorf("fresh adapter %+v", ts)
	}
	feed(t, a, initLine(sess))
	if !a.TurnState().InTurn {
		t.Error("not in a turn after init")
	}
	feed(t, a, resultLine("r1", "x", 0.5, 0.5, ""))
	ts := a.TurnState()
	if ts.InTurn || ts.Last == nil || ts.Last.CostUSD != 0.5 {
		t.Errorf("after result %+v", ts)
	}
	ts.Last.CostUSD = 99
	if a.TurnState().Last.CostUSD != 0.5 {
		t.Error("TurnState exposes the adapter's own completion")
	}
	// A background subagent speaking after the result does not start a turn.
	feed(t, a, assistantLine("msg_s", "u-s", "toolu_task", textBlock("still working")),
		toolResultLine("u-st", "toolu_x", "toolu_task", "x", false, ""))
	if a.TurnState().InTurn {
		t.Error("a subagent's messages started a turn")
	}
	feed(t, a, toolResultLine("u-main", "toolu_y", "", "x", false, ""))
	if !a.TurnState().InTurn {
		t.Error("a main-agent message did not start a turn")
	}
}
