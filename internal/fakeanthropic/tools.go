package fakeanthropic

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
