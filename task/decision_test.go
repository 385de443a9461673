package task

import (
	"errors"
	"strings"
	"testing"
)

// Check refuses what no request could accept (Validate) and what this request does not offer,
// naming the decision's field; it accepts the rest.
func TestDecisionCheck(t *testing.T) {
	tool := PendingRequest{RequestID: "t1", Kind: KindTool, Suggestions: []Suggestion{{Key: "1", Label: "Bash(npm test:*)"}}}
	bare := PendingRequest{RequestID: "b1", Kind: KindTool}
	question := PendingRequest{RequestID: "q1", Kind: KindQuestion,
		Questions: []Question{{Question: "Which database?", Options: []string{"SQLite", "Postgres"}}}}
	sqlite := map[string][]string{"Which database?": {"SQLite"}}
	cases := []struct {
		name  string
		d     Decision
		r     PendingRequest
		field string // "" when accepted
		says  string
	}{
		{"an approval", Decision{Allow: true}, tool, "", ""},
		{"a denial with its reason", Decision{Reason: "no"}, tool, "", ""},
		{"an offered grant", Decision{Allow: true, Always: "1"}, tool, "", ""},
		{"an answered question", Decision{Allow: true, Answers: sqlite}, question, "", ""},
		{"a denied question", Decision{Reason: "ask later"}, question, "", ""},
		{"a denial without a reason", Decision{}, tool, "reason", "a denial needs a reason: the agent reads it"},
		{"a grant with a denial", Decision{Reason: "no", Always: "1"}, tool, "always", "goes with an approval, not a denial"},
		{"answers with a denial", Decision{Reason: "no", Answers: sqlite}, question, "answers", "answers go with approving a question"},
		{"a grant not offered", Decision{Allow: true, Always: "2"}, tool, "always", `request t1 offers no suggestion "2"; it offers 1 (Bash(npm test:*))`},
		{"a grant where none is offered", Decision{Allow: true, Always: "1"}, bare, "always", "it offers nothing to grant for the rest of the task"},
		{"answers to a tool request", Decision{Allow: true, Answers: sqlite}, tool, "answers", "answers go with approving a question"},
		{"an answer not offered", Decision{Allow: true, Answers: map[string][]string{"Which database?": {"MySQL"}}}, question,
			"answers", `"MySQL" is not an option of question "Which database?"`},
		{"a question approved without answers", Decision{Allow: true}, question, "answers", `question "Which database?" has no answer`},
	}
	for _, c := range cases {
		err := c.d.Check(c.r)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field || !strings.Contains(ie.Reason, c.says) {
			t.Errorf("%s: %v, want %s: …%s…", c.name, err, c.field, c.says)
		}
	}
}

// Validate is the part of Check that needs no request: what the command line checks before it
// reads one.
func TestDecisionValidate(t *testing.T) {
	if err := (Decision{}).Validate(); err == nil || !strings.Contains(err.Error(), "a denial needs a reason") {
		t.Errorf("a denial without a reason: %v", err)
	}
	if err := (Decision{Allow: true, Always: "9"}).Validate(); err != nil {
		t.Errorf("an approval with a grant: %v (whether it is offered is Check's)", err)
	}
}
