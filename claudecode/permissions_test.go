package claudecode

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSupervisedToolMatcherList keeps SupervisedToolMatcher and ReadOnlyTools in step. (Go's
// regexp has no lookahead; the CLI's reading of the matcher is pinned by realcli.)
func TestSupervisedToolMatcherList(t *testing.T) {
	t.Parallel()
	names := slices.Clone(ReadOnlyTools)
	slices.Sort(names)
	if !slices.Equal(names, ReadOnlyTools) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("ReadOnlyTools is not sorted and unique: %v", ReadOnlyTools)
	}
	if want := "^(?!(?:" + strings.Join(ReadOnlyTools, "|") + ")$).*"; SupervisedToolMatcher != want {
		t.Errorf("SupervisedToolMatcher =\n%s\nbuilt from ReadOnlyTools:\n%s", SupervisedToolMatcher, want)
	}
	hooks := SupervisedHooks("tools", "stop")
	if m := hooks[HookPreToolUse]; len(m) != 1 || m[0].Matcher != SupervisedToolMatcher || m[0].HookCallbackIDs[0] != "tools" {
		t.Errorf("PreToolUse hooks %+v", m)
	}
	if m := hooks[HookStop]; len(m) != 1 || m[0].Matcher != "" || m[0].HookCallbackIDs[0] != "stop" {
		t.Errorf("Stop hooks %+v", m)
	}
	if _, ok := SupervisedHooks("tools", "")[HookStop]; ok {
		t.Errorf("a Stop hook without a callback id")
	}
}

