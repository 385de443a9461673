package claudecode

import (
	"encoding/json"

	"github.com/drover-run/drover/claudecode/internal/jsonscan"
)

// Each wire type reads itself from a jsonscan.Decoder standing on its value, in one pass: the
// decoder checks the syntax of every byte, fields of this package's types are decoded as they come,
// and the rest is skipped without being built. Raw fields are slices of the line. A value of an
// unexpected JSON type leaves its field as it was.

// field decodes the members every system message carries. It reports whether key was one of them.
func (h *SystemHeader) field(d *jsonscan.Decoder, key []byte) bool {
	switch string(key) {
	case "subtype":
		d.Name(&h.Subtype)
	case "uuid":
		d.Str(&h.UUID)
	case "session_id":
		d.Name(&h.SessionID)
	default:
		return false
	}
	return true
}

func (m *SystemInit) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "cwd":
			d.Name(&m.CWD)
		case "model":
			d.Name(&m.Model)
		case "tools":
			m.Tools = d.Strings(m.Tools)
		case "slash_commands":
			m.SlashCommands = d.Strings(m.SlashCommands)
		case "permissionMode":
			d.Name(&m.PermissionMode)
		case "mcp_servers":
			m.MCPServers = decodeSlice(d, m.MCPServers, (*MCPServerStatus).decode)
		case "claude_code_version":
			d.Name(&m.ClaudeCodeVersion)
		case "apiKeySource":
			d.Name(&m.APIKeySource)
		case "output_style":
			d.Name(&m.OutputStyle)
		case "agents":
			m.Agents = d.Strings(m.Agents)
		case "skills":
			m.Skills = d.Strings(m.Skills)
		case "betas":
			m.Betas = d.Strings(m.Betas)
		case "plugins":
			m.Plugins = d.Raw()
		default:
			d.Skip()
		}
	}
}

func (s *MCPServerStatus) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "name":
			d.Name(&s.Name)
		case "status":
			d.Name(&s.Status)
		case "source":
			d.Name(&s.Source)
		default:
			d.Skip()
		}
	}
}

func (m *SystemStatus) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "status":
			d.Name(&m.Status)
		case "permissionMode":
			d.Name(&m.PermissionMode)
		case "compact_result":
			d.Name(&m.CompactResult)
		case "compact_error":
			d.Str(&m.CompactError)
		default:
			d.Skip()
		}
	}
}

func (m *SystemAPIRetry) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "attempt":
			d.Int(&m.Attempt)
		case "max_retries":
			d.Int(&m.MaxRetries)
		case "retry_delay_ms":
			d.Int(&m.RetryDelayMS)
		case "error_status":
			d.Int(&m.ErrorStatus)
		case "error":
			d.Name(&m.Error)
		default:
			d.Skip()
		}
	}
}

func (m *SystemCompactBoundary) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		if string(key) == "compact_metadata" {
			m.CompactMetadata.decode(d)
		} else {
			d.Skip()
		}
	}
}

func (c *CompactMetadata) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "trigger":
			d.Name(&c.Trigger)
		case "pre_tokens":
			d.Int(&c.PreTokens)
		case "post_tokens":
			d.Int(&c.PostTokens)
		case "duration_ms":
			d.Int(&c.DurationMS)
		case "messages_summarized":
			d.Int(&c.MessagesSummarized)
		case "user_context":
			d.Str(&c.UserContext)
		default:
			d.Skip()
		}
	}
}

func (m *SystemTask) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "task_id":
			d.Name(&m.TaskID)
		case "run_id":
			d.Name(&m.RunID)
		case "tool_use_id":
			d.Name(&m.ToolUseID)
		case "description":
			d.Str(&m.Description)
		case "subagent_type":
			d.Name(&m.SubagentType)
		case "task_type":
			d.Name(&m.TaskType)
		case "prompt":
			d.Str(&m.Prompt)
		case "status":
			d.Name(&m.Status)
		case "summary":
			d.Str(&m.Summary)
		case "output_file":
			d.Str(&m.OutputFile)
		case "patch":
			m.Patch = d.Raw()
		case "usage":
			m.Usage = d.Raw()
		case "last_tool_name":
			d.Name(&m.LastToolName)
		default:
			d.Skip()
		}
	}
}

