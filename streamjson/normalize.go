package streamjson

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/drover-run/drover/events"
)

// Tool inputs as the CLI's built-in tools take them. Fields the adapter does not use are left out.
type (
	bashInput struct {
		Command         string `json:"command"`
		Description     string `json:"description"`
		Timeout         int64  `json:"timeout"`
		RunInBackground bool   `json:"run_in_background"`
	}
	shellRefInput struct {
		BashID  string `json:"bash_id"`
		ShellID string `json:"shell_id"`
	}
	readInput struct {
		FilePath string `json:"file_path"`
		Offset   int    `json:"offset"`
		Limit    int    `json:"limit"`
	}
	writeInput struct {
		FilePath string `json:"file_path"`
		Content  string `json:"content"`
	}
	editInput struct {
		FilePath   string `json:"file_path"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	multiEditInput struct {
		FilePath string      `json:"file_path"`
		Edits    []editInput `json:"edits"`
	}
	notebookEditInput struct {
		NotebookPath string `json:"notebook_path"`
		CellID       string `json:"cell_id"`
		NewSource    string `json:"new_source"`
		EditMode     string `json:"edit_mode"`
	}
	globInput struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	grepInput struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
		Glob    string `json:"glob"`
		Type    string `json:"type"`
	}
	webFetchInput struct {
		URL    string `json:"url"`
		Prompt string `json:"prompt"`
	}
	webSearchInput struct {
		Query string `json:"query"`
	}
	agentInput struct {
		Description  string `json:"description"`
		Prompt       string `json:"prompt"`
		SubagentType string `json:"subagent_type"`
	}
	taskCreateInput struct {
		Subject     string `json:"subject"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	taskUpdateInput struct {
		TaskID      string `json:"taskId"`
		Status      string `json:"status"`
		Subject     string `json:"subject"`
		Description string `json:"description"`
	}
	todoWriteInput struct {
		Todos []todoInput `json:"todos"`
	}
	todoInput struct {
		ID      string `json:"id"`
		Content string `json:"content"`
		Status  string `json:"status"`
	}
	exitPlanModeInput struct {
		Plan string `json:"plan"`
	}
)

// decodeInput decodes a tool input leniently: a malformed or mistyped input leaves v partly
// filled, never fails the event.
func decodeInput(input json.RawMessage, v any) {
	if len(input) == 0 {
		return
	}
	_ = json.Unmarshal(input, v)
}

// normalizeToolCall maps a tool call to its normalized payload and a short title. Every built-in
// tool of the CLI has a kind; MCP tools (mcp__server__tool) and unknown tools become generic.
func normalizeToolCall(name string, input json.RawMessage) (*events.NormalizedPayload, string) {
	if call, ok := toolCalls[name]; ok {
		return call(name, input)
	}
	return genericCall(name, input)
}

// toolCall normalizes a call of one built-in tool, given its name and input.
type toolCall func(name string, input json.RawMessage) (*events.NormalizedPayload, string)

// toolCalls holds the built-in tools by name.
var toolCalls = map[string]toolCall{
	"Bash":         bashCall,
	"BashOutput":   shellRefCall,
	"KillShell":    shellRefCall,
	"KillBash":     shellRefCall,
	"Read":         readCall,
	"Write":        writeCall,
	"Edit":         editCall,
	"MultiEdit":    multiEditCall,
	"NotebookEdit": notebookEditCall,
	"Glob":         globCall,
	"Grep":         grepCall,
	"WebFetch":     webFetchCall,
	"WebSearch":    webSearchCall,
	"Task":         agentCall,
	"Agent":        agentCall,
	"TaskCreate":   taskCreateCall,
	"TaskUpdate":   taskUpdateCall,
	"TaskList":     taskListCall,
	"TodoWrite":    todoWriteCall,
	"ExitPlanMode": exitPlanModeCall,
}

func bashCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in bashInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindShellExec, ShellExec: &events.ShellExec{
		Command: in.Command, Description: in.Description, Timeout: in.Timeout, Background: in.RunInBackground,
	}}, "Run " + codeSpan(firstLine(in.Command))
}

// shellRefCall is BashOutput, which reads a background shell's output, or KillShell (KillBash
// before), which stops it.
func shellRefCall(name string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in shellRefInput
	decodeInput(input, &in)
	id := cmp.Or(in.BashID, in.ShellID)
	title := "Read output of shell " + id
	if name != "BashOutput" {
		title = "Stop shell " + id
	}
	return &events.NormalizedPayload{Kind: events.KindShellExec, ShellExec: &events.ShellExec{ShellID: id}}, title
}

func readCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in readInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindReadFile, ReadFile: &events.ReadFile{
		FilePath: in.FilePath, Offset: in.Offset, Limit: in.Limit,
	}}, "Read " + baseName(in.FilePath)
}

func writeCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in writeInput
	decodeInput(input, &in)
	return modifyFile(in.FilePath, events.Mutation{Type: events.MutationWrite, Content: in.Content}), "Write " + baseName(in.FilePath)
}

func editCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in editInput
	decodeInput(input, &in)
	return modifyFile(in.FilePath, replaceMutation(in)), "Edit " + baseName(in.FilePath)
}

func multiEditCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in multiEditInput
	decodeInput(input, &in)
	p := modifyFile(in.FilePath)
	for _, e := range in.Edits {
		p.ModifyFile.Mutations = append(p.ModifyFile.Mutations, replaceMutation(e))
	}
	return p, "Edit " + baseName(in.FilePath)
}

func notebookEditCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in notebookEditInput
	decodeInput(input, &in)
	return modifyFile(in.NotebookPath, events.Mutation{Type: events.MutationNotebookCell, NewContent: in.NewSource}),
		"Edit notebook " + baseName(in.NotebookPath)
}

func globCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in globInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindCodeSearch, CodeSearch: &events.CodeSearch{
		Pattern: in.Pattern, Path: in.Path,
	}}, "Find " + codeSpan(in.Pattern)
}

func grepCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in grepInput
	decodeInput(input, &in)
	glob := in.Glob
	if glob == "" && in.Type != "" {
		glob = "*." + in.Type
	}
	return &events.NormalizedPayload{Kind: events.KindCodeSearch, CodeSearch: &events.CodeSearch{
		Pattern: in.Pattern, Path: in.Path, Glob: glob,
	}}, "Search " + codeSpan(in.Pattern)
}

func webFetchCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in webFetchInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindHTTPRequest, HTTPRequest: &events.HTTPRequest{
		URL: in.URL, Method: "GET", Prompt: in.Prompt,
	}}, "Fetch " + in.URL
}

func webSearchCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in webSearchInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindHTTPRequest, HTTPRequest: &events.HTTPRequest{
		Query: in.Query,
	}}, "Search the web for " + codeSpan(in.Query)
}

// agentCall is Agent, called Task before.
func agentCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in agentInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindSubagentTask, SubagentTask: &events.SubagentTask{
		Description: in.Description, Prompt: in.Prompt, SubagentType: in.SubagentType,
	}}, "Agent: " + cmp.Or(in.Description, in.SubagentType)
}

func taskCreateCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in taskCreateInput
	decodeInput(input, &in)
	title := cmp.Or(in.Subject, in.Title)
	return &events.NormalizedPayload{Kind: events.KindCreateTask, CreateTask: &events.CreateTask{
		Title: title, Description: in.Description,
	}}, "Create task " + title
}

func taskUpdateCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in taskUpdateInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindManageTodos, ManageTodos: &events.ManageTodos{
		Operation: events.TodoUpdate,
		Items:     []events.TodoItem{{ID: in.TaskID, Description: cmp.Or(in.Subject, in.Description), Status: in.Status}},
	}}, "Update task " + in.TaskID
}

func taskListCall(string, json.RawMessage) (*events.NormalizedPayload, string) {
	return &events.NormalizedPayload{Kind: events.KindManageTodos, ManageTodos: &events.ManageTodos{
		Operation: events.TodoList,
	}}, "List tasks"
}

func todoWriteCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in todoWriteInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindManageTodos, ManageTodos: &events.ManageTodos{
		Operation: events.TodoWrite, Items: todoItems(in.Todos),
	}}, "Update todos"
}

func exitPlanModeCall(_ string, input json.RawMessage) (*events.NormalizedPayload, string) {
	var in exitPlanModeInput
	decodeInput(input, &in)
	return &events.NormalizedPayload{Kind: events.KindMisc, Misc: &events.Misc{Label: "plan", Details: in.Plan}}, "Present plan"
}

// genericCall is any other tool: an MCP tool (mcp__server__tool) or one this package does not know.
func genericCall(name string, input json.RawMessage) (*events.NormalizedPayload, string) {
	g := &events.Generic{Name: name, Input: compactJSON(input)}
	title := name
	if server, tool, ok := splitMCP(name); ok {
		g.Server, g.Tool = server, tool
		title = server + ": " + tool
	}
	return &events.NormalizedPayload{Kind: events.KindGeneric, Generic: g}, title
}

func modifyFile(path string, m ...events.Mutation) *events.NormalizedPayload {
	return &events.NormalizedPayload{Kind: events.KindModifyFile, ModifyFile: &events.ModifyFile{FilePath: path, Mutations: m}}
}

func replaceMutation(e editInput) events.Mutation {
	return events.Mutation{Type: events.MutationReplace, OldContent: e.OldString, NewContent: e.NewString, ReplaceAll: e.ReplaceAll}
}

func todoItems(todos []todoInput) []events.TodoItem {
	var items []events.TodoItem
	for i, t := range todos {
		id := t.ID
		if id == "" {
			id = strconv.Itoa(i + 1)
		}
		items = append(items, events.TodoItem{ID: id, Description: t.Content, Status: t.Status})
	}
	return items
}

// splitMCP splits "mcp__server__tool" into its server and tool names.
func splitMCP(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp__")
	if !found {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// compactJSON returns input without insignificant white space, or nil when it is not valid JSON.
func compactJSON(input json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if len(input) == 0 || json.Compact(&buf, input) != nil {
		return nil
	}
	return buf.Bytes()
}
