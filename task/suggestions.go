package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// SuggestionLabel says what a suggestion grants: "Bash(npm test:*)", "add directory /tmp", …
func SuggestionLabel(raw json.RawMessage) string {
	var s struct {
		Type  string `json:"type"`
		Rules []struct {
			ToolName    string `json:"toolName"`
			RuleContent string `json:"ruleContent"`
		} `json:"rules"`
		Directories []string `json:"directories"`
		Mode        string   `json:"mode"`
		Behavior    string   `json:"behavior"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return compactJSON(raw)
	}
	switch s.Type {
	case "addRules", "replaceRules":
		var rules []string
		for _, r := range s.Rules {
			if r.RuleContent != "" {
				rules = append(rules, r.ToolName+"("+r.RuleContent+")")
			} else {
				rules = append(rules, r.ToolName)
			}
		}
		return strings.TrimSpace(s.Behavior + " " + strings.Join(rules, ", "))
	case "addDirectories":
		return "add directories " + strings.Join(s.Directories, ", ")
	case "setMode":
		return "switch to " + s.Mode + " mode"
	}
	return compactJSON(raw)
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// CheckAnswers checks a question request's answers: every question answered, with its options.
func CheckAnswers(qs []Question, answers map[string][]string) error {
	for _, q := range qs {
		chosen := answers[q.Question]
		if len(chosen) == 0 {
			return fmt.Errorf("question %q has no answer; choose from %q", q.Question, q.Options)
		}
		if len(chosen) > 1 && !q.MultiSelect {
			return fmt.Errorf("question %q takes one answer", q.Question)
		}
		for _, c := range chosen {
			if !slices.Contains(q.Options, c) {
				return fmt.Errorf("%q is not an option of question %q; choose from %q", c, q.Question, q.Options)
			}
		}
	}
	// Every answer names a question: count the distinct questions answered, without ranging
	// over the map (its order differs from run to run).
	var asked []string
	answered := 0
	for _, q := range qs {
		if slices.Contains(asked, q.Question) {
			continue
		}
		asked = append(asked, q.Question)
		if _, ok := answers[q.Question]; ok {
			answered++
		}
	}
	if len(answers) > answered {
		return fmt.Errorf("the answers name a question that was not asked; the questions are %q", asked)
	}
	return nil
}
