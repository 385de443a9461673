package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Question is one question of an AskUserQuestion call.
type Question struct {
	Question    string           `json:"question"`
	Header      string           `json:"header,omitempty"`
	Options     []QuestionOption `json:"options"`
	MultiSelect bool             `json:"multiSelect"`
}

// QuestionOption is one choice of a Question.
type QuestionOption struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Preview     string `json:"preview,omitempty"`
}

// QuestionsOf returns the questions of an AskUserQuestion input, or nil when there are none.
// Malformed elements are skipped.
func QuestionsOf(input json.RawMessage) []Question {
	var in struct {
		Questions []json.RawMessage `json:"questions"`
	}
	if firstByte(input) != '{' || tolerate(json.Unmarshal(input, &in)) != nil {
		return nil
	}
	var out []Question
	for _, raw := range in.Questions {
		var q Question
		if firstByte(raw) == '{' && tolerate(json.Unmarshal(raw, &q)) == nil && q.Question != "" {
			out = append(out, q)
		}
	}
	return out
}

// QuestionAnswer is a person's answer to one Question.
type QuestionAnswer struct {
	// Question is the text of the question answered, as asked.
	Question string
	// Labels are the chosen options' labels (one unless the question is multiSelect). A text that
	// is no option's label is the person's own answer, as the CLI's "Other" choice.
	Labels []string
	// Notes, optional, is free text the person adds to the answer.
	Notes string
}

// ErrUnknownQuestion is returned by AnswerQuestions for an answer to a question that was not asked.
var ErrUnknownQuestion = errors.New("no such question")

// AnswerQuestions returns the updatedInput that gives the model a person's answers to an
// AskUserQuestion call: the call's input with "answers" (question text → chosen labels joined with
// ", ") and, when notes were given, "annotations" (question text → {"notes": …}). Allow the request
// with it (AllowTool); the model then gets a tool result listing each question="answer" with its
// notes. Allowing with the input unchanged tells the model "The user did not answer the
// questions."; denying gives it the deny message as an error [realcli TestAskUserQuestion].
func AnswerQuestions(input json.RawMessage, answers []QuestionAnswer) (json.RawMessage, error) {
	var in map[string]json.RawMessage
	if firstByte(input) != '{' || json.Unmarshal(input, &in) != nil {
		return nil, errors.New("answering questions: the input is not a JSON object")
	}
	asked := map[string]Question{}
	for _, q := range QuestionsOf(input) {
		asked[q.Question] = q
	}
	chosen := map[string]string{}
	notes := map[string]map[string]string{}
	for _, a := range answers {
		q, ok := asked[a.Question]
		if !ok {
			return nil, fmt.Errorf("answering questions: %q: %w", a.Question, ErrUnknownQuestion)
		}
		if len(a.Labels) == 0 {
			return nil, fmt.Errorf("answering questions: %q: no choice", a.Question)
		}
		if len(a.Labels) > 1 && !q.MultiSelect {
			return nil, fmt.Errorf("answering questions: %q takes one choice, got %d", a.Question, len(a.Labels))
		}
		chosen[a.Question] = strings.Join(a.Labels, ", ")
		if a.Notes != "" {
			notes[a.Question] = map[string]string{"notes": a.Notes}
		}
	}
	var err error
	if in["answers"], err = json.Marshal(chosen); err != nil {
		return nil, fmt.Errorf("answering questions: %w", err)
	}
	if len(notes) > 0 {
		if in["annotations"], err = json.Marshal(notes); err != nil {
			return nil, fmt.Errorf("answering questions: %w", err)
		}
	}
	out, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("answering questions: %w", err)
	}
	return out, nil
}

// PlanOf returns the plan an ExitPlanMode request carries and the file it was read from. In plan
// mode the CLI replaces the model's own input with the plan file's content ("plan") and path
// ("planFilePath"); both are empty when the model wrote no plan file.
func PlanOf(input json.RawMessage) (plan, path string) {
	var in struct {
		Plan         string `json:"plan"`
		PlanFilePath string `json:"planFilePath"`
	}
	if firstByte(input) == '{' {
		_ = tolerate(json.Unmarshal(input, &in))
	}
	return in.Plan, in.PlanFilePath
}
