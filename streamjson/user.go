package streamjson

import (
	"strings"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// handleUser handles a user frame: tool results, echoes of our prompts, output of local slash
// commands, interrupt notes and subagent prompts.
func (a *Adapter) handleUser(m *claudecode.UserMessage) {
	a.noteSession(m.SessionID)
	main := m.ParentToolUseID == ""
	if main {
		a.startTurn()
	}
	content := &m.Message.Content
	results := 0
	for i := range content.Blocks {
		if content.Blocks[i].Type == claudecode.BlockToolResult {
			results++
		}
	}
	for i := range content.Blocks {
		b := &content.Blocks[i]
		if b.Type != claudecode.BlockToolResult {
			continue
		}
		r := toolResult{Text: b.Content.String(), IsError: b.IsError}
		if results == 1 {
			// The frame's structured result belongs to its only tool result.
			r.Structured = m.ToolUseResult
		}
		a.toolUpdate(b.ToolUseID, r)
	}
	if !main {
		return // a subagent's prompt or tool results: not the main chain
	}
	// Every user entry of the main chain is a safe resume point the moment it appears.
	a.commit(m.UUID)
	if m.UUID != "" {
		setMap(&a.turn.adopted, m.UUID, true, a.cfg.MaxPending)
	}
	if results > 0 || m.IsSynthetic {
		return
	}
	text := content.String()
	switch {
	case text == "":
	case strings.HasPrefix(text, "[Request interrupted by user"):
		if !a.turn.interrupted {
			a.turn.interrupted = true
			a.emit(events.AgentEvent{Type: events.TypeInterrupted})
		}
	case strings.HasPrefix(text, "<local-command-stdout>"), strings.HasPrefix(text, "<local-command-stderr>"):
		if out := localCommandOutput(text); out != "" {
			a.emitText(events.TypeMessageChunk, out, "", "")
		}
	case m.IsReplay:
		a.promptEcho(m.UUID, text)
	}
}

// promptEcho emits a user_message for the CLI's echo of a prompt, unless PromptSent announced it.
func (a *Adapter) promptEcho(uuid, text string) {
	text = slashCommandText(text)
	for _, key := range []string{promptKey(uuid, ""), promptKey("", text)} {
		if a.prompts[key] {
			delete(a.prompts, key)
			return
		}
	}
	a.emit(events.AgentEvent{Type: events.TypeUserMessage, Text: text, UUID: uuid})
}

// adoptPrompt commits the uuid of a prompt the CLI reports having taken into the transcript
// (assistant frames name it in user_message_uuid), once per turn: later frames that repeat it must
// not move the resume point back.
func (a *Adapter) adoptPrompt(uuid string) {
	if a.turn.adopted[uuid] {
		return
	}
	setMap(&a.turn.adopted, uuid, true, a.cfg.MaxPending)
	if a.pendingUUID == "" {
		a.commit(uuid)
	}
}

// localCommandOutput returns the text inside the <local-command-stdout> or
// <local-command-stderr> wrapper of a slash command's output.
func localCommandOutput(text string) string {
	for _, tag := range []string{"local-command-stdout", "local-command-stderr"} {
		if inner, ok := strings.CutPrefix(text, "<"+tag+">"); ok {
			inner, _ = strings.CutSuffix(inner, "</"+tag+">")
			return strings.TrimSpace(inner)
		}
	}
	return text
}

// slashCommandText turns the CLI's record of a slash command
// ("<command-name>/compact</command-name> … <command-args>x</command-args>") back into what was
// typed ("/compact x"). Other text is returned unchanged.
func slashCommandText(text string) string {
	if !strings.HasPrefix(text, "<command-name>") {
		return text
	}
	name := between(text, "<command-name>", "</command-name>")
	if name == "" {
		return text
	}
	if args := strings.TrimSpace(between(text, "<command-args>", "</command-args>")); args != "" {
		return name + " " + args
	}
	return name
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	inner, _, ok := strings.Cut(after, end)
	if !ok {
		return ""
	}
	return inner
}
