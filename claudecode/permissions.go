package claudecode

import (
	"encoding/json"
	"strings"
)

// Built-in tools whose permission requests drover treats apart.
const (
	// ToolAskUserQuestion asks the person questions with options. It always arrives as can_use_tool
	// (requires_user_interaction), in every permission mode; the answers go back in updatedInput
	// (see AnswerQuestions).
	ToolAskUserQuestion = "AskUserQuestion"
	// ToolExitPlanMode presents the plan and asks to leave plan mode. In plan mode it arrives as
	// can_use_tool with the plan in its input (see PlanOf); outside plan mode the CLI refuses it
	// before any hook or permission check.
	ToolExitPlanMode = "ExitPlanMode"
	// ToolEnterPlanMode switches the session to plan mode without asking.
	ToolEnterPlanMode = "EnterPlanMode"
	// ToolBash runs a shell command.
	ToolBash = "Bash"
)

// ReadOnlyTools are the tools a supervised session runs without asking: they read the workspace,
// search it, delegate to a subagent (whose own tool calls are asked for), manage the agent's todo
// list, or reach the person anyway (AskUserQuestion, ExitPlanMode). The names of
// @anthropic-ai/claude-code 2.1.332 are here (Read, Agent, ToolSearch, ListAgents, CronList, …)
// together with those of other versions (Glob, Grep, NotebookRead, Task, TodoWrite, TaskList, …),
// so that a name missing from one version costs nothing. Every other tool, MCP tools and tools
// unknown today included, is asked for.
var ReadOnlyTools = []string{
	"Agent", "AskUserQuestion", "BashOutput", "CronList", "EnterPlanMode", "ExitPlanMode", "Glob",
	"Grep", "ListAgents", "NotebookRead", "Read", "Task", "TaskCreate", "TaskGet", "TaskList",
	"TaskOutput", "TaskUpdate", "TodoWrite", "ToolSearch",
}

// SupervisedToolMatcher is the PreToolUse matcher of a supervised session: every tool name except
// ReadOnlyTools. The CLI reads a matcher that is not a plain name list as a JavaScript regular
// expression, so a negative lookahead works [realcli TestSupervisedMatcher]. It is built from
// ReadOnlyTools (a unit test keeps the two in step).
const SupervisedToolMatcher = `^(?!(?:Agent|AskUserQuestion|BashOutput|CronList|EnterPlanMode|ExitPlanMode|Glob|Grep|` +
	`ListAgents|NotebookRead|Read|Task|TaskCreate|TaskGet|TaskList|TaskOutput|TaskUpdate|TodoWrite|ToolSearch)$).*`

// SupervisedHooks returns the initialize hooks of a supervised session: a PreToolUse hook on
// SupervisedToolMatcher calling toolCallbackID (answer it with PreToolUseDecision(DecisionAsk, …)
// to have the call asked through can_use_tool), and, when stopCallbackID is not empty, a Stop hook
// calling stopCallbackID.
func SupervisedHooks(toolCallbackID, stopCallbackID string) map[string][]HookMatcher {
	hooks := map[string][]HookMatcher{
		HookPreToolUse: {{Matcher: SupervisedToolMatcher, HookCallbackIDs: []string{toolCallbackID}}},
	}
	if stopCallbackID != "" {
		hooks[HookStop] = []HookMatcher{{HookCallbackIDs: []string{stopCallbackID}}}
	}
	return hooks
}

// Hook events drover registers.
const (
	HookPreToolUse = "PreToolUse"
	HookStop       = "Stop"
)

// Kinds of PermissionUpdate.
const (
	UpdateAddRules          = "addRules"
	UpdateReplaceRules      = "replaceRules"
	UpdateRemoveRules       = "removeRules"
	UpdateSetMode           = "setMode"
	UpdateAddDirectories    = "addDirectories"
	UpdateRemoveDirectories = "removeDirectories"
)

// Destinations of a PermissionUpdate: where the CLI keeps it.
const (
	// DestinationSession keeps the update in the CLI process's memory only.
	DestinationSession = "session"
	// DestinationLocalSettings writes the update into <workspace>/.claude/settings.local.json.
	DestinationLocalSettings   = "localSettings"
	DestinationProjectSettings = "projectSettings"
	DestinationUserSettings    = "userSettings"
	DestinationCLIArg          = "cliArg"
)

// PermissionRule names a tool and, optionally, what of it: a Bash command ("npm test", or a prefix
// "npm test:*"), a path pattern for file tools. An empty RuleContent stands for every call of the
// tool.
type PermissionRule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent,omitempty"`
}

// PermissionUpdate is one change to the CLI's permissions, in the CLI's own shape: an element of
// can_use_tool's permission_suggestions and of an allow answer's updatedPermissions. Which fields
// are set depends on Type: Rules and Behavior (allow, deny, ask) for the rule kinds, Mode for
// setMode, Directories for the directory kinds; Destination always.
type PermissionUpdate struct {
	Type        string           `json:"type"`
	Rules       []PermissionRule `json:"rules,omitempty"`
	Behavior    string           `json:"behavior,omitempty"`
	Mode        string           `json:"mode,omitempty"`
	Directories []string         `json:"directories,omitempty"`
	Destination string           `json:"destination"`
}

