package offlinemodel

import (
	"strings"
)

// Class is the kind of conversation a request belongs to.
//
// What the pinned CLI (2.1.332) sends, observed by running it in
// `-p --output-format=stream-json --input-format=stream-json --verbose` mode
// against this server with every request body logged:
//
//   - Main conversation: POST /v1/messages?beta=true, "stream":true. The
//     system prompt is an array of text blocks whose first block is
//     "x-anthropic-billing-header: cc_version=2.1.332.<hex>;
//     cc_entrypoint=sdk-cli;", then "You are a Claude agent, built on
//     Anthropic's Claude Agent SDK.", then the prompt proper (or the text of
//     --system-prompt). The request carries "tools" (12 by default: Agent,
//     Bash, Edit, ListAgents, Read, ReportFindings, ScheduleWakeup, Skill,
//     ToolSearch, Workflow, DeferredToolPlaceholder, Write; [] with
//     --tools ""), "thinking":{"type":"adaptive",…}, "context_management",
//     "output_config":{"effort":"medium"}, "metadata":{"user_id":…} and
//     max_tokens 128000. Models without adaptive thinking (for example
//     claude-3-5-haiku-20241022) get neither thinking nor context_management
//     nor output_config, and 25 tools. The messages start with a user
//     message (a <system-reminder> block, then the prompt) and a message
//     with role "system" (environment, deferred tools, agent types, skills).
//     Every later turn resends the whole history.
//   - Subagents of the Agent tool: the same endpoint and fields, but the
//     billing header ends with "cc_is_subagent=true;", the prompt proper is
//     the subagent's own ("You are an agent for Claude Code, …"), the tool
//     list is smaller (8 to 10), thinking.display is "omitted", and the
//     first user message holds the Agent tool's prompt. The subagent's final
//     text comes back to the main conversation inside the Agent tool_result.
//   - Compaction (/compact, or automatic when the context is full): the main
//     conversation's exact fields and tools plus a last user message that
//     starts "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools." and
//     asks for an <analysis> block and a <summary> block. When the reply has
//     no <summary>, the CLI asks once more with an extra paragraph.
//   - Side queries, for example prompt-type hooks (settings.json hooks with
//     "type":"prompt"): the billing header, the SDK line, a task prompt
//     ("You are evaluating a hook in Claude Code. …"), "tools":[], no
//     thinking, no context_management, and
//     "output_config":{"format":{"type":"json_schema","schema":…}} asking
//     for {"ok":bool,"reason":string}. A Stop prompt hook sends the whole
//     transcript. These used the main model, not a small one.
//   - POST /v1/messages/count_tokens?beta=true, only for the
//     get_context_usage control request (about 25 calls: model, one user
//     message, sometimes tools, no system).
//   - HEAD /api/hello, a connectivity probe, only without
//     CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1.
//
// Not observed in -p mode: title or topic generation, Bash command-prefix or
// safety checks (also not in the default permission mode), or any
// small-model call. WebFetch fetches over https only and, without
// skipWebFetchPreflight, first asks claude.ai whether the domain is allowed,
// so offline it fails before any side query.
type Class string

// The request classes.
const (
	// ClassMain is the main conversation. It consumes the Enqueue queue.
	ClassMain Class = "main"
	// ClassSubagent is a subagent's conversation (Agent tool). It consumes
	// the EnqueueSubagent queue.
	ClassSubagent Class = "subagent"
	// ClassCompact is a compaction (summary) request. It gets an automatic
	// <analysis>/<summary> reply.
	ClassCompact Class = "compact"
	// ClassAuxiliary is a one-shot side query (prompt hooks and the like).
	// It gets an automatic reply that satisfies its JSON schema, if any.
	ClassAuxiliary Class = "auxiliary"
	// ClassCountTokens is a POST /v1/messages/count_tokens request.
	ClassCountTokens Class = "count_tokens"
	// ClassOther is any other request: another path, or a body that is not
	// a JSON object.
	ClassOther Class = "other"
)

// Markers the classification looks for; see Class.
const (
	billingMarker  = "x-anthropic-billing-header:"
	subagentMarker = "cc_is_subagent=true"
	compactMarker  = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."
)

// classifyMessages returns the class of a parsed /v1/messages request.
//
// The rules, first match wins:
//  1. the system prompt carries the subagent marker → ClassSubagent;
//  2. the last user message carries the compaction instruction →
//     ClassCompact;
//  3. the request asks for structured output, or it comes from Claude Code
//     (billing header) without tools, thinking and context management →
//     ClassAuxiliary;
//  4. anything else → ClassMain.
//
// Rule 3 requires the billing header so that a hand-written request without
// tools (curl, a unit test) still counts as the main conversation. Its one
// known blind spot is a main conversation run with --tools "" on a model
// without adaptive thinking, which looks exactly like a side query.
func classifyMessages(r *Request) Class {
	if strings.Contains(r.System, subagentMarker) {
		return ClassSubagent
	}
	if strings.Contains(r.LastUserText(), compactMarker) {
		return ClassCompact
	}
	if r.StructuredOutput {
		return ClassAuxiliary
	}
	if strings.Contains(r.System, billingMarker) && len(r.Tools) == 0 && r.Thinking == nil && r.ContextManagement == nil {
		return ClassAuxiliary
	}
	return ClassMain
}