func TestParsePermissionUpdates(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"}],"behavior":"allow","destination":"localSettings"},
		{"type":"addDirectories","directories":["/w"],"destination":"session"},7,{"type":"setMode","mode":"acceptEdits","destination":"session","extra":1}]`)
	got, err := ParsePermissionUpdates(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []PermissionUpdate{
		{Type: UpdateAddRules, Rules: []PermissionRule{{ToolName: "Bash", RuleContent: "ls"}}, Behavior: BehaviorAllow, Destination: DestinationLocalSettings},
		{Type: UpdateAddDirectories, Directories: []string{"/w"}, Destination: DestinationSession},
		{Type: UpdateSetMode, Mode: PermissionAcceptEdits, Destination: DestinationSession},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if in := got[0].InSession(); in.Destination != DestinationSession || got[0].Destination != DestinationLocalSettings {
		t.Errorf("InSession: %+v (original %+v)", in, got[0])
	}
	for _, empty := range []string{"", "null", "{}", "[]"} {
		if u, err := ParsePermissionUpdates(json.RawMessage(empty)); err != nil || len(u) != 0 {
			t.Errorf("ParsePermissionUpdates(%q) = %v, %v", empty, u, err)
		}
	}
	if _, err := ParsePermissionUpdates(json.RawMessage(`[{`)); err == nil {
		t.Errorf("invalid JSON accepted")
	}
	c := &CanUseTool{PermissionSuggestions: raw}
	if len(c.Suggestions()) != 3 {
		t.Errorf("Suggestions: %+v", c.Suggestions())
	}
}

func TestRuleMatches(t *testing.T) {
	t.Parallel()
	bash := func(cmd string) json.RawMessage { b, _ := json.Marshal(map[string]string{"command": cmd}); return b }
	file := json.RawMessage(`{"file_path":"/w/a.txt","content":"x"}`)
	tests := []struct {
		rule  PermissionRule
		tool  string
		input json.RawMessage
		want  bool
	}{
		{PermissionRule{ToolName: "Bash", RuleContent: "npm test"}, "Bash", bash(" npm test "), true},
		{PermissionRule{ToolName: "Bash", RuleContent: "npm test"}, "Bash", bash("npm test --all"), false},
		{PermissionRule{ToolName: "Bash", RuleContent: "npm test:*"}, "Bash", bash("npm test --all"), true},
		{PermissionRule{ToolName: "Bash", RuleContent: "npm test:*"}, "Bash", bash("npm test"), true},
		{PermissionRule{ToolName: "Bash", RuleContent: "npm test:*"}, "Bash", bash("npm tester"), false},
		{PermissionRule{ToolName: "Bash"}, "Bash", bash("rm -rf /"), true},
		{PermissionRule{ToolName: "Bash"}, "Write", file, false},
		{PermissionRule{ToolName: "Edit", RuleContent: "//w/a.txt"}, "Write", file, true},
		{PermissionRule{ToolName: "Edit", RuleContent: "//w/a.txt"}, "Edit", file, true},
		{PermissionRule{ToolName: "Edit", RuleContent: "//w/a.txt"}, "Read", file, false},
		{PermissionRule{ToolName: "Edit", RuleContent: "//w/b.txt"}, "Edit", file, false},
		{PermissionRule{ToolName: "Edit", RuleContent: "/w/a.txt"}, "Edit", file, false},
		{PermissionRule{ToolName: "Edit", RuleContent: "//w/*"}, "Edit", file, false},
		{PermissionRule{ToolName: "Edit", RuleContent: "//w/a.txt"}, "NotebookEdit", json.RawMessage(`{"notebook_path":"/w/a.txt"}`), true},
		{PermissionRule{ToolName: "Read", RuleContent: "//w/a.txt"}, "Read", file, true},
		{PermissionRule{ToolName: "Write"}, "Edit", file, false},
		{PermissionRule{ToolName: "mcp__s__t"}, "mcp__s__t", json.RawMessage(`{}`), true},
		{PermissionRule{ToolName: "Bash", RuleContent: "ls"}, "Bash", json.RawMessage(`not json`), false},
	}
	for _, tt := range tests {
		if got := tt.rule.Matches(tt.tool, tt.input); got != tt.want {
			t.Errorf("%+v.Matches(%s, %s) = %v, want %v", tt.rule, tt.tool, tt.input, got, tt.want)
		}
	}
	allow := PermissionUpdate{Type: UpdateAddRules, Behavior: BehaviorAllow, Rules: []PermissionRule{{ToolName: "Bash", RuleContent: "ls"}, {ToolName: "Write"}}}
	if !allow.Allows("Write", file) || !allow.Allows("Bash", bash("ls")) || allow.Allows("Bash", bash("pwd")) {
		t.Errorf("Allows of %+v", allow)
	}
	for _, u := range []PermissionUpdate{
		{Type: UpdateAddRules, Behavior: "deny", Rules: allow.Rules},
		{Type: UpdateRemoveRules, Behavior: BehaviorAllow, Rules: allow.Rules},
		{Type: UpdateSetMode, Mode: PermissionBypass},
	} {
		if u.Allows("Write", file) {
			t.Errorf("%+v allows", u)
		}
	}
}

func TestSuggestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool, input string
		want        []PermissionRule
	}{
		{"Bash", `{"command":" go test ./... "}`, []PermissionRule{{"Bash", "go test ./..."}, {"Bash", ""}}},
		{"Bash", `{"command":"weird:*"}`, []PermissionRule{{"Bash", ""}}},
		{"Bash", `{}`, []PermissionRule{{"Bash", ""}}},
		{"Write", `{"file_path":"/w/a.go","content":"x"}`, []PermissionRule{{"Edit", "//w/a.go"}, {"Write", ""}}},
		{"Edit", `{"file_path":"rel.go"}`, []PermissionRule{{"Edit", ""}}},
		{"NotebookEdit", `{"notebook_path":"/w/n.ipynb"}`, []PermissionRule{{"Edit", "//w/n.ipynb"}, {"NotebookEdit", ""}}},
		{"Read", `{"file_path":"/etc/hosts"}`, []PermissionRule{{"Read", "//etc/hosts"}, {"Read", ""}}},
		{"mcp__s__t", `{"x":1}`, []PermissionRule{{"mcp__s__t", ""}}},
		{"ExitPlanMode", `{"plan":"p"}`, nil},
		{"AskUserQuestion", `{}`, nil},
	}
	for _, tt := range tests {
		got := SuggestRules(tt.tool, json.RawMessage(tt.input))
		var rules []PermissionRule
		for _, u := range got {
			if u.Type != UpdateAddRules || u.Behavior != BehaviorAllow || u.Destination != DestinationSession || len(u.Rules) != 1 {
				t.Errorf("%s: update %+v", tt.tool, u)
			}
			rules = append(rules, u.Rules...)
			if !u.Allows(tt.tool, json.RawMessage(tt.input)) {
				t.Errorf("%s %s: the suggestion %+v does not allow the call it was made for", tt.tool, tt.input, u)
			}
		}
		if !slices.Equal(rules, tt.want) {
			t.Errorf("SuggestRules(%s, %s) rules %v, want %v", tt.tool, tt.input, rules, tt.want)
		}
	}
}

func TestAnswerQuestions(t *testing.T) {
	t.Parallel()
	input := json.RawMessage(`{"questions":[
		{"question":"Which database?","header":"DB","options":[{"label":"Postgres","description":"p"},{"label":"SQLite","description":"s"}],"multiSelect":false},
		{"question":"Which features?","header":"F","options":[{"label":"Auth","description":"a"},{"label":"Export","description":"e"}],"multiSelect":true},
		"junk"]}`)
	qs := QuestionsOf(input)
	if len(qs) != 2 || qs[0].Options[1].Label != "SQLite" || !qs[1].MultiSelect {
		t.Fatalf("QuestionsOf: %+v", qs)
	}
	out, err := AnswerQuestions(input, []QuestionAnswer{
		{Question: "Which database?", Labels: []string{"Postgres"}, Notes: "already running"},
		{Question: "Which features?", Labels: []string{"Auth", "Export"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Questions   []json.RawMessage            `json:"questions"`
		Answers     map[string]string            `json:"answers"`
		Annotations map[string]map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Questions) != 3 || got.Answers["Which database?"] != "Postgres" || got.Answers["Which features?"] != "Auth, Export" ||
		got.Annotations["Which database?"]["notes"] != "already running" || len(got.Annotations) != 1 {
		t.Errorf("updated input %s", out)
	}
	if out, err := AnswerQuestions(input, []QuestionAnswer{{Question: "Which database?", Labels: []string{"MySQL"}}}); err != nil || !strings.Contains(string(out), `"Which database?":"MySQL"`) || strings.Contains(string(out), "annotations") {
		t.Errorf("an answer of the person's own: %s, %v", out, err)
	}
	for _, bad := range [][]QuestionAnswer{
		{{Question: "Which colour?", Labels: []string{"Red"}}},
		{{Question: "Which database?"}},
		{{Question: "Which database?", Labels: []string{"Postgres", "SQLite"}}},
	} {
		if _, err := AnswerQuestions(input, bad); err == nil {
			t.Errorf("AnswerQuestions accepted %+v", bad)
		}
	}
	if _, err := AnswerQuestions(input, []QuestionAnswer{{Question: "Which colour?", Labels: []string{"Red"}}}); !errors.Is(err, ErrUnknownQuestion) {
		t.Errorf("unknown question: %v", err)
	}
	if _, err := AnswerQuestions(json.RawMessage(`[]`), nil); err == nil {
		t.Errorf("a non-object input was accepted")
	}
}

func TestPlanOf(t *testing.T) {
	t.Parallel()
	if plan, path := PlanOf(json.RawMessage(`{"plan":"# P\n1. x","planFilePath":"/c/plans/p.md"}`)); plan != "# P\n1. x" || path != "/c/plans/p.md" {
		t.Errorf("PlanOf = %q, %q", plan, path)
	}
	for _, in := range []string{`{}`, `[]`, ``, `{"plan":3}`} {
		if plan, path := PlanOf(json.RawMessage(in)); plan != "" || path != "" {
			t.Errorf("PlanOf(%s) = %q, %q", in, plan, path)
		}
	}
}
