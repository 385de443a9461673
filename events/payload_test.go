package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func intPtr(v int) *int { return &v }

// validPayloads has one payload of every kind with most fields set, and the JSON each encodes to.
var validPayloads = []struct {
	name string
	p    NormalizedPayload
	json string
}{
	{"read_file", NormalizedPayload{Kind: KindReadFile, ReadFile: &ReadFile{FilePath: "/w/main.go", Offset: 10, Limit: 5,
		Output: &ReadFileOutput{Content: "package main\n", LineCount: 1, StartLine: 10, TotalLines: 40, Truncated: true}}},
		`{"kind":"read_file","read_file":{"file_path":"/w/main.go","offset":10,"limit":5,"output":{"content":"package main\n","line_count":1,"start_line":10,"total_lines":40,"truncated":true}}}`},
	{"modify_file", NormalizedPayload{Kind: KindModifyFile, ModifyFile: &ModifyFile{FilePath: "a.txt",
		Mutations: []Mutation{{Type: MutationReplace, OldContent: "a", NewContent: "b", Diff: "@@ -1 +1 @@\n-a\n+b\n", ReplaceAll: true}}}},
		`{"kind":"modify_file","modify_file":{"file_path":"a.txt","mutations":[{"type":"replace","old_content":"a","new_content":"b","diff":"@@ -1 +1 @@\n-a\n+b\n","replace_all":true}]}}`},
	{"shell_exec", NormalizedPayload{Kind: KindShellExec, ShellExec: &ShellExec{Command: "echo hi", Description: "greet", Timeout: 1000,
		Output: &ShellOutput{ExitCode: intPtr(0), Stdout: "hi\n"}}},
		`{"kind":"shell_exec","shell_exec":{"command":"echo hi","description":"greet","timeout":1000,"output":{"exit_code":0,"stdout":"hi\n"}}}`},
	{"code_search", NormalizedPayload{Kind: KindCodeSearch, CodeSearch: &CodeSearch{Pattern: "func main", Path: "/w", Glob: "*.go",
		Output: &SearchOutput{Files: []string{"/w/main.go"}, FileCount: 1}}},
		`{"kind":"code_search","code_search":{"pattern":"func main","path":"/w","glob":"*.go","output":{"files":["/w/main.go"],"file_count":1,"truncated":false}}}`},
	{"http_request", NormalizedPayload{Kind: KindHTTPRequest, HTTPRequest: &HTTPRequest{URL: "https://example.com", Method: "GET", Response: "ok", StatusCode: 200}},
		`{"kind":"http_request","http_request":{"url":"https://example.com","method":"GET","response":"ok","status_code":200}}`},
	{"subagent_task", NormalizedPayload{Kind: KindSubagentTask, SubagentTask: &SubagentTask{Description: "d", Prompt: "p", SubagentType: "general-purpose", Status: "completed", Result: "r"}},
		`{"kind":"subagent_task","subagent_task":{"description":"d","prompt":"p","subagent_type":"general-purpose","status":"completed","result":"r"}}`},
	{"create_task", NormalizedPayload{Kind: KindCreateTask, CreateTask: &CreateTask{Title: "t", Description: "d", TaskID: "1"}},
		`{"kind":"create_task","create_task":{"title":"t","description":"d","task_id":"1"}}`},
	{"manage_todos", NormalizedPayload{Kind: KindManageTodos, ManageTodos: &ManageTodos{Operation: TodoWrite, Items: []TodoItem{{ID: "1", Description: "x", Status: "pending"}}}},
		`{"kind":"manage_todos","manage_todos":{"operation":"write","items":[{"id":"1","description":"x","status":"pending"}]}}`},
	{"generic", NormalizedPayload{Kind: KindGeneric, Generic: &Generic{Name: "mcp__srv__do", Server: "srv", Tool: "do", Input: json.RawMessage(`{"a":1}`), Output: "done"}},
		`{"kind":"generic","generic":{"name":"mcp__srv__do","server":"srv","tool":"do","input":{"a":1},"output":"done"}}`},
	{"misc", NormalizedPayload{Kind: KindMisc, Misc: &Misc{Label: "plan", Details: "1. do it"}},
		`{"kind":"misc","misc":{"label":"plan","details":"1. do it"}}`},
}

func TestPayloadJSONForm(t *testing.T) {
	t.Parallel()
	for _, tc := range validPayloads {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tc.p)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tc.json {
				t.Errorf("Marshal:\n got %s\nwant %s", got, tc.json)
			}
			var back NormalizedPayload
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(back, tc.p) {
				t.Errorf("round trip:\n got %+v\nwant %+v", back, tc.p)
			}
		})
	}
}

func TestPayloadRefusesInvalid(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name string
		p    NormalizedPayload
	}{
		{"empty", NormalizedPayload{}},
		{"kind without field", NormalizedPayload{Kind: KindShellExec}},
		{"field without kind", NormalizedPayload{ShellExec: &ShellExec{}}},
		{"wrong kind", NormalizedPayload{Kind: KindReadFile, ShellExec: &ShellExec{}}},
		{"two fields", NormalizedPayload{Kind: KindShellExec, ShellExec: &ShellExec{}, Misc: &Misc{}}},
		{"unknown kind", NormalizedPayload{Kind: "teleport", Misc: &Misc{}}},
	}
	for _, tc := range bad {
		if err := tc.p.Validate(); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: Validate = %v, want ErrInvalidPayload", tc.name, err)
		}
		if _, err := json.Marshal(tc.p); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: Marshal error = %v, want ErrInvalidPayload", tc.name, err)
		}
	}

	badJSON := []string{
		`{}`,
		`{"kind":"shell_exec"}`,
		`{"kind":"shell_exec","shell_exec":null}`,
		`{"kind":"read_file","shell_exec":{}}`,
		`{"kind":"shell_exec","shell_exec":{},"misc":{"label":"x"}}`,
		`{"kind":"teleport","teleport":{}}`,
		`{"shell_exec":{}}`,
	}
	for _, in := range badJSON {
		var p NormalizedPayload
		if err := json.Unmarshal([]byte(in), &p); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("Unmarshal(%s) error = %v, want ErrInvalidPayload", in, err)
		}
	}
	var p NormalizedPayload
	if err := json.Unmarshal([]byte(`{"kind":1}`), &p); err == nil {
		t.Error("Unmarshal of a numeric kind succeeded")
	}
}

func TestPayloadNullLeavesValue(t *testing.T) {
	t.Parallel()
	p := validPayloads[0].p
	if err := p.UnmarshalJSON([]byte(" null ")); err != nil {
		t.Fatalf("UnmarshalJSON(null): %v", err)
	}
	if p.Kind != KindReadFile {
		t.Errorf("null changed the payload to %+v", p)
	}
	var ev AgentEvent
	if err := json.Unmarshal([]byte(`{"type":"tool_call","normalized":null}`), &ev); err != nil || ev.Normalized != nil {
		t.Errorf("event with null payload: %v, %+v", err, ev.Normalized)
	}
}
