package task

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitleOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxTitleRunes+40)
	for _, c := range []struct{ prompt, want string }{
		{"Fix the failing test\nand then run it", "Fix the failing test"},
		{"\n\n   \n  Refactor\tthe  parser  \nrest", "Refactor the parser"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"   ", ""},
		{long, strings.Repeat("é", MaxTitleRunes-1) + "…"},
	} {
		got := TitleOf(c.prompt)
		if got != c.want {
			t.Errorf("TitleOf(%q) = %q, want %q", c.prompt, got, c.want)
		}
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxTitleRunes {
			t.Errorf("TitleOf(%q) = %q: not a bounded UTF-8 line", c.prompt, got)
		}
		if err := validateTitle(got); err != nil {
			t.Errorf("TitleOf(%q) = %q, which Validate refuses: %v", c.prompt, got, err)
		}
	}
}

func TestGivenTitleIsChecked(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"two\nlines", strings.Repeat("x", MaxTitleRunes+1), " padded", "\xff"} {
		err := Params{Workspace: "/w", Title: bad}.Validate()
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "title" {
			t.Errorf("title %q: err = %v, want an invalid title", bad, err)
		}
	}
	if err := (Params{Workspace: "/w", Title: "Ship the release"}).Validate(); err != nil {
		t.Errorf("a good title refused: %v", err)
	}
	p := Params{Workspace: "/w"}.WithTitle(Prompt{Text: "first line\nsecond"})
	if p.Title != "first line" {
		t.Errorf("WithTitle made %q", p.Title)
	}
	if p := (Params{Title: "given"}).WithTitle(Prompt{Text: "other"}); p.Title != "given" {
		t.Errorf("WithTitle replaced a given title: %q", p.Title)
	}
}
