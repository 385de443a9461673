// Package events defines AgentEvent and NormalizedPayload, the protocol-agnostic records that every
// drover layer shares: the adapter produces them, the store appends them to a task's log, and
// readers render them.
//
// The package promises a stable JSON form: field names are snake_case and never renamed, every
// event carries its "type", empty fields are left out, and decoding what was encoded gives the
// same value back. It has no dependencies beyond the standard library and never reads the clock.
//
// # Events
//
// An AgentEvent is one flat JSON object. Which fields are set depends on "type":
//
//	session_status        session_id, data.session_status ("new" | "resumed")
//	available_commands    available_commands[] {name, description, argument_hint}
//	user_message          text, uuid (the prompt as the transcript records it)
//	message_chunk         text, message_id, parent_tool_call_id
//	reasoning             reasoning_text, message_id, parent_tool_call_id
//	tool_call             tool_call_id, tool_name, tool_title, tool_status "running", normalized
//	tool_update           tool_call_id, tool_name, tool_title, tool_status "complete" | "error", normalized,
//	                      tool_error (the tool's message when it failed)
//	context_window        context_window_size, context_window_used, context_window_remaining,
//	                      context_efficiency (all four always present)
//	complete              data {cost_usd, total_cost_usd, duration_ms, num_turns,
//	                      input_tokens, output_tokens, cache_creation_input_tokens,
//	                      cache_read_input_tokens, last_message_uuid, session_id, result_uuid,
//	                      stop_reason, terminal_reason, subtype, is_error, models, checkpoint}
//	                      checkpoint: a managed task's commit of its worktree (written by drover)
//	error                 error {kind, message, subtype, terminal_reason, api_error_status, api_error,
//	                      api_error_code, errors}
//	                      kind: api_error | max_turns | max_budget | interrupted | resume_rejected |
//	                      execution | protocol
//	rate_limit            rate_limit_message, rate_limit {source "api_retry" | "rate_limit_event" |
//	                      "api_error", attempt, max_retries,
//	                      retry_delay_ms, error_status, error, status, resets_at, rate_limit_type,
//	                      utilization, overage_status, overage_disabled_reason}
//	permission_request    pending_id, tool_call_id, tool_name, tool_title, normalized,
//	                      permission {input, display_name, description, summary, diff, suggestions,
//	                      allow_always, blocked_path, decision_reason, decision_reason_type, agent_id,
//	                      requires_user_interaction, questions[] {question, header, multi_select,
//	                      options[] {label, description}}, plan, plan_file}
//	                      summary: one line to read first (the command, the path, the question…);
//	                      diff: what a file tool would change; allow_always: the "allow always"
//	                      choices a decision may accept (CLI permission updates); questions: an
//	                      AskUserQuestion call's; plan, plan_file: an ExitPlanMode call's
//	permission_cancelled  pending_id
//	permission_decision   pending_id, tool_call_id, tool_name, decision {outcome, by, reason, at, grant, answers,
//	                      next_mode}: the answer the agent received
//	permission_denied     tool_call_id, tool_name, tool_title, normalized, permission {message, …}
//	compaction            compaction {phase "started" | "finished", trigger, pre_tokens, post_tokens,
//	                      result "success" | "failed", error}
//	interrupted           (no extra fields: the turn was interrupted at this point)
//	subagent_task         tool_call_id, subagent {phase, task_id, task_type, description, status,
//	                      summary, last_tool_name, usage}
//	turn_retry            turn_retry {attempt, reason}: events before this one that belong to the
//	                      failed attempt are partial output that readers drop
//	wait                  wait {phase "started" | "ended", account, reason, limit_type, resets_at,
//	                      retry_at, position, waited_ms}: the turn waits for its account (written
//	                      by drover, not the CLI)
//	workspace_restored    workspace {cause "retry" | "changed_by_hand", checkpoint, turn, kept, files,
//	                      message}: a managed task's worktree was put back at its last committed
//	                      checkpoint, what it held instead kept on the ref kept (written by drover)
//
// Every event carries session_id once the session is known and parent_tool_call_id when it comes
// from a subagent. "time" is present only when the producer was given a clock.
//
// # Normalized tool payloads
//
// A NormalizedPayload is a discriminated union: "kind" names exactly one sibling field, and that
// field is the only one present:
//
//	{"kind":"shell_exec","shell_exec":{"command":"echo hi","output":{"exit_code":0,"stdout":"hi\n"}}}
//
// The kinds and their fields:
//
//	read_file      file_path, offset, limit, output {content, line_count, start_line, total_lines, truncated}
//	modify_file    file_path, mutations[] {type, content, old_content, new_content, diff, replace_all}
//	shell_exec     command, work_dir, description, timeout, background, shell_id,
//	               output {exit_code, stdout, stderr, interrupted}
//	code_search    query, pattern, path, glob, output {files, file_count, truncated, content}
//	http_request   url, method, query, prompt, response, status_code, is_error
//	subagent_task  description, prompt, subagent_type, status, result, agent_id
//	create_task    title, description, task_id
//	manage_todos   operation, items[] {id, description, status}
//	generic        name, server, tool, input (raw JSON), output, is_error
//	misc           label, details
//
// MarshalJSON and UnmarshalJSON refuse a payload whose kind is unknown or that does not hold
// exactly the one matching field; Validate reports the same problem without encoding.
package events
