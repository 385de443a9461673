package streamjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
)

// TestPermissionDetails: what a permission_request tells the person who decides.
func TestPermissionDetails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, request string
		// want maps permission fields (as encoded) to their expected JSON; "-" means absent.
		want map[string]string
	}{
		{"bash", `{"tool_name":"Bash","input":{"command":"go test ./...\ngo vet ./..."},"tool_use_id":"t"}`, map[string]string{
			"summary": `"go test ./... …"`, "diff": "-",
			"allow_always": `[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"go test ./...\ngo vet ./..."}],"behavior":"allow","destination":"session"},{"type":"addRules","rules":[{"toolName":"Bash"}],"behavior":"allow","destination":"session"}]`,
		}},
		{"edit", `{"tool_name":"Edit","input":{"file_path":"/w/a.go","old_string":"a := 1\nb := 2","new_string":"a := 3"},"tool_use_id":"t"}`, map[string]string{
			"summary": `"/w/a.go"`, "diff": `"--- a/w/a.go\n+++ b/w/a.go\n@@ @@\n-a := 1\n-b := 2\n+a := 3\n"`,
			"allow_always": `[{"type":"addRules","rules":[{"toolName":"Edit","ruleContent":"//w/a.go"}],"behavior":"allow","destination":"session"},{"type":"addRules","rules":[{"toolName":"Edit"}],"behavior":"allow","destination":"session"}]`,
		}},
		{"multi edit", `{"tool_name":"MultiEdit","input":{"file_path":"/w/b.go","edits":[{"old_string":"x","new_string":"y"},{"old_string":"p","new_string":""}]},"tool_use_id":"t"}`, map[string]string{
			"diff": `"--- a/w/b.go\n+++ b/w/b.go\n@@ @@\n-x\n+y\n@@ @@\n-p\n"`,
		}},
		{"write", `{"tool_name":"Write","input":{"file_path":"/w/new.txt","content":"one\ntwo\n"},"tool_use_id":"t"}`, map[string]string{
			"summary": `"/w/new.txt"`, "diff": `"--- a/w/new.txt\n+++ b/w/new.txt\n@@ @@\n+one\n+two\n"`,
		}},
		{"fetch", `{"tool_name":"WebFetch","input":{"url":"https://example.com/x","prompt":"p"},"tool_use_id":"t"}`, map[string]string{
			"summary": `"https://example.com/x"`,
		}},
		{"mcp", `{"tool_name":"mcp__srv__thing","input":{"x":1},"tool_use_id":"t","mcp_server":{"name":"srv","source":"dynamic"}}`, map[string]string{
			"summary": `"srv: thing"`, "allow_always": `[{"type":"addRules","rules":[{"toolName":"mcp__srv__thing"}],"behavior":"allow","destination":"session"}]`,
		}},
		{"question", `{"tool_name":"AskUserQuestion","input":{"questions":[{"question":"Which DB?","header":"DB","options":[{"label":"PG","description":"pg"},{"label":"Lite","description":"l"}],"multiSelect":true}]},"tool_use_id":"t","requires_user_interaction":true}`, map[string]string{
			"summary": `"Which DB?"`, "requires_user_interaction": "true", "allow_always": "-",
			"questions": `[{"question":"Which DB?","header":"DB","multi_select":true,"options":[{"label":"PG","description":"pg"},{"label":"Lite","description":"l"}]}]`,
		}},
		{"plan", `{"tool_name":"ExitPlanMode","input":{"plan":"\n## Ship it\n1. a\n","planFilePath":"/c/plans/p.md"},"tool_use_id":"t","requires_user_interaction":true}`, map[string]string{
			"summary": `"Ship it"`, "plan": `"\n## Ship it\n1. a\n"`, "plan_file": `"/c/plans/p.md"`, "allow_always": "-",
		}},
		{"flagged", `{"tool_name":"Bash","input":{"command":"rm -rf /"},"tool_use_id":"t","permission_suggestions":[],"decision_reason":"Dangerous rm operation on critical path: /","decision_reason_type":"safetyCheck","suppress_always_allow_rule":true}`, map[string]string{
			"allow_always": "-", "decision_reason_type": `"safetyCheck"`, "suggestions": "[]",
		}},
	}
	for _, tt := range tests {
		var c claudecode.CanUseTool
		if err := json.Unmarshal([]byte(tt.request), &c); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		_, title := normalizeToolCall(c.ToolName, c.Input)
		s, err := jsonString(permission(&c, title))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatal(err)
		}
		for field, want := range tt.want {
			g, ok := got[field]
			switch {
			case want == "-" && ok:
				t.Errorf("%s: %s = %s, want it absent", tt.name, field, g)
			case want != "-" && string(g) != want:
				t.Errorf("%s: %s =\n  %s\nwant\n  %s", tt.name, field, g, want)
			}
		}
	}
}

// TestPermissionSummaryShortened: a long command is cut on a rune boundary.
func TestPermissionSummaryShortened(t *testing.T) {
	t.Parallel()
	cmd := strings.Repeat("é", 150)
	c := claudecode.CanUseTool{ToolName: "Bash", Input: json.RawMessage(`{"command":"` + cmd + `"}`)}
	p := permission(&c, "")
	if !strings.HasSuffix(p.Summary, "…") || len(p.Summary) > maxSummary+len("…") || !strings.HasPrefix(cmd, strings.TrimSuffix(p.Summary, "…")) {
		t.Errorf("summary %q", p.Summary)
	}
}