func (m *SystemThinkingTokens) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "estimated_tokens":
			d.Int(&m.EstimatedTokens)
		case "estimated_tokens_delta":
			d.Int(&m.EstimatedTokensDelta)
		default:
			d.Skip()
		}
	}
}

func (m *SystemPermissionDenied) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "tool_name":
			d.Name(&m.ToolName)
		case "tool_use_id":
			d.Name(&m.ToolUseID)
		case "agent_id":
			d.Name(&m.AgentID)
		case "decision_reason_type":
			d.Name(&m.DecisionReasonType)
		case "decision_reason_code":
			d.Name(&m.DecisionReasonCode)
		case "decision_reason":
			d.Str(&m.DecisionReason)
		case "message":
			d.Str(&m.Message)
		default:
			d.Skip()
		}
	}
}

func (m *SystemInformational) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "content":
			d.Str(&m.Content)
		case "level":
			d.Name(&m.Level)
		case "tag":
			d.Name(&m.Tag)
		default:
			d.Skip()
		}
	}
}

func (m *SystemNotification) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "key":
			d.Name(&m.Key)
		case "text":
			d.Str(&m.Text)
		case "priority":
			d.Name(&m.Priority)
		default:
			d.Skip()
		}
	}
}

func (m *SystemHook) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		key := d.Key()
		if m.field(d, key) {
			continue
		}
		switch string(key) {
		case "hook_id":
			d.Name(&m.HookID)
		case "hook_name":
			d.Name(&m.HookName)
		case "hook_event":
			d.Name(&m.HookEvent)
		case "output":
			d.Str(&m.Output)
		case "stdout":
			d.Str(&m.Stdout)
		case "stderr":
			d.Str(&m.Stderr)
		case "exit_code":
			d.IntPtr(&m.ExitCode)
		case "outcome":
			d.Name(&m.Outcome)
		default:
			d.Skip()
		}
	}
}

func (m *AssistantMessage) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "message":
			m.Message.decode(d)
		case "parent_tool_use_id":
			d.Name(&m.ParentToolUseID)
		case "uuid":
			d.Str(&m.UUID)
		case "session_id":
			d.Name(&m.SessionID)
		case "aborted":
			d.Bool(&m.Aborted)
		case "error":
			d.Name(&m.Error)
		case "is_api_error_message":
			d.Bool(&m.IsAPIErrorMessage)
		case "api_error_status":
			d.Int(&m.APIErrorStatus)
		case "api_error_type":
			d.Name(&m.APIErrorType)
		case "api_error":
			d.Name(&m.APIError)
		case "api_error_params":
			m.APIErrorParams = decodePtr(d, m.APIErrorParams, (*APIErrorParams).decode)
		case "request_id":
			d.Name(&m.RequestID)
		case "user_message_uuid":
			d.Name(&m.UserMessageUUID)
		default:
			d.Skip()
		}
	}
}

func (m *APIMessage) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "id":
			d.Name(&m.ID)
		case "type":
			d.Name(&m.Type)
		case "role":
			d.Name(&m.Role)
		case "model":
			d.Name(&m.Model)
		case "content":
			m.Content = decodeSlice(d, m.Content, (*ContentBlock).decode)
		case "stop_reason":
			d.Name(&m.StopReason)
		case "stop_sequence":
			d.Name(&m.StopSequence)
		case "usage":
			m.Usage.decode(d)
		default:
			d.Skip()
		}
	}
}

func (u *Usage) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "input_tokens":
			d.Int(&u.InputTokens)
		case "output_tokens":
			d.Int(&u.OutputTokens)
		case "cache_creation_input_tokens":
			d.Int(&u.CacheCreationInputTokens)
		case "cache_read_input_tokens":
			d.Int(&u.CacheReadInputTokens)
		case "cache_creation":
			u.CacheCreation = decodePtr(d, u.CacheCreation, (*CacheCreation).decode)
		case "server_tool_use":
			u.ServerToolUse = decodePtr(d, u.ServerToolUse, (*ServerToolUse).decode)
		case "service_tier":
			d.Name(&u.ServiceTier)
		default:
			d.Skip()
		}
	}
}

func (c *CacheCreation) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "ephemeral_5m_input_tokens":
			d.Int(&c.Ephemeral5mInputTokens)
		case "ephemeral_1h_input_tokens":
			d.Int(&c.Ephemeral1hInputTokens)
		default:
			d.Skip()
		}
	}
}

