package streamjson

import (
	"encoding/json"
	"testing"

	"github.com/drover-run/drover/events"
)

// The tool_result texts and tool_use_result values below are copied from the pinned CLI.
func TestApplyToolResult(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, tool, input string
		result            toolResult
		status            events.ToolStatus
		errText           string
		want              string // payload JSON after the result
	}{
		{"bash ok", "Bash", `{"command":"echo hi; echo err >&2"}`,
			toolResult{Text: "hi\nerr", Structured: json.RawMessage(`{"stdout":"hi\nerr","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false}`)},
			events.ToolComplete, "",
			`{"kind":"shell_exec","shell_exec":{"command":"echo hi; echo err >&2","output":{"exit_code":0,"stdout":"hi\nerr"}}}`},
		{"bash exit code", "Bash", `{"command":"echo out; echo bad >&2; exit 2"}`,
			toolResult{Text: "Exit code 2\nout\nbad", IsError: true, Structured: json.RawMessage(`"Error: Exit code 2\nout\nbad"`)},
			events.ToolError, "Exit code 2\nout\nbad",
			`{"kind":"shell_exec","shell_exec":{"command":"echo out; echo bad >&2; exit 2","output":{"exit_code":2,"stdout":"out\nbad"}}}`},
		{"bash blocked", "Bash", `{"command":"sleep 30"}`,
			toolResult{Text: "<tool_use_error>Blocked: standalone sleep 30.</tool_use_error>", IsError: true, Structured: json.RawMessage(`"Error: Blocked: standalone sleep 30."`)},
			events.ToolError, "Blocked: standalone sleep 30.",
			`{"kind":"shell_exec","shell_exec":{"command":"sleep 30","output":{"stderr":"Blocked: standalone sleep 30."}}}`},
		{"bash background", "Bash", `{"command":"echo bg; sleep 1","run_in_background":true}`,
			toolResult{Text: "Command running in background with ID: bgqut8eka.", Structured: json.RawMessage(`{"stdout":"","stderr":"","interrupted":false,"backgroundTaskId":"bgqut8eka"}`)},
			events.ToolComplete, "",
			`{"kind":"shell_exec","shell_exec":{"command":"echo bg; sleep 1","background":true,"shell_id":"bgqut8eka"}}`},
		{"bash interrupted", "Bash", `{"command":"make"}`,
			toolResult{Text: "partial", Structured: json.RawMessage(`{"stdout":"partial","stderr":"","interrupted":true}`)},
			events.ToolComplete, "",
			`{"kind":"shell_exec","shell_exec":{"command":"make","output":{"stdout":"partial","interrupted":true}}}`},
		{"bash in a subagent, no structured result", "Bash", `{"command":"echo from-sub"}`,
			toolResult{Text: "from-sub"},
			events.ToolComplete, "",
			`{"kind":"shell_exec","shell_exec":{"command":"echo from-sub","output":{"stdout":"from-sub"}}}`},
		{"write create", "Write", `{"file_path":"new.txt","content":"alpha\nbeta\n"}`,
			toolResult{Text: "File created successfully at: new.txt", Structured: json.RawMessage(`{"type":"create","filePath":"new.txt","content":"alpha\nbeta\n","structuredPatch":[],"originalFile":null,"userModified":false}`)},
			events.ToolComplete, "",
			`{"kind":"modify_file","modify_file":{"file_path":"new.txt","mutations":[{"type":"create","content":"alpha\nbeta\n","diff":"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+alpha\n+beta\n"}]}}`},
		{"write overwrite", "Write", `{"file_path":"a.txt","content":"replaced\n"}`,
			toolResult{Text: "The file a.txt has been updated successfully.", Structured: json.RawMessage(`{"type":"update","filePath":"a.txt","content":"replaced\n","structuredPatch":[{"oldStart":1,"oldLines":3,"newStart":1,"newLines":1,"lines":["-line1","-line2","-line3","+replaced"]}],"originalFile":"line1\nline2\nline3\n"}`)},
			events.ToolComplete, "",
			`{"kind":"modify_file","modify_file":{"file_path":"a.txt","mutations":[{"type":"overwrite","content":"replaced\n","diff":"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1 @@\n-line1\n-line2\n-line3\n+replaced\n"}]}}`},
		{"edit", "Edit", `{"file_path":"big.txt","old_string":"l5\n","new_string":""}`,
			toolResult{Text: "The file big.txt has been updated successfully.", Structured: json.RawMessage(`{"filePath":"big.txt","oldString":"l5\n","newString":"","originalFile":"l1\n","structuredPatch":[{"oldStart":2,"oldLines":7,"newStart":2,"newLines":6,"lines":[" l2"," l3"," l4","-l5"," l6"," l7"," l8"]}],"userModified":false,"replaceAll":false}`)},
			events.ToolComplete, "",
			`{"kind":"modify_file","modify_file":{"file_path":"big.txt","mutations":[{"type":"replace","old_content":"l5\n","diff":"--- a/big.txt\n+++ b/big.txt\n@@ -2,7 +2,6 @@\n l2\n l3\n l4\n-l5\n l6\n l7\n l8\n"}]}}`},
		{"edit fails", "Edit", `{"file_path":"big.txt","old_string":"zzz","new_string":"y"}`,
			toolResult{Text: "<tool_use_error>String to replace not found in file.\nString: zzz</tool_use_error>", IsError: true, Structured: json.RawMessage(`"Error: String to replace not found in file.\nString: zzz"`)},
			events.ToolError, "String to replace not found in file.\nString: zzz",
			`{"kind":"modify_file","modify_file":{"file_path":"big.txt","mutations":[{"type":"replace","old_content":"zzz","new_content":"y"}]}}`},
		{"read part", "Read", `{"file_path":"a.txt","offset":2,"limit":1}`,
			toolResult{Text: "2\tLINE2", Structured: json.RawMessage(`{"type":"text","file":{"filePath":"a.txt","content":"LINE2","numLines":1,"startLine":2,"totalLines":5}}`)},
			events.ToolComplete, "",
			`{"kind":"read_file","read_file":{"file_path":"a.txt","offset":2,"limit":1,"output":{"content":"LINE2","line_count":1,"start_line":2,"total_lines":5,"truncated":true}}}`},
		{"read whole", "Read", `{"file_path":"big.txt"}`,
			toolResult{Text: "1\tl1\n2\tl2\n3\t", Structured: json.RawMessage(`{"type":"text","file":{"filePath":"big.txt","content":"l1\nl2\n","numLines":3,"startLine":1,"totalLines":3}}`)},
			events.ToolComplete, "",
			`{"kind":"read_file","read_file":{"file_path":"big.txt","output":{"content":"l1\nl2\n","line_count":3,"start_line":1,"total_lines":3,"truncated":false}}}`},
		{"read missing", "Read", `{"file_path":"missing.txt"}`,
			toolResult{Text: "File does not exist.", IsError: true, Structured: json.RawMessage(`"Error: File does not exist."`)},
			events.ToolError, "File does not exist.",
			`{"kind":"read_file","read_file":{"file_path":"missing.txt"}}`},
		{"glob", "Glob", `{"pattern":"*.txt"}`,
			toolResult{Text: "a.txt\nb.txt", Structured: json.RawMessage(`{"filenames":["a.txt","b.txt"],"durationMs":3,"numFiles":2,"truncated":false}`)},
			events.ToolComplete, "",
			`{"kind":"code_search","code_search":{"pattern":"*.txt","output":{"files":["a.txt","b.txt"],"file_count":2,"truncated":false}}}`},
		{"grep content", "Grep", `{"pattern":"line","output_mode":"content"}`,
			toolResult{Text: "a.txt:1:line1", Structured: json.RawMessage(`{"mode":"content","numFiles":0,"filenames":[],"content":"a.txt:1:line1","numLines":1,"appliedLimit":250}`)},
			events.ToolComplete, "",
			`{"kind":"code_search","code_search":{"pattern":"line","output":{"file_count":0,"truncated":true,"content":"a.txt:1:line1"}}}`},
		{"unavailable tool", "Grep", `{"pattern":"line"}`,
			toolResult{Text: "<tool_use_error>Error: No such tool available: Grep.</tool_use_error>", IsError: true, Structured: json.RawMessage(`"Error: No such tool available: Grep."`)},
			events.ToolError, "Error: No such tool available: Grep.",
			`{"kind":"code_search","code_search":{"pattern":"line"}}`},
		{"todos", "TodoWrite", `{"todos":[{"content":"first","status":"pending"}]}`,
			toolResult{Text: "Todos have been modified successfully.", Structured: json.RawMessage(`{"oldTodos":[],"newTodos":[{"content":"first","status":"completed","activeForm":"Doing first"}]}`)},
			events.ToolComplete, "",
			`{"kind":"manage_todos","manage_todos":{"operation":"write","items":[{"id":"1","description":"first","status":"completed"}]}}`},
		{"task list", "TaskList", `{}`,
			toolResult{Text: "#1 Do X", Structured: json.RawMessage(`{"tasks":[{"id":"1","subject":"Do X","status":"pending"}]}`)},
			events.ToolComplete, "",
			`{"kind":"manage_todos","manage_todos":{"operation":"list","items":[{"id":"1","description":"Do X","status":"pending"}]}}`},
		{"task create", "TaskCreate", `{"subject":"Do X"}`,
			toolResult{Text: "Task #1 created", Structured: json.RawMessage(`{"task":{"id":"1","subject":"Do X"}}`)},
			events.ToolComplete, "",
			`{"kind":"create_task","create_task":{"title":"Do X","task_id":"1"}}`},
		{"agent sync", "Task", `{"description":"Fg","prompt":"fg","subagent_type":"general-purpose"}`,
			toolResult{Text: "[Subagent hand-back] …", Structured: json.RawMessage(`{"status":"completed","prompt":"fg","agentId":"a1b651c9dd2e4002c","content":[{"type":"text","text":"fg result"}],"totalDurationMs":398}`)},
			events.ToolComplete, "",
			`{"kind":"subagent_task","subagent_task":{"description":"Fg","prompt":"fg","subagent_type":"general-purpose","status":"completed","result":"fg result","agent_id":"a1b651c9dd2e4002c"}}`},
		{"agent async", "Task", `{"description":"Investigate","prompt":"p"}`,
			toolResult{Text: "Async agent launched successfully.", Structured: json.RawMessage(`{"isAsync":true,"status":"async_launched","agentId":"aee8702cd230edf52","description":"Investigate"}`)},
			events.ToolComplete, "",
			`{"kind":"subagent_task","subagent_task":{"description":"Investigate","prompt":"p","status":"async_launched","agent_id":"aee8702cd230edf52"}}`},
		{"web fetch", "WebFetch", `{"url":"https://example.com","prompt":"p"}`,
			toolResult{Text: "summary", Structured: json.RawMessage(`{"bytes":10,"code":200,"codeText":"OK","result":"summary","durationMs":5,"url":"https://example.com"}`)},
			events.ToolComplete, "",
			`{"kind":"http_request","http_request":{"url":"https://example.com","method":"GET","prompt":"p","response":"summary","status_code":200}}`},
		{"web fetch blocked", "WebFetch", `{"url":"http://127.0.0.1/x","prompt":"p"}`,
			toolResult{Text: "Unable to verify if domain 127.0.0.1 is safe to fetch.", IsError: true, Structured: json.RawMessage(`"Error: Unable to verify if domain 127.0.0.1 is safe to fetch."`)},
			events.ToolError, "Unable to verify if domain 127.0.0.1 is safe to fetch.",
			`{"kind":"http_request","http_request":{"url":"http://127.0.0.1/x","method":"GET","prompt":"p","response":"Unable to verify if domain 127.0.0.1 is safe to fetch.","is_error":true}}`},
		{"mcp", "mcp__srv__thing", `{"x":1}`,
			toolResult{Text: "thing done"},
			events.ToolComplete, "",
			`{"kind":"generic","generic":{"name":"mcp__srv__thing","server":"srv","tool":"thing","input":{"x":1},"output":"thing done"}}`},
		{"rejected by user", "Write", `{"file_path":"w2.txt","content":"y\n"}`,
			toolResult{Text: "The user doesn't want to proceed with this tool use.", IsError: true, Structured: json.RawMessage(`"User rejected tool use"`)},
			events.ToolError, "The user doesn't want to proceed with this tool use.",
			`{"kind":"modify_file","modify_file":{"file_path":"w2.txt","mutations":[{"type":"write","content":"y\n"}]}}`},
		{"error string without is_error", "Bash", `{"command":"x"}`,
			toolResult{Text: "boom", Structured: json.RawMessage(`"Error: boom"`)},
			events.ToolError, "boom",
			`{"kind":"shell_exec","shell_exec":{"command":"x","output":{"stderr":"boom"}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, _ := normalizeToolCall(c.tool, json.RawMessage(c.input))
			status, errText := applyToolResult(p, c.result)
			if status != c.status || errText != c.errText {
				t.Errorf("status %s %q, want %s %q", status, errText, c.status, c.errText)
			}
			got, err := jsonString(p)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if got != c.want {
				t.Errorf("payload:\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestApplyToolResultNilPayload(t *testing.T) {
	t.Parallel()
	status, msg := applyToolResult(nil, toolResult{Text: "x", IsError: true})
	if status != events.ToolError || msg != "x" {
		t.Errorf("got %s %q", status, msg)
	}
}

func TestCreationDiffWithoutFinalNewline(t *testing.T) {
	t.Parallel()
	got := creationDiff("/abs/f.txt", "a\nb")
	want := "--- /dev/null\n+++ b/abs/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
	if got != want {
		t.Errorf("creationDiff:\n got %q\nwant %q", got, want)
	}
	if creationDiff("f", "") != "" {
		t.Error("an empty file has a diff")
	}
	if unifiedDiff("f", nil) != "" {
		t.Error("no hunks but a diff")
	}
}
