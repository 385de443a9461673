package events

import "encoding/json"

// Kind names the variant held by a NormalizedPayload.
type Kind string

// Payload kinds.
const (
	KindReadFile     Kind = "read_file"
	KindModifyFile   Kind = "modify_file"
	KindShellExec    Kind = "shell_exec"
	KindCodeSearch   Kind = "code_search"
	KindHTTPRequest  Kind = "http_request"
	KindSubagentTask Kind = "subagent_task"
	KindCreateTask   Kind = "create_task"
	KindManageTodos  Kind = "manage_todos"
	KindGeneric      Kind = "generic"
	KindMisc         Kind = "misc"
)

// NormalizedPayload describes a tool call independently of the agent that made it. It is a
// discriminated union: Kind names exactly one non-nil field among the others.
type NormalizedPayload struct {
	Kind         Kind
	ReadFile     *ReadFile
	ModifyFile   *ModifyFile
	ShellExec    *ShellExec
	CodeSearch   *CodeSearch
	HTTPRequest  *HTTPRequest
	SubagentTask *SubagentTask
	CreateTask   *CreateTask
	ManageTodos  *ManageTodos
	Generic      *Generic
	Misc         *Misc
}

// ReadFile is a file read.
type ReadFile struct {
	FilePath string          `json:"file_path"`
	Offset   int             `json:"offset,omitempty"`
	Limit    int             `json:"limit,omitempty"`
	Output   *ReadFileOutput `json:"output,omitempty"`
}

// ReadFileOutput is what a file read returned.
type ReadFileOutput struct {
	Content    string `json:"content"`
	LineCount  int    `json:"line_count"`
	StartLine  int    `json:"start_line,omitempty"`
	TotalLines int    `json:"total_lines,omitempty"`
	// Truncated is true when the content is not the whole file.
	Truncated bool `json:"truncated"`
}

// Mutation types.
const (
	// MutationWrite writes a whole file that may or may not exist yet; Content is the new
	// content. Once the tool has run it becomes MutationCreate or MutationOverwrite.
	MutationWrite = "write"
	// MutationCreate writes a new file; Content is the whole file.
	MutationCreate = "create"
	// MutationOverwrite replaces an existing file's content; Content is the new content.
	MutationOverwrite = "overwrite"
	// MutationReplace replaces OldContent with NewContent inside a file.
	MutationReplace = "replace"
	// MutationNotebookCell edits one notebook cell; NewContent is its new source.
	MutationNotebookCell = "notebook_cell"
)

// ModifyFile is a change to one file.
type ModifyFile struct {
	FilePath  string     `json:"file_path"`
	Mutations []Mutation `json:"mutations,omitempty"`
}

// Mutation is one change inside a ModifyFile.
type Mutation struct {
	Type       string `json:"type"`
	Content    string `json:"content,omitempty"`
	OldContent string `json:"old_content,omitempty"`
	NewContent string `json:"new_content,omitempty"`
	// Diff is a unified diff of the change with real line numbers, once the tool has run.
	Diff       string `json:"diff,omitempty"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// ShellExec is a shell command (or an operation on a background shell).
type ShellExec struct {
	Command     string `json:"command,omitempty"`
	WorkDir     string `json:"work_dir,omitempty"`
	Description string `json:"description,omitempty"`
	// Timeout is in milliseconds, as the tool was given it.
	Timeout    int64        `json:"timeout,omitempty"`
	Background bool         `json:"background,omitempty"`
	ShellID    string       `json:"shell_id,omitempty"`
	Output     *ShellOutput `json:"output,omitempty"`
}

// ShellOutput is what a shell command produced.
type ShellOutput struct {
	// ExitCode is nil when it cannot be known.
	ExitCode    *int   `json:"exit_code,omitempty"`
	Stdout      string `json:"stdout,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
}

// CodeSearch is a search over files by name or content.
type CodeSearch struct {
	Query   string        `json:"query,omitempty"`
	Pattern string        `json:"pattern,omitempty"`
	Path    string        `json:"path,omitempty"`
	Glob    string        `json:"glob,omitempty"`
	Output  *SearchOutput `json:"output,omitempty"`
}

// SearchOutput is what a search found.
type SearchOutput struct {
	Files     []string `json:"files,omitempty"`
	FileCount int      `json:"file_count"`
	Truncated bool     `json:"truncated"`
	// Content holds matching lines when the search returned content rather than file names.
	Content string `json:"content,omitempty"`
}

// HTTPRequest is a web fetch or web search.
type HTTPRequest struct {
	URL        string `json:"url,omitempty"`
	Method     string `json:"method,omitempty"`
	Query      string `json:"query,omitempty"`
	Prompt     string `json:"prompt,omitempty"`
	Response   string `json:"response,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
}

// SubagentTask is work handed to a subagent.
type SubagentTask struct {
	Description  string `json:"description,omitempty"`
	Prompt       string `json:"prompt,omitempty"`
	SubagentType string `json:"subagent_type,omitempty"`
	Status       string `json:"status,omitempty"`
	Result       string `json:"result,omitempty"`
	AgentID      string `json:"agent_id,omitempty"`
}

// CreateTask is the creation of a task in the agent's task list.
type CreateTask struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	TaskID      string `json:"task_id,omitempty"`
}

// Todo operations.
const (
	TodoWrite  = "write"
	TodoUpdate = "update"
	TodoList   = "list"
)

// ManageTodos is a change to, or a look at, the agent's todo list.
type ManageTodos struct {
	Operation string     `json:"operation"`
	Items     []TodoItem `json:"items,omitempty"`
}

// TodoItem is one entry of a todo list.
type TodoItem struct {
	ID          string `json:"id,omitempty"`
	Description string `json:"description,omitempty"`
	Status      string `json:"status,omitempty"`
}

// Generic is any other tool, including MCP tools (Server and Tool set).
type Generic struct {
	Name   string          `json:"name"`
	Server string          `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output string          `json:"output,omitempty"`
	// IsError is true when the tool reported a failure.
	IsError bool `json:"is_error,omitempty"`
}

// Misc is a tool best shown as a label and some text (a plan, a question).
type Misc struct {
	Label   string `json:"label"`
	Details string `json:"details,omitempty"`
}
