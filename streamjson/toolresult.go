package streamjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/drover-run/drover/events"
)

// toolResult is what the CLI reported for one tool call: the tool_result block of a user frame
// and the frame's structured tool_use_result.
type toolResult struct {
	// Text is the tool_result content flattened to text.
	Text    string
	IsError bool
	// Structured is the frame's tool_use_result: an object whose shape depends on the tool, a
	// string ("Error: …") or nothing (subagent frames carry none).
	Structured json.RawMessage
}

// Structured results of the built-in tools, as far as the adapter uses them.
type (
	shellResult struct {
		Stdout           string `json:"stdout"`
		Stderr           string `json:"stderr"`
		Interrupted      bool   `json:"interrupted"`
		BackgroundTaskID string `json:"backgroundTaskId"`
	}
	fileChangeResult struct {
		Type            string      `json:"type"`
		FilePath        string      `json:"filePath"`
		Content         string      `json:"content"`
		StructuredPatch []patchHunk `json:"structuredPatch"`
	}
	readResult struct {
		Type string `json:"type"`
		File struct {
			FilePath   string `json:"filePath"`
			Content    string `json:"content"`
			NumLines   int    `json:"numLines"`
			StartLine  int    `json:"startLine"`
			TotalLines int    `json:"totalLines"`
		} `json:"file"`
	}
	searchResult struct {
		Filenames    []string `json:"filenames"`
		NumFiles     int      `json:"numFiles"`
		Content      string   `json:"content"`
		Truncated    bool     `json:"truncated"`
		AppliedLimit *int     `json:"appliedLimit"`
	}
	todoResult struct {
		NewTodos []todoInput `json:"newTodos"`
	}
	taskResult struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
		TaskID string         `json:"taskId"`
		Tasks  []taskListItem `json:"tasks"`
	}
	taskListItem struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
		Status  string `json:"status"`
	}
	agentResult struct {
		Status  string            `json:"status"`
		AgentID string            `json:"agentId"`
		Content []resultTextBlock `json:"content"`
	}
	resultTextBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	webFetchResult struct {
		Code   int    `json:"code"`
		Result string `json:"result"`
	}
)

// structuredObject decodes r.Structured into v when it is a JSON object and reports whether it did.
func (r toolResult) structuredObject(v any) bool {
	s := bytes.TrimSpace(r.Structured)
	if len(s) == 0 || s[0] != '{' {
		return false
	}
	return json.Unmarshal(s, v) == nil
}

// failed reports whether the tool failed: the tool_result says so, or the structured result is
// an "Error: …" string.
func (r toolResult) failed() bool {
	if r.IsError {
		return true
	}
	s := bytes.TrimSpace(r.Structured)
	if len(s) == 0 || s[0] != '"' {
		return false
	}
	var msg string
	return json.Unmarshal(s, &msg) == nil && strings.HasPrefix(msg, "Error:")
}

// errorText is the tool's failure message without the CLI's <tool_use_error> wrapper.
func (r toolResult) errorText() string {
	t := strings.TrimSpace(r.Text)
	t = strings.TrimPrefix(t, "<tool_use_error>")
	t = strings.TrimSuffix(t, "</tool_use_error>")
	return strings.TrimSpace(t)
}

// applyToolResult fills p with the tool's output and returns the call's final status and, for a
// failed call, the error message. p is modified in place; a nil p is left alone.
func applyToolResult(p *events.NormalizedPayload, r toolResult) (events.ToolStatus, string) {
	status, errText := events.ToolComplete, ""
	if r.failed() {
		status, errText = events.ToolError, r.errorText()
	}
	if p == nil {
		return status, errText
	}
	failed := status == events.ToolError
	switch p.Kind {
	case events.KindShellExec:
		applyShell(p.ShellExec, r, failed)
	case events.KindModifyFile:
		if !failed {
			applyFileChange(p.ModifyFile, r)
		}
	case events.KindReadFile:
		if !failed {
			applyRead(p.ReadFile, r)
		}
	case events.KindCodeSearch:
		if !failed {
			applySearch(p.CodeSearch, r)
		}
	case events.KindHTTPRequest:
		h := p.HTTPRequest
		h.IsError = failed
		var fetched webFetchResult
		if !failed && r.structuredObject(&fetched) && fetched.Result != "" {
			h.Response, h.StatusCode = fetched.Result, fetched.Code
		} else {
			h.Response = cmpOrText(errText, r.Text, failed)
		}
	case events.KindSubagentTask:
		applyAgent(p.SubagentTask, r, failed)
	case events.KindCreateTask:
		var res taskResult
		if !failed && r.structuredObject(&res) {
			p.CreateTask.TaskID = firstNonEmpty(res.Task.ID, res.TaskID)
		}
	case events.KindManageTodos:
		applyTodos(p.ManageTodos, r, failed)
	case events.KindGeneric:
		p.Generic.Output = cmpOrText(errText, r.Text, failed)
		p.Generic.IsError = failed
	}
	return status, errText
}

