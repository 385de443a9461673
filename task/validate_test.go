package task

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParamsWithDefaults(t *testing.T) {
	p := Params{Workspace: "/w"}.WithDefaults()
	if p.TurnTimeout != DefaultTurnTimeout || p.MaxAttempts != DefaultMaxAttempts || p.Profile.PermissionMode != Autonomous {
		t.Errorf("defaults not filled: %+v", p)
	}
	set := Params{Workspace: "/w", TurnTimeout: time.Minute, MaxAttempts: 7, Profile: Profile{PermissionMode: Plan}}
	if got := set.WithDefaults(); got.TurnTimeout != time.Minute || got.MaxAttempts != 7 || got.Profile.PermissionMode != Plan {
		t.Errorf("set fields were overwritten: %+v", got)
	}
}

// invalidFields are the fields named by the *InvalidErrors in err.
func invalidFields(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ie *InvalidError
		if !errors.As(e, &ie) {
			t.Fatalf("%v is not an *InvalidError", e)
		}
		out = append(out, ie.Field)
	}
	return out
}

func TestParamsValidate(t *testing.T) {
	ok := Params{Workspace: "/w"}
	for name, tc := range map[string]struct {
		p      Params
		fields []string
		says   string
	}{
		"defaults":        {p: ok},
		"with defaults":   {p: ok.WithDefaults()},
		"autonomous":      {p: Params{Workspace: "/w", Profile: Profile{PermissionMode: Autonomous, MaxTurns: 5}, IdleTimeout: time.Minute}},
		"no workspace":    {p: Params{}, fields: []string{"workspace"}, says: "required"},
		"unknown mode":    {p: Params{Workspace: "/w", Profile: Profile{PermissionMode: "yolo"}}, fields: []string{"profile.permission_mode"}, says: `"yolo" is unknown; use autonomous, supervised or plan`},
		"supervised":      {p: Params{Workspace: "/w", Profile: Profile{PermissionMode: Supervised}}},
		"plan":            {p: Params{Workspace: "/w", Profile: Profile{PermissionMode: Plan, AfterPlan: Supervised}, ApprovalTimeout: time.Hour}},
		"after plan":      {p: Params{Workspace: "/w", Profile: Profile{PermissionMode: Plan, AfterPlan: Plan}}, fields: []string{"profile.after_plan"}, says: "use autonomous or supervised"},
		"approval":        {p: Params{Workspace: "/w", ApprovalTimeout: -time.Minute}, fields: []string{"approval_timeout"}, says: "negative"},
		"negative turns":  {p: Params{Workspace: "/w", Profile: Profile{MaxTurns: -3}}, fields: []string{"profile.max_turns"}, says: "-3 is negative; use 0 (no bound) or more"},
		"negative idle":   {p: Params{Workspace: "/w", IdleTimeout: -time.Second}, fields: []string{"idle_timeout"}, says: "-1s is negative"},
		"negative turn":   {p: Params{Workspace: "/w", TurnTimeout: -time.Second}, fields: []string{"turn_timeout"}, says: "negative"},
		"attempts":        {p: Params{Workspace: "/w", MaxAttempts: 1000}, fields: []string{"max_attempts"}, says: "outside 1..100"},
		"carry order":     {p: Params{Workspace: "/w", Carry: &Carry{Turn: 2, Pending: []QueuedPrompt{{Turn: 2}, {Turn: 1}}}}, fields: []string{"carry.pending"}},
		"carry negative":  {p: Params{Workspace: "/w", Carry: &Carry{Turn: -1}}, fields: []string{"carry.turn"}},
		"several at once": {p: Params{Profile: Profile{MaxTurns: -1}, IdleTimeout: -1}, fields: []string{"workspace", "profile.max_turns", "idle_timeout"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("valid params refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("invalid params accepted")
			}
			if got := invalidFields(t, err); strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("fields = %v, want %v", got, tc.fields)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

func TestModesAvailable(t *testing.T) {
	if got := AvailableModes(); len(got) != 3 {
		t.Errorf("AvailableModes = %v", got)
	}
	for _, m := range PermissionModes() {
		if !m.Valid() {
			t.Errorf("%s is listed but not valid", m)
		}
	}
	if !PermissionMode("").Available() {
		t.Error("the empty mode means autonomous and is available")
	}
}

func TestValidatePrompt(t *testing.T) {
	// A text whose JSON escapes push it over the limit though its raw size is under it.
	escaped := strings.Repeat("\"", MaxPromptBytes/2+1)
	for name, tc := range map[string]struct {
		p     Prompt
		field string
		says  string
	}{
		"plain":             {p: Prompt{Text: "hello"}},
		"attachment":        {p: Prompt{Text: "look", Attachments: []string{"img/a.png", "b.png"}}},
		"at the limit":      {p: Prompt{Text: strings.Repeat("x", MaxPromptBytes-len(`{"text":""}`))}},
		"empty":             {p: Prompt{}, field: "prompt", says: "empty"},
		"blank":             {p: Prompt{Text: " \n\t "}, field: "prompt", says: "empty"},
		"one byte too many": {p: Prompt{Text: strings.Repeat("x", MaxPromptBytes-len(`{"text":""}`)+1)}, field: "prompt", says: "more than the 1048576 allowed"},
		"escapes count":     {p: Prompt{Text: escaped}, field: "prompt", says: "as JSON"},
		"absolute":          {p: Prompt{Text: "x", Attachments: []string{"ok.png", "/etc/passwd"}}, field: "attachments[1]", says: `"/etc/passwd" is not a relative path inside the workspace`},
		"escaping":          {p: Prompt{Text: "x", Attachments: []string{"img/../../secret.png"}}, field: "attachments[0]", says: "without .."},
		"dot dot":           {p: Prompt{Text: "x", Attachments: []string{".."}}, field: "attachments[0]"},
		"empty path":        {p: Prompt{Text: "x", Attachments: []string{""}}, field: "attachments[0]"},
		"nul":               {p: Prompt{Text: "x", Attachments: []string{"a\x00.png"}}, field: "attachments[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidatePrompt(tc.p)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid prompt refused: %v", err)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InvalidError", err)
			}
			if ie.Field != tc.field || !strings.Contains(ie.Reason, tc.says) {
				t.Errorf("err = %v, want field %s saying %q", err, tc.field, tc.says)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"hello", "demo-1f0c", "550e8400-e29b-41d4-a716-446655440000", "team/ticket:42", "été", strings.Repeat("a", MaxIDBytes)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", " ", "two words", "tab\there", "nl\n", "-flag", "\xff", strings.Repeat("a", MaxIDBytes+1), "bell\a"} {
		err := ValidateID(id)
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "id" || !strings.Contains(ie.Reason, "printable characters, without spaces") {
			t.Errorf("ValidateID(%q) = %v, want an id error saying what is allowed", id, err)
		}
	}
}

func TestValidateStartManagedOrUnmanaged(t *testing.T) {
	cases := []struct {
		name  string
		id    string
		p     Params
		field string // "" when valid
	}{
		{"unmanaged", "t1", Params{Workspace: "/w"}, ""},
		{"managed", "t-1_x", Params{Repo: "https://git.example/a.git", Base: "main"}, ""},
		{"neither", "t1", Params{}, "workspace"},
		{"both", "t1", Params{Workspace: "/w", Repo: "/r"}, "repo"},
		{"base without repo", "t1", Params{Workspace: "/w", Base: "main"}, "base"},
		{"base like a flag", "t1", Params{Repo: "/r", Base: "--upload-pack=x"}, "base"},
		{"repo like a flag", "t1", Params{Repo: "--upload-pack=x"}, "repo"},
		{"managed id with a dot", "a.b", Params{Repo: "/r"}, "id"},
		{"unmanaged id with a dot", "a.b", Params{Workspace: "/w"}, ""},
	}
	for _, c := range cases {
		err := ValidateStart(c.id, c.p)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%s: got %v, want an error on %s", c.name, err, c.field)
		}
	}
}
