package task

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTitleRunes bounds a task's title, in characters: a title is one line a person reads in a
// list, so a longer one is refused (given) or cut (made from a prompt).
const MaxTitleRunes = 120

// TitleOf is the title of a task given none: the first line of its first prompt that holds
// more than spaces, trimmed, with invalid UTF-8 and control characters replaced, cut to
// MaxTitleRunes (an ellipsis marks the cut). Empty when the prompt is.
func TitleOf(prompt string) string {
	for line := range strings.Lines(prompt) {
		if t := cleanTitle(line); t != "" {
			return cutTitle(t)
		}
	}
	return ""
}

// cleanTitle trims s and replaces what a one-line title cannot hold: invalid UTF-8, tabs and
// other control characters become spaces, and runs of spaces one.
func cleanTitle(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

func cutTitle(s string) string {
	if utf8.RuneCountInString(s) <= MaxTitleRunes {
		return s
	}
	r := []rune(s)[:MaxTitleRunes-1]
	return strings.TrimRightFunc(string(r), unicode.IsSpace) + "…"
}

// validateTitle refuses a title a person gave that is not one readable line.
func validateTitle(t string) error {
	switch {
	case t == "":
		return nil
	case !utf8.ValidString(t):
		return invalid("title", "is not valid UTF-8")
	case strings.ContainsFunc(t, unicode.IsControl):
		return invalid("title", "holds a line break or another control character; give one line")
	case strings.TrimSpace(t) != t:
		return invalid("title", "begins or ends with spaces")
	case utf8.RuneCountInString(t) > MaxTitleRunes:
		return invalid("title", "has %d characters, more than the %d allowed", utf8.RuneCountInString(t), MaxTitleRunes)
	}
	return nil
}

// WithTitle returns p with its title: the one given, else the one its first prompt makes
// (TitleOf).
func (p Params) WithTitle(prompt Prompt) Params {
	if p.Title == "" {
		p.Title = TitleOf(prompt.Text)
	}
	return p
}