func cmpOrText(errText, text string, failed bool) string {
	if failed {
		return errText
	}
	return text
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func applyShell(s *events.ShellExec, r toolResult, failed bool) {
	var res shellResult
	out := &events.ShellOutput{}
	switch {
	case failed:
		// The CLI reports a failed command as "Exit code N\n<output>" (stdout and stderr merged).
		text := r.errorText()
		if code, rest, ok := parseExitCode(text); ok {
			out.ExitCode = &code
			out.Stdout = rest
		} else {
			out.Stderr = text
		}
	case r.structuredObject(&res):
		out.Stdout, out.Stderr, out.Interrupted = res.Stdout, res.Stderr, res.Interrupted
		if res.BackgroundTaskID != "" {
			s.ShellID = res.BackgroundTaskID
			s.Background = true
		} else if !res.Interrupted {
			zero := 0
			out.ExitCode = &zero
		}
	default:
		out.Stdout = r.Text
	}
	if *out != (events.ShellOutput{}) {
		s.Output = out
	}
}

// parseExitCode splits "Exit code N\nrest" into N and rest.
func parseExitCode(text string) (int, string, bool) {
	rest, ok := strings.CutPrefix(text, "Exit code ")
	if !ok {
		return 0, "", false
	}
	num, after, _ := strings.Cut(rest, "\n")
	code, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return 0, "", false
	}
	return code, after, true
}

func applyFileChange(m *events.ModifyFile, r toolResult) {
	var res fileChangeResult
	if !r.structuredObject(&res) {
		return
	}
	if m.FilePath == "" {
		m.FilePath = res.FilePath
	}
	diff := unifiedDiff(m.FilePath, res.StructuredPatch)
	for i := range m.Mutations {
		mu := &m.Mutations[i]
		if mu.Type == events.MutationWrite {
			switch res.Type {
			case "create":
				mu.Type = events.MutationCreate
				diff = creationDiff(m.FilePath, mu.Content)
			case "update":
				mu.Type = events.MutationOverwrite
			}
		}
	}
	if len(m.Mutations) > 0 {
		// A multi-edit's structured patch covers all its edits: it goes on the first one.
		m.Mutations[0].Diff = diff
	}
}

func applyRead(rf *events.ReadFile, r toolResult) {
	var res readResult
	if r.structuredObject(&res) && res.Type == "text" {
		f := res.File
		rf.Output = &events.ReadFileOutput{
			Content:    f.Content,
			LineCount:  f.NumLines,
			StartLine:  f.StartLine,
			TotalLines: f.TotalLines,
			Truncated:  f.StartLine > 1 || (f.TotalLines > 0 && f.StartLine+f.NumLines-1 < f.TotalLines),
		}
		return
	}
	rf.Output = &events.ReadFileOutput{Content: r.Text, LineCount: countLines(r.Text)}
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

func applySearch(cs *events.CodeSearch, r toolResult) {
	var res searchResult
	if r.structuredObject(&res) {
		cs.Output = &events.SearchOutput{
			Files:     res.Filenames,
			FileCount: max(res.NumFiles, len(res.Filenames)),
			Truncated: res.Truncated || res.AppliedLimit != nil,
			Content:   res.Content,
		}
		return
	}
	cs.Output = &events.SearchOutput{Content: r.Text}
}

func applyAgent(st *events.SubagentTask, r toolResult, failed bool) {
	var res agentResult
	if !failed && r.structuredObject(&res) {
		st.Status, st.AgentID = res.Status, res.AgentID
		var texts []string
		for _, b := range res.Content {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		st.Result = strings.Join(texts, "\n")
		return
	}
	if failed {
		st.Status, st.Result = "error", r.errorText()
		return
	}
	st.Status, st.Result = "completed", r.Text
}

func applyTodos(mt *events.ManageTodos, r toolResult, failed bool) {
	if failed {
		return
	}
	var todos todoResult
	if mt.Operation == events.TodoWrite && r.structuredObject(&todos) && todos.NewTodos != nil {
		mt.Items = todoItems(todos.NewTodos)
		return
	}
	var tasks taskResult
	if mt.Operation == events.TodoList && r.structuredObject(&tasks) {
		mt.Items = nil
		for _, t := range tasks.Tasks {
			mt.Items = append(mt.Items, events.TodoItem{ID: t.ID, Description: t.Subject, Status: t.Status})
		}
	}
}