// ParsePermissionUpdates decodes a permission_suggestions (or updatedPermissions) array. Elements
// that are not objects are skipped; only invalid JSON is an error, and an empty input gives nil.
func ParsePermissionUpdates(raw json.RawMessage) ([]PermissionUpdate, error) {
	if len(raw) == 0 || firstByte(raw) != '[' {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	var out []PermissionUpdate
	for _, e := range elems {
		var u PermissionUpdate
		if firstByte(e) != '{' || tolerate(json.Unmarshal(e, &u)) != nil {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// InSession returns u kept in the CLI process only. The CLI's own suggestions name
// localSettings, which writes a settings file into the workspace; drover remembers decisions
// itself and never lets the CLI write them there.
func (u PermissionUpdate) InSession() PermissionUpdate {
	u.Destination = DestinationSession
	return u
}

// Allows reports whether u is an allow rule update (addRules or replaceRules with behaviour
// allow) one of whose rules matches a call of toolName with input. See PermissionRule.Matches.
func (u PermissionUpdate) Allows(toolName string, input json.RawMessage) bool {
	if (u.Type != UpdateAddRules && u.Type != UpdateReplaceRules) || u.Behavior != BehaviorAllow {
		return false
	}
	for _, r := range u.Rules {
		if r.Matches(toolName, input) {
			return true
		}
	}
	return false
}

// editTools are the tools a path rule of "Edit" covers.
var editTools = map[string]bool{"Edit": true, "Write": true, "MultiEdit": true, "NotebookEdit": true}

// Matches reports whether a call of toolName with input falls under r, the way the CLI reads the
// rules SuggestRules makes [realcli TestRulesInDefaultMode]: a rule without content matches every
// call of its own tool only; a Bash rule matches its exact command, or, ending in ":*", every
// command that is its prefix or starts with the prefix and a space; a path rule ("//" and an
// absolute path) of Edit matches the file tools that change that file (Edit, Write, MultiEdit,
// NotebookEdit), one of Read matches reading it. Anything else does not match: when in doubt, ask.
func (r PermissionRule) Matches(toolName string, input json.RawMessage) bool {
	if r.RuleContent == "" {
		return r.ToolName == toolName
	}
	var in struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	if len(input) > 0 {
		_ = tolerate(json.Unmarshal(input, &in))
	}
	switch {
	case r.ToolName == ToolBash && toolName == ToolBash:
		cmd := strings.TrimSpace(in.Command)
		if prefix, ok := strings.CutSuffix(r.RuleContent, ":*"); ok {
			return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
		}
		return cmd == r.RuleContent
	case r.ToolName == "Edit" && editTools[toolName], r.ToolName == "Read" && toolName == "Read":
		path := in.FilePath
		if path == "" {
			path = in.NotebookPath
		}
		abs, ok := strings.CutPrefix(r.RuleContent, "/")
		return ok && strings.HasPrefix(abs, "/") && path == abs
	}
	return false
}

// SuggestRules returns the "allow always" choices drover offers for a call of toolName with input
// when the CLI offers none (it offers none for a call a PreToolUse hook asked about, which is every
// call of a supervised session): allow exactly this command (Bash); allow changing (or reading)
// this file, whichever file tool does it (a tool with an absolute file_path or notebook_path); and,
// for every tool, every call of the tool. Each is an addRules update kept in the session; the
// result depends only on its arguments, so a request asked again after a retry offers the same
// choices. ExitPlanMode and AskUserQuestion get none: their answer is a person's each time.
func SuggestRules(toolName string, input json.RawMessage) []PermissionUpdate {
	if toolName == "" || toolName == ToolExitPlanMode || toolName == ToolAskUserQuestion {
		return nil
	}
	var in struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	if len(input) > 0 {
		_ = tolerate(json.Unmarshal(input, &in))
	}
	allow := func(tool, content string) PermissionUpdate {
		return PermissionUpdate{
			Type: UpdateAddRules, Behavior: BehaviorAllow, Destination: DestinationSession,
			Rules: []PermissionRule{{ToolName: tool, RuleContent: content}},
		}
	}
	var out []PermissionUpdate
	path := in.FilePath
	if path == "" {
		path = in.NotebookPath
	}
	cmd := strings.TrimSpace(in.Command)
	switch {
	case toolName == ToolBash && cmd != "" && !strings.HasSuffix(cmd, ":*"):
		out = append(out, allow(ToolBash, cmd))
	case editTools[toolName] && strings.HasPrefix(path, "/"):
		out = append(out, allow("Edit", "/"+path))
	case toolName == "Read" && strings.HasPrefix(path, "/"):
		out = append(out, allow("Read", "/"+path))
	}
	return append(out, allow(toolName, ""))
}