func (s *ServerToolUse) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "web_search_requests":
			d.Int(&s.WebSearchRequests)
		case "web_fetch_requests":
			d.Int(&s.WebFetchRequests)
		default:
			d.Skip()
		}
	}
}

func (m *UserMessage) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "message":
			m.Message.decode(d)
		case "parent_tool_use_id":
			d.Name(&m.ParentToolUseID)
		case "uuid":
			d.Str(&m.UUID)
		case "session_id":
			d.Name(&m.SessionID)
		case "tool_use_result":
			m.ToolUseResult = d.Raw()
		case "isReplay":
			d.Bool(&m.IsReplay)
		case "isSynthetic":
			d.Bool(&m.IsSynthetic)
		case "agent_id":
			d.Name(&m.AgentID)
		case "timestamp":
			d.Str(&m.Timestamp)
		case "priority":
			d.Name(&m.Priority)
		default:
			d.Skip()
		}
	}
}

func (u *UserContent) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "role":
			d.Name(&u.Role)
		case "content":
			u.Content.decode(d)
		default:
			d.Skip()
		}
	}
}

func (m *ResultMessage) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "subtype":
			d.Name(&m.Subtype)
		case "is_error":
			d.Bool(&m.IsError)
		case "result":
			d.Str(&m.Result)
		case "session_id":
			d.Name(&m.SessionID)
		case "uuid":
			d.Str(&m.UUID)
		case "total_cost_usd":
			d.Float(&m.TotalCostUSD)
		case "usage":
			m.Usage.decode(d)
		case "modelUsage":
			m.ModelUsage = decodeModelUsage(d, m.ModelUsage)
		case "model_usage_since_last_result":
			m.ModelUsageSinceLastResult = decodeModelUsage(d, m.ModelUsageSinceLastResult)
		case "duration_ms":
			d.Int(&m.DurationMS)
		case "duration_api_ms":
			d.Int(&m.DurationAPIMS)
		case "num_turns":
			d.Int(&m.NumTurns)
		case "stop_reason":
			d.Name(&m.StopReason)
		case "terminal_reason":
			d.Name(&m.TerminalReason)
		case "api_error_status":
			d.Int(&m.APIErrorStatus)
		case "api_error":
			d.Name(&m.APIError)
		case "api_error_code":
			d.Name(&m.APIErrorCode)
		case "errors":
			m.Errors = d.Strings(m.Errors)
		case "permission_denials":
			m.PermissionDenials = decodeSlice(d, m.PermissionDenials, (*PermissionDenial).decode)
		case "result_index":
			d.Int(&m.ResultIndex)
		case "ttft_ms":
			d.Int(&m.TTFTMS)
		case "user_message_uuid":
			d.Name(&m.UserMessageUUID)
		default:
			d.Skip()
		}
	}
}

// decodeModelUsage decodes an object of per-model usage: null gives nil, an object a non-nil map
// (empty when the object is), anything else leaves old.
func decodeModelUsage(d *jsonscan.Decoder, old map[string]ModelUsage) map[string]ModelUsage {
	switch d.Peek() {
	case 'n':
		d.Skip()
		return nil
	case '{':
	default:
		d.Skip()
		return old
	}
	if old == nil {
		old = map[string]ModelUsage{}
	}
	for more := d.Object(); more; more = d.More() {
		name := string(d.Key())
		u := old[name]
		u.decode(d)
		old[name] = u
	}
	return old
}

func (u *ModelUsage) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "inputTokens":
			d.Int(&u.InputTokens)
		case "outputTokens":
			d.Int(&u.OutputTokens)
		case "cacheReadInputTokens":
			d.Int(&u.CacheReadInputTokens)
		case "cacheCreationInputTokens":
			d.Int(&u.CacheCreationInputTokens)
		case "webSearchRequests":
			d.Int(&u.WebSearchRequests)
		case "costUSD":
			d.Float(&u.CostUSD)
		case "contextWindow":
			d.Int(&u.ContextWindow)
		case "maxOutputTokens":
			d.Int(&u.MaxOutputTokens)
		default:
			d.Skip()
		}
	}
}

