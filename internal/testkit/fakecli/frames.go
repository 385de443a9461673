package fakecli

import (
	"encoding/json"
	"fmt"
)

// Model is the model the scripted CLI reports.
const Model = "claude-opus-5-5"

// Init writes system/init, as the CLI does at the start of every turn.
func (c *CLI) Init() {
	c.Writef(`{"type":"system","subtype":"init","cwd":%q,"session_id":%q,"tools":["Bash","Read","Write","Edit"],"mcp_servers":[],"model":%q,"permissionMode":"bypassPermissions","slash_commands":["review"],"claude_code_version":"2.1.332","uuid":%q}`,
		c.Cmd.Dir, c.SessionID, Model, NewUUID())
}

// Text writes one assistant text frame and returns its transcript uuid.
func (c *CLI) Text(msgID, text string) string {
	u := NewUUID()
	c.Writef(`{"type":"assistant","message":{"id":%q,"type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%s}],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}},"parent_tool_use_id":null,"session_id":%q,"uuid":%q}`,
		msgID, Model, quote(text), c.SessionID, u)
	return u
}

// ToolUse writes an assistant frame calling a tool and returns its transcript uuid.
func (c *CLI) ToolUse(msgID, toolUseID, name string, input any) string {
	u := NewUUID()
	in, _ := json.Marshal(input)
	c.Writef(`{"type":"assistant","message":{"id":%q,"type":"message","role":"assistant","model":%q,"content":[{"type":"tool_use","id":%q,"name":%q,"input":%s}],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}},"parent_tool_use_id":null,"session_id":%q,"uuid":%q}`,
		msgID, Model, toolUseID, name, in, c.SessionID, u)
	return u
}

// ToolResult writes the user frame carrying a tool's result and returns its uuid.
func (c *CLI) ToolResult(toolUseID, content string, isError bool) string {
	u := NewUUID()
	c.Writef(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":%q,"type":"tool_result","content":%s,"is_error":%t}]},"parent_tool_use_id":null,"session_id":%q,"uuid":%q,"tool_use_result":{"stdout":%s,"stderr":"","interrupted":false}}`,
		toolUseID, quote(content), isError, c.SessionID, u, quote(content))
	return u
}

// InterruptNote writes the user frame the CLI records when a turn is interrupted, and returns
// its uuid.
func (c *CLI) InterruptNote() string {
	u := NewUUID()
	c.Writef(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"parent_tool_use_id":null,"session_id":%q,"uuid":%q}`,
		c.SessionID, u)
	return u
}

// Interrupted ends a turn the way the CLI ends an interrupted one: the note, then the result.
func (c *CLI) InterruptedResult(u Usage) {
	c.InterruptNote()
	c.ErrorResult("error_during_execution", "aborted_streaming", "", 0, u)
}

// APIRetry writes system/api_retry: the CLI will retry the API after delayMS.
func (c *CLI) APIRetry(status, delayMS int) {
	c.Writef(`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":%d,"error_status":%d,"error":"rate_limit","session_id":%q,"uuid":%q}`,
		delayMS, status, c.SessionID, NewUUID())
}

// Usage is what a result reports for its turn.
type Usage struct {
	CostUSD              float64
	InputTokens          int64
	OutputTokens         int64
	CacheReadTokens      int64
	CacheCreationTokens  int64
	ContextWindow        int64
	TotalCostUSD         float64 // the running total; defaults to CostUSD
	SinceLastResultUsage bool    // report model_usage_since_last_result (the real CLI does)
}

// DefaultUsage is a turn's usage in scripts that do not care.
var DefaultUsage = Usage{CostUSD: 0.01, InputTokens: 100, OutputTokens: 5, CacheReadTokens: 40, CacheCreationTokens: 20,
	ContextWindow: 1_000_000, SinceLastResultUsage: true}

func (u Usage) modelUsage() string {
	return fmt.Sprintf(`{%q:{"inputTokens":%d,"outputTokens":%d,"cacheReadInputTokens":%d,"cacheCreationInputTokens":%d,"webSearchRequests":0,"costUSD":%v,"contextWindow":%d,"maxOutputTokens":128000}}`,
		Model, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens, u.CostUSD, u.ContextWindow)
}

// Result writes a successful result whose text is text.
func (c *CLI) Result(text string, u Usage) {
	c.result(false, "success", "completed", text, "", u)
}

// ErrorResult writes a failed result: subtype success with an API error (status > 0), or an
// error subtype (error_during_execution, error_max_turns …) with terminalReason.
func (c *CLI) ErrorResult(subtype, terminalReason, message string, apiStatus int, u Usage) {
	apiErr := "null"
	if apiStatus > 0 {
		apiErr = fmt.Sprint(apiStatus)
	}
	c.result(true, subtype, terminalReason, message, apiErr, u)
}

func (c *CLI) result(isError bool, subtype, terminalReason, text, apiErr string, u Usage) {
	if apiErr == "" {
		apiErr = "null"
	}
	total := u.TotalCostUSD
	if total == 0 {
		total = u.CostUSD
	}
	since := ""
	if u.SinceLastResultUsage {
		since = `,"model_usage_since_last_result":` + u.modelUsage()
	}
	resultField := ""
	if subtype == "success" {
		resultField = `,"result":` + quote(text)
	} else if text != "" {
		resultField = `,"errors":[` + quote(text) + `]`
	}
	c.Writef(`{"type":"result","subtype":%q,"is_error":%t,"duration_ms":12,"duration_api_ms":10,"num_turns":1%s,"session_id":%q,"total_cost_usd":%v,"usage":{"input_tokens":%d,"output_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d},"modelUsage":%s%s,"terminal_reason":%q,"api_error_status":%s,"permission_denials":[],"uuid":%q}`,
		subtype, isError, resultField, c.SessionID, total, u.InputTokens, u.OutputTokens, u.CacheCreationTokens, u.CacheReadTokens,
		u.modelUsage(), since, terminalReason, apiErr, NewUUID())
}

// Reply runs a plain successful turn: init, one text frame, a result.
func (c *CLI) Reply(text string) {
	c.Init()
	c.Text("msg_"+NewUUID()[:8], text)
	c.Result(text, DefaultUsage)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
