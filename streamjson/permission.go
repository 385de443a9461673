package streamjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// maxSummary bounds a permission summary, in bytes.
const maxSummary = 200

// PermissionSummary says in one line what a can_use_tool request asks, for the person who
// decides it: the command, the file, the URL, the question, the plan's first line (at most 200
// bytes). It is the summary of the request's permission_request event (the timeline) and of its
// record (the inbox: drover task pending, the HTTP API's approvals), so that both say the same.
func PermissionSummary(r *claudecode.CanUseTool) string {
	_, title := normalizeToolCall(r.ToolName, r.Input)
	return permissionSummary(r, title)
}

func permissionSummary(r *claudecode.CanUseTool, title string) string {
	summary := title
	switch r.ToolName {
	case claudecode.ToolAskUserQuestion:
		if qs := claudecode.QuestionsOf(r.Input); len(qs) > 0 {
			summary = qs[0].Question
		}
	case claudecode.ToolExitPlanMode:
		plan, _ := claudecode.PlanOf(r.Input)
		if line := firstNonBlankLine(plan); line != "" {
			summary = line
		}
	default:
		summary = inputSummary(r.ToolName, r.Input, title)
	}
	return shorten(summary, maxSummary)
}

// permission describes a can_use_tool request for the person who decides it.
func permission(r *claudecode.CanUseTool, title string) *events.Permission {
	p := &events.Permission{
		Input: compactJSON(r.Input), DisplayName: r.DisplayName, Description: r.Description,
		Suggestions: compactJSON(r.PermissionSuggestions), BlockedPath: r.BlockedPath,
		DecisionReason: stripANSI(r.DecisionReason), DecisionReasonType: r.DecisionReasonType, AgentID: r.AgentID,
		RequiresUserInteraction: r.RequiresUserInteraction, Summary: permissionSummary(r, title),
	}
	switch r.ToolName {
	case claudecode.ToolAskUserQuestion:
		for _, q := range claudecode.QuestionsOf(r.Input) {
			eq := events.Question{Question: q.Question, Header: q.Header, MultiSelect: q.MultiSelect}
			for _, o := range q.Options {
				eq.Options = append(eq.Options, events.QuestionOption{Label: o.Label, Description: o.Description})
			}
			p.Questions = append(p.Questions, eq)
		}
	case claudecode.ToolExitPlanMode:
		p.Plan, p.PlanFile = claudecode.PlanOf(r.Input)
	default:
		p.Diff = proposedDiff(r.ToolName, r.Input)
	}
	if !r.RequiresUserInteraction && !r.SuppressAlwaysAllowRule {
		if offered := claudecode.SuggestRules(r.ToolName, r.Input); len(offered) > 0 {
			p.AllowAlways = marshalPlain(offered)
		}
	}
	return p
}

// marshalPlain marshals v without escaping <, > and &, as events are written.
func marshalPlain(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// inputSummary is the part of a tool input a person reads first.
func inputSummary(tool string, input json.RawMessage, title string) string {
	var in struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
		URL          string `json:"url"`
		Query        string `json:"query"`
		Pattern      string `json:"pattern"`
	}
	decodeInput(input, &in)
	switch {
	case tool == claudecode.ToolBash && in.Command != "":
		return firstLine(in.Command)
	case in.FilePath != "":
		return in.FilePath
	case in.NotebookPath != "":
		return in.NotebookPath
	case in.URL != "":
		return in.URL
	case in.Query != "":
		return in.Query
	case in.Pattern != "":
		return in.Pattern
	}
	return title
}

// proposedDiff renders what a file tool's call would change as a unified diff without line
// numbers, or "" for other tools.
func proposedDiff(tool string, input json.RawMessage) string {
	var path string
	var hunks [][2]string // old, new
	switch tool {
	case "Write":
		var in writeInput
		decodeInput(input, &in)
		path, hunks = in.FilePath, [][2]string{{"", in.Content}}
	case "Edit":
		var in editInput
		decodeInput(input, &in)
		path, hunks = in.FilePath, [][2]string{{in.OldString, in.NewString}}
	case "MultiEdit":
		var in multiEditInput
		decodeInput(input, &in)
		path = in.FilePath
		for _, e := range in.Edits {
			hunks = append(hunks, [2]string{e.OldString, e.NewString})
		}
	case "NotebookEdit":
		var in notebookEditInput
		decodeInput(input, &in)
		path, hunks = in.NotebookPath, [][2]string{{"", in.NewSource}}
	default:
		return ""
	}
	if path == "" || len(hunks) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("--- a/" + strings.TrimPrefix(path, "/") + "\n")
	b.WriteString("+++ b/" + strings.TrimPrefix(path, "/") + "\n")
	for _, h := range hunks {
		b.WriteString("@@ @@\n")
		for _, side := range []struct {
			text, mark string
		}{{h[0], "-"}, {h[1], "+"}} {
			if side.text == "" {
				continue
			}
			for _, l := range strings.Split(strings.TrimSuffix(side.text, "\n"), "\n") {
				b.WriteString(side.mark + l + "\n")
			}
		}
	}
	return b.String()
}

// firstNonBlankLine returns the first line of s with text, trimmed, without Markdown heading
// marks.
func firstNonBlankLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#")); l != "" {
			return l
		}
	}
	return ""
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