func (p *PermissionDenial) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "tool_name":
			d.Name(&p.ToolName)
		case "tool_use_id":
			d.Name(&p.ToolUseID)
		case "tool_input":
			p.ToolInput = d.Raw()
		default:
			d.Skip()
		}
	}
}

func (m *StreamEvent) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "event":
			m.Event.decode(d)
		case "parent_tool_use_id":
			d.Name(&m.ParentToolUseID)
		case "uuid":
			d.Str(&m.UUID)
		case "session_id":
			d.Name(&m.SessionID)
		case "ttft_ms":
			d.Int(&m.TTFTMS)
		case "api_message_id":
			d.Name(&m.APIMessageID)
		default:
			d.Skip()
		}
	}
}

// decode reads an event object and keeps it in Raw; any other value leaves e as it was.
func (e *APIEvent) decode(d *jsonscan.Decoder) {
	if d.Peek() != '{' {
		d.Skip()
		return
	}
	start := d.Offset()
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "type":
			d.Name(&e.Type)
		case "index":
			d.Int(&e.Index)
		case "delta":
			e.Delta = decodePtr(d, e.Delta, (*Delta).decode)
		case "content_block":
			if d.Peek() == 'n' {
				d.Skip()
				e.ContentBlock = nil
			} else {
				e.ContentBlock = &ContentBlock{}
				e.ContentBlock.decode(d)
			}
		case "message":
			e.Message = decodePtr(d, e.Message, (*APIMessage).decode)
		case "usage":
			e.Usage = decodePtr(d, e.Usage, (*Usage).decode)
		default:
			d.Skip()
		}
	}
	e.Raw = d.Since(start)
}

func (dl *Delta) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "type":
			d.Name(&dl.Type)
		case "text":
			d.Str(&dl.Text)
		case "thinking":
			d.Str(&dl.Thinking)
		case "signature":
			d.Str(&dl.Signature)
		case "partial_json":
			d.Str(&dl.PartialJSON)
		case "stop_reason":
			d.Name(&dl.StopReason)
		case "stop_sequence":
			d.Name(&dl.StopSequence)
		default:
			d.Skip()
		}
	}
}

func (m *ControlCancelRequest) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		if string(d.Key()) == "request_id" {
			d.Name(&m.RequestID)
		} else {
			d.Skip()
		}
	}
}

func (m *RateLimitEvent) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "rate_limit_info":
			m.RateLimitInfo.decode(d)
		case "uuid":
			d.Str(&m.UUID)
		case "session_id":
			d.Name(&m.SessionID)
		default:
			d.Skip()
		}
	}
}

func (p *APIErrorParams) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "rate_limit_info":
			p.RateLimitInfo = decodePtr(d, p.RateLimitInfo, (*RateLimitInfo).decode)
		default:
			d.Skip()
		}
	}
}

func (r *RateLimitInfo) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "status":
			d.Name(&r.Status)
		case "resetsAt":
			d.Int(&r.ResetsAt)
		case "rateLimitType":
			d.Name(&r.RateLimitType)
		case "utilization":
			d.Float(&r.Utilization)
		case "isUsingOverage":
			d.Bool(&r.IsUsingOverage)
		case "overageStatus":
			d.Name(&r.OverageStatus)
		case "overageDisabledReason":
			d.Name(&r.OverageDisabledReason)
		default:
			d.Skip()
		}
	}
}

func (m *CommandLifecycle) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "command_uuid":
			d.Name(&m.CommandUUID)
		case "state":
			d.Name(&m.State)
		case "uuid":
			d.Str(&m.UUID)
		case "session_id":
			d.Name(&m.SessionID)
		default:
			d.Skip()
		}
	}
}

func (m *Unknown) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "type":
			d.Name(&m.MessageType)
		case "subtype":
			d.Name(&m.Subtype)
		case "uuid":
			d.Str(&m.UUID)
		case "session_id":
			d.Name(&m.SessionID)
		default:
			d.Skip()
		}
	}
}

func (m *ControlRequest) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "request_id":
			d.Name(&m.RequestID)
		case "request":
			m.decodeRequest(d)
		default:
			d.Skip()
		}
	}
}

