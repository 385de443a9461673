package streamjson

import (
	"encoding/json"
	"testing"

	"github.com/drover-run/drover/events"
)

// Tool inputs below are copied from the pinned CLI's assistant frames.
func TestNormalizeToolCallKinds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, input string
		kind        events.Kind
		title       string
		want        string // the payload's JSON form
	}{
		{"Bash", `{"command":"echo hi; echo err >&2","description":"Say hi"}`, events.KindShellExec, "Run `echo hi; echo err >&2`",
			`{"kind":"shell_exec","shell_exec":{"command":"echo hi; echo err >&2","description":"Say hi"}}`},
		{"Bash", `{"command":"make\nmake test","timeout":1000,"run_in_background":true}`, events.KindShellExec, "Run `make …`",
			`{"kind":"shell_exec","shell_exec":{"command":"make\nmake test","timeout":1000,"background":true}}`},
		{"BashOutput", `{"bash_id":"x"}`, events.KindShellExec, "Read output of shell x",
			`{"kind":"shell_exec","shell_exec":{"shell_id":"x"}}`},
		{"KillShell", `{"shell_id":"y"}`, events.KindShellExec, "Stop shell y",
			`{"kind":"shell_exec","shell_exec":{"shell_id":"y"}}`},
		{"Read", `{"file_path":"/w/a.txt","offset":2,"limit":1}`, events.KindReadFile, "Read a.txt",
			`{"kind":"read_file","read_file":{"file_path":"/w/a.txt","offset":2,"limit":1}}`},
		{"Write", `{"file_path":"new.txt","content":"alpha\nbeta\n"}`, events.KindModifyFile, "Write new.txt",
			`{"kind":"modify_file","modify_file":{"file_path":"new.txt","mutations":[{"type":"write","content":"alpha\nbeta\n"}]}}`},
		{"Edit", `{"replace_all":false,"file_path":"src/main.go","old_string":"line2","new_string":"LINE2\nextra"}`, events.KindModifyFile, "Edit main.go",
			`{"kind":"modify_file","modify_file":{"file_path":"src/main.go","mutations":[{"type":"replace","old_content":"line2","new_content":"LINE2\nextra"}]}}`},
		{"MultiEdit", `{"file_path":"a.go","edits":[{"old_string":"a","new_string":"b"},{"old_string":"c","new_string":"d","replace_all":true}]}`, events.KindModifyFile, "Edit a.go",
			`{"kind":"modify_file","modify_file":{"file_path":"a.go","mutations":[{"type":"replace","old_content":"a","new_content":"b"},{"type":"replace","old_content":"c","new_content":"d","replace_all":true}]}}`},
		{"NotebookEdit", `{"notebook_path":"/n/x.ipynb","cell_id":"c1","new_source":"print(1)"}`, events.KindModifyFile, "Edit notebook x.ipynb",
			`{"kind":"modify_file","modify_file":{"file_path":"/n/x.ipynb","mutations":[{"type":"notebook_cell","new_content":"print(1)"}]}}`},
		{"Glob", `{"pattern":"*.txt"}`, events.KindCodeSearch, "Find `*.txt`",
			`{"kind":"code_search","code_search":{"pattern":"*.txt"}}`},
		{"Grep", `{"pattern":"line","path":".","type":"go","output_mode":"files_with_matches"}`, events.KindCodeSearch, "Search `line`",
			`{"kind":"code_search","code_search":{"pattern":"line","path":".","glob":"*.go"}}`},
		{"WebFetch", `{"url":"https://example.com","prompt":"summarize"}`, events.KindHTTPRequest, "Fetch https://example.com",
			`{"kind":"http_request","http_request":{"url":"https://example.com","method":"GET","prompt":"summarize"}}`},
		{"WebSearch", `{"query":"go slog"}`, events.KindHTTPRequest, "Search the web for `go slog`",
			`{"kind":"http_request","http_request":{"query":"go slog"}}`},
		{"Task", `{"description":"Investigate","prompt":"look","subagent_type":"general-purpose"}`, events.KindSubagentTask, "Agent: Investigate",
			`{"kind":"subagent_task","subagent_task":{"description":"Investigate","prompt":"look","subagent_type":"general-purpose"}}`},
		{"Agent", `{"prompt":"look","subagent_type":"Explore"}`, events.KindSubagentTask, "Agent: Explore",
			`{"kind":"subagent_task","subagent_task":{"prompt":"look","subagent_type":"Explore"}}`},
		{"TaskCreate", `{"subject":"Do X","description":"details of X","activeForm":"Doing X"}`, events.KindCreateTask, "Create task Do X",
			`{"kind":"create_task","create_task":{"title":"Do X","description":"details of X"}}`},
		{"TaskUpdate", `{"taskId":"1","status":"completed"}`, events.KindManageTodos, "Update task 1",
			`{"kind":"manage_todos","manage_todos":{"operation":"update","items":[{"id":"1","status":"completed"}]}}`},
		{"TaskList", `{}`, events.KindManageTodos, "List tasks",
			`{"kind":"manage_todos","manage_todos":{"operation":"list"}}`},
		{"TodoWrite", `{"todos":[{"content":"first","status":"in_progress","activeForm":"Doing first"},{"content":"second","status":"pending"}]}`, events.KindManageTodos, "Update todos",
			`{"kind":"manage_todos","manage_todos":{"operation":"write","items":[{"id":"1","description":"first","status":"in_progress"},{"id":"2","description":"second","status":"pending"}]}}`},
		{"ExitPlanMode", `{"plan":"1. do\n2. it"}`, events.KindMisc, "Present plan",
			`{"kind":"misc","misc":{"label":"plan","details":"1. do\n2. it"}}`},
		{"mcp__srv__thing", `{ "x" : 1 }`, events.KindGeneric, "srv: thing",
			`{"kind":"generic","generic":{"name":"mcp__srv__thing","server":"srv","tool":"thing","input":{"x":1}}}`},
		{"NoSuchTool", `{"x":1}`, events.KindGeneric, "NoSuchTool",
			`{"kind":"generic","generic":{"name":"NoSuchTool","input":{"x":1}}}`},
		{"mcp__broken", `not json`, events.KindGeneric, "mcp__broken",
			`{"kind":"generic","generic":{"name":"mcp__broken"}}`},
		{"Bash", `{"command":42}`, events.KindShellExec, "Run ``",
			`{"kind":"shell_exec","shell_exec":{}}`},
	}
	for _, c := range cases {
		p, title := normalizeToolCall(c.name, json.RawMessage(c.input))
		if p.Kind != c.kind {
			t.Errorf("%s %s: kind %s, want %s", c.name, c.input, p.Kind, c.kind)
		}
		if title != c.title {
			t.Errorf("%s %s: title %q, want %q", c.name, c.input, title, c.title)
		}
		got, err := jsonString(p)
		if err != nil {
			t.Errorf("%s: marshal: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.name, c.input, got, c.want)
		}
	}
}

func TestCodeSpanShortensOnRuneBoundary(t *testing.T) {
	t.Parallel()
	long := ""
	for range 50 {
		long += "é" // two bytes each
	}
	got := codeSpan(long)
	if want := "`" + long[:80] + "…`"; got != want {
		t.Errorf("codeSpan = %q, want %q", got, want)
	}
	odd := "a" + long
	if got := codeSpan(odd); got != "`"+odd[:79]+"…`" {
		t.Errorf("codeSpan cut inside a rune: %q", got)
	}
}

func TestSplitMCP(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp__github__create_issue", "github", "create_issue", true},
		{"mcp__a__b__c", "a", "b__c", true},
		{"mcp__solo", "", "", false},
		{"mcp____x", "", "", false},
		{"Bash", "", "", false},
	}
	for _, c := range cases {
		s, tool, ok := splitMCP(c.name)
		if s != c.server || tool != c.tool || ok != c.ok {
			t.Errorf("splitMCP(%q) = %q, %q, %v", c.name, s, tool, ok)
		}
	}
}
