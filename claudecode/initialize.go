package claudecode

import "encoding/json"

// InitializeRequest is the body of the initialize control request. It is optional and may be sent
// again; omitting SystemPrompt keeps Claude Code's own system prompt.
type InitializeRequest struct {
	// Hooks maps a hook event (PreToolUse, PostToolUse, Stop, …) to matchers whose callbacks reach the
	// Handler as hook_callback requests.
	Hooks              map[string][]HookMatcher `json:"hooks,omitempty"`
	SystemPrompt       string                   `json:"systemPrompt,omitempty"`
	AppendSystemPrompt string                   `json:"appendSystemPrompt,omitempty"`
	// Agents defines subagents, verbatim (a JSON object of name → definition).
	Agents json.RawMessage `json:"agents,omitempty"`
	// JSONSchema asks for structured output, verbatim.
	JSONSchema json.RawMessage `json:"jsonSchema,omitempty"`
}

// HookMatcher selects the tools (a regular expression over tool names; empty matches all) whose hook
// events call HookCallbackIDs.
type HookMatcher struct {
	Matcher         string   `json:"matcher,omitempty"`
	HookCallbackIDs []string `json:"hookCallbackIds"`
	// Timeout is in seconds; 0 leaves the CLI's default.
	Timeout float64 `json:"timeout,omitempty"`
}

// InitializeResponse is the CLI's answer to initialize. The commonly used parts are decoded; Raw has
// all of it.
type InitializeResponse struct {
	Commands              []SlashCommand  `json:"commands"`
	Models                []ModelInfo     `json:"models"`
	OutputStyle           string          `json:"output_style,omitempty"`
	AvailableOutputStyles []string        `json:"available_output_styles,omitempty"`
	CurrentModel          string          `json:"current_model,omitempty"`
	CurrentPermissionMode string          `json:"current_permission_mode,omitempty"`
	Account               json.RawMessage `json:"account,omitempty"`
	Agents                json.RawMessage `json:"agents,omitempty"`
	// Raw is the response payload verbatim.
	Raw json.RawMessage `json:"-"`
}

// SlashCommand is a slash command the session offers.
type SlashCommand struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	ArgumentHint string `json:"argumentHint,omitempty"`
}

// ModelInfo is a model the session may use.
type ModelInfo struct {
	Value       string `json:"value"`
	DisplayName string `json:"displayName,omitempty"`
	Description string `json:"description,omitempty"`
}

// ParseInitializeResponse decodes the payload of the initialize response. Fields of unexpected
// types are left zero; only invalid JSON is an error.
func ParseInitializeResponse(payload json.RawMessage) (InitializeResponse, error) {
	var r InitializeResponse
	if len(payload) == 0 {
		return r, nil
	}
	if err := tolerate(json.Unmarshal(payload, &r)); err != nil {
		return InitializeResponse{}, err
	}
	r.Raw = append(json.RawMessage(nil), payload...)
	return r, nil
}