// decodeRequest reads the "request" object: its subtype (found by a probe first, wherever it
// stands) says which body type to decode it into.
func (m *ControlRequest) decodeRequest(d *jsonscan.Decoder) {
	m.Subtype, m.CanUseTool, m.HookCallback = "", nil, nil
	if d.Peek() != '{' {
		m.Request = d.Raw()
		return
	}
	start := d.Offset()
	m.Subtype = probeSubtype(d.Rest())
	switch m.Subtype {
	case RequestCanUseTool:
		m.CanUseTool = &CanUseTool{}
		m.CanUseTool.decode(d)
	case RequestHookCallback:
		m.HookCallback = &HookCallback{}
		m.HookCallback.decode(d)
	default:
		d.Skip()
	}
	m.Request = d.Since(start)
}

func (c *CanUseTool) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "tool_name":
			d.Name(&c.ToolName)
		case "input":
			c.Input = d.Raw()
		case "tool_use_id":
			d.Name(&c.ToolUseID)
		case "display_name":
			d.Name(&c.DisplayName)
		case "title":
			d.Str(&c.Title)
		case "description":
			d.Str(&c.Description)
		case "permission_suggestions":
			c.PermissionSuggestions = d.Raw()
		case "blocked_path":
			d.Str(&c.BlockedPath)
		case "decision_reason":
			d.Str(&c.DecisionReason)
		case "decision_reason_type":
			d.Name(&c.DecisionReasonType)
		case "decision_reason_code":
			d.Name(&c.DecisionReasonCode)
		case "decision_reason_hook_event":
			d.Name(&c.DecisionReasonHookEvent)
		case "agent_id":
			d.Name(&c.AgentID)
		case "mcp_server":
			c.MCPServer = decodeToolServer(d)
		case "requires_user_interaction":
			d.Bool(&c.RequiresUserInteraction)
		case "suppress_always_allow_rule":
			d.Bool(&c.SuppressAlwaysAllowRule)
		default:
			d.Skip()
		}
	}
}

// decodeToolServer reads an mcp_server object; anything else is nil.
func decodeToolServer(d *jsonscan.Decoder) *ToolServer {
	if d.Peek() != '{' {
		d.Skip()
		return nil
	}
	s := &ToolServer{}
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "name":
			d.Name(&s.Name)
		case "source":
			d.Name(&s.Source)
		default:
			d.Skip()
		}
	}
	return s
}

func (h *HookCallback) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "callback_id":
			d.Name(&h.CallbackID)
		case "input":
			h.Input.decode(d)
		case "tool_use_id":
			d.Name(&h.ToolUseID)
		default:
			d.Skip()
		}
	}
}

// decode reads a hook input object and keeps it in Raw; any other value leaves h as it was.
func (h *HookInput) decode(d *jsonscan.Decoder) {
	if d.Peek() != '{' {
		d.Skip()
		return
	}
	start := d.Offset()
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "hook_event_name":
			d.Name(&h.HookEventName)
		case "session_id":
			d.Name(&h.SessionID)
		case "transcript_path":
			d.Str(&h.TranscriptPath)
		case "cwd":
			d.Name(&h.CWD)
		case "permission_mode":
			d.Name(&h.PermissionMode)
		case "tool_name":
			d.Name(&h.ToolName)
		case "tool_input":
			h.ToolInput = d.Raw()
		case "tool_use_id":
			d.Name(&h.ToolUseID)
		case "agent_id":
			d.Name(&h.AgentID)
		case "agent_type":
			d.Name(&h.AgentType)
		case "mcp_server":
			h.MCPServer = decodeToolServer(d)
		case "stop_hook_active":
			d.Bool(&h.StopHookActive)
		case "last_assistant_message":
			d.Str(&h.LastAssistantMessage)
		default:
			d.Skip()
		}
	}
	h.Raw = d.Since(start)
}

func (m *ControlResponse) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		if string(d.Key()) != "response" {
			d.Skip()
			continue
		}
		for more := d.Object(); more; more = d.More() {
			switch string(d.Key()) {
			case "subtype":
				d.Name(&m.Subtype)
			case "request_id":
				d.Name(&m.RequestID)
			case "response":
				m.Response = d.Raw()
			case "error":
				d.Name(&m.Error)
			default:
				d.Skip()
			}
		}
	}
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
		var v T
		decode(&v, d)
		out = append(out, v)
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

// rawCopy returns a copy of data for the UnmarshalJSON methods, which must not keep their input.
func rawCopy(data []byte) []byte { return append(json.RawMessage(nil), data...) }
