// Package streamjson turns the stream-json output of one Claude Code session into
// events.AgentEvent values: an Adapter takes the decoded messages of package claudecode, one at a
// time and in order, and emits normalized events to a Sink, while keeping what the host needs to
// resume the session and account for it (TurnState).
//
// The adapter promises: every input is accepted (unknown types and subtypes are ignored, a
// malformed line becomes an "error" event of kind "protocol", nothing panics); output is
// deterministic for a given input (no wall clock unless Config.Clock is set); memory stays
// bounded over a long session (Config.MaxPending); and the rules below hold.
//
// # Turns
//
// A turn runs from its first message to its result; the CLI sends system/init at the start of
// every turn. session_status is emitted once for the session (again only if the id changes);
// available_commands whenever the union of initialize's and init's slash commands changes. A
// turn ends with, in this order: tool_update for each tool call of the main agent that got no
// result ("error" when the turn failed, else "complete"), the result text if the turn emitted no
// text of its own, context_window if the result revealed the model's window size, error (when
// the result has is_error), and complete, which is always the turn's last event. Messages of a
// subagent may arrive after its parent turn's result (background agents); their tool calls stay
// open until the subagent's task_notification.
//
// # Text
//
// Every piece of text is emitted once. With Config.PartialMessages, message_chunk and reasoning
// come from stream_event deltas as they arrive, and an assistant frame's text or thinking is
// emitted only for messages that were not streamed (the CLI does not stream subagents). Without
// it, stream events are ignored and the frames are the source. The result's text (the last text
// block) is emitted only when the turn emitted no text at all (slash commands). The synthetic
// message the CLI makes for an API error is not text: the error event carries it.
//
// # Resume point
//
// TurnState().LastMessageUUID, also in each complete event, is the last transcript entry it is
// safe to pass to --resume-session-at:
//   - user entries of the main agent (our prompt, whose uuid the CLI adopts; tool results;
//     interrupt notes; compaction summaries) are safe as soon as they appear, and so is a prompt
//     uuid an assistant frame names in user_message_uuid;
//   - assistant entries are pending until the turn's result: a successful result commits the
//     last one, a failed result (is_error: API error, interrupt, max turns, …) discards them, so
//     the resume point of a failed turn is its last user entry (typically the prompt);
//   - the result's uuid, stream_event uuids, subagent uuids and the CLI's synthetic messages
//     (model "<synthetic>": API errors and local command output) are never resume points.
//
// # Cost
//
// complete carries this turn's cost and tokens. The CLI's total_cost_usd and modelUsage are
// running totals over the process and across --resume; the adapter takes the turn's figures from
// model_usage_since_last_result (all models, subagents and compaction included), and, when a
// result lacks it, the growth of total_cost_usd since the previous result or since
// Config.PriorTotalCostUSD. The per-turn costs add up to the CLI's final total.
//
// # Concurrency
//
// Feed an Adapter from one goroutine. Its methods lock, so TurnState may be read from another;
// the Sink runs with the adapter locked and must not call back into it.
//
// # Debug capture and normalization
//
// DebugCapture writes the raw stdout lines and the events of a session to two JSONL files when
// DROVER_DEBUG_AGENT_MESSAGES=true. Normalize turns a recorded stdout transcript into a JSONL
// file of events.
package streamjson
