package offlinemodel

import "regexp"

// Helpers for tool_use blocks of Claude Code's built-in tools, with the input
// field names of the pinned CLI's tool schemas. Each generates its tool-use
// id when served; use ToolUseID for an explicit one.

// UseBash calls the Bash tool with command.
func UseBash(command string) Block {
	return ToolUse("Bash", map[string]any{"command": command, "description": "Run a shell command"})
}

// UseRead calls the Read tool on an absolute path.
func UseRead(filePath string) Block {
	return ToolUse("Read", map[string]any{"file_path": filePath})
}

// UseWrite calls the Write tool to write content to an absolute path.
func UseWrite(filePath, content string) Block {
	return ToolUse("Write", map[string]any{"file_path": filePath, "content": content})
}

// UseEdit calls the Edit tool to replace oldString by newString in the file
// at an absolute path.
func UseEdit(filePath, oldString, newString string) Block {
	return ToolUse("Edit", map[string]any{"file_path": filePath, "old_string": oldString, "new_string": newString})
}

// UseAgent calls the Agent tool to start a subagent of the given type
// ("general-purpose", "Explore", …) with prompt. It sets
// run_in_background=false: the pinned CLI otherwise runs agents in the
// background, answers the tool call at once ("Async agent launched"), and
// reports the agent's result later in an extra turn with its own result.
func UseAgent(description, prompt, subagentType string) Block {
	return ToolUse("Agent", map[string]any{
		"description":       description,
		"prompt":            prompt,
		"subagent_type":     subagentType,
		"run_in_background": false,
	})
}

// UseExitPlanMode calls the ExitPlanMode tool, which presents a plan for approval. In plan mode the
// pinned CLI replaces the input with the plan file's content (see PlanFilePath), so a scripted
// model that wants the plan shown writes the plan file first (UseWrite) and passes "" here.
func UseExitPlanMode(plan string) Block {
	input := map[string]any{}
	if plan != "" {
		input["plan"] = plan
	}
	return ToolUse("ExitPlanMode", input)
}

// AskQuestion is one question of UseAskUserQuestion.
type AskQuestion struct {
	Question    string
	Header      string
	MultiSelect bool
	// Options are the labels to choose from (2 to 4); each gets a description of its own.
	Options []string
}

// UseAskUserQuestion calls the AskUserQuestion tool with questions (1 to 4).
func UseAskUserQuestion(questions ...AskQuestion) Block {
	qs := make([]any, 0, len(questions))
	for _, q := range questions {
		opts := make([]any, 0, len(q.Options))
		for _, o := range q.Options {
			opts = append(opts, map[string]any{"label": o, "description": "Choose " + o + "."})
		}
		qs = append(qs, map[string]any{
			"question": q.Question, "header": q.Header, "multiSelect": q.MultiSelect, "options": opts,
		})
	}
	return ToolUse("AskUserQuestion", map[string]any{"questions": qs})
}

// planPathPattern finds the plan file in the reminder the pinned CLI adds in plan mode ("… create
// your plan at /…/plans/<slug>.md using the Write tool.").
var planPathPattern = regexp.MustCompile(`create your plan at (/\S+?\.md)\b`)

// PlanFilePath returns the plan file that the CLI's plan-mode reminder in r names, or "" when r
// carries none (the session is not in plan mode).
func PlanFilePath(r *Request) string {
	for _, m := range r.Messages {
		for _, raw := range m.Content {
			if s := planPathPattern.FindSubmatch(raw); s != nil {
				return string(s[1])
			}
		}
	}
	return ""
}
