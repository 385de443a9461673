package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
)

// promptInput is how a command takes a prompt: as its PROMPT arguments, from
// --prompt-file, or from standard input when PROMPT is "-", plus the
// attachments of --attach.
type promptInput struct {
	file   string
	attach []string
}

const promptHelp = `The prompt is the PROMPT arguments joined by spaces; "-" as PROMPT reads it
from standard input, and --prompt-file reads it from a file (or standard input
with -), so a prompt longer than the system's argument limit can be given.
Flags may come before or after the prompt: a word of the prompt that begins
with "-" goes after "--" (drover task start -- -v is broken). One prompt is at
most 1 MiB, measured as JSON.`

func (in *promptInput) addFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&in.file, "prompt-file", "", "read the prompt from this file (- for standard input) instead of the arguments")
	f.StringArrayVar(&in.attach, "attach", nil, "image paths relative to the workspace, comma-separated or repeated")
	_ = c.MarkFlagFilename("prompt-file")
}

// prompt is the prompt that args (the PROMPT arguments), --prompt-file and
// stdin give, checked with task.ValidatePrompt.
func (in *promptInput) prompt(args []string, stdin io.Reader) (task.Prompt, error) {
	const sources = "give it as arguments, with --prompt-file FILE, or as - to read standard input"
	text := strings.Join(args, " ")
	var src io.Reader
	name := "standard input"
	switch {
	case in.file != "" && len(args) > 0:
		return task.Prompt{}, inputError(fmt.Errorf("the prompt is given twice (arguments and --prompt-file); %s", sources))
	case in.file == "-" || (len(args) == 1 && args[0] == "-"):
		src = stdin
		if src == nil {
			src = strings.NewReader("")
		}
	case in.file != "":
		f, err := os.Open(in.file)
		if err != nil {
			return task.Prompt{}, inputError(fmt.Errorf("--prompt-file: %w", err))
		}
		defer f.Close()
		src, name = f, in.file
	}
	if src != nil {
		var err error
		if text, err = readPrompt(src, name); err != nil {
			return task.Prompt{}, err
		}
	}
	if strings.TrimSpace(text) == "" {
		return task.Prompt{}, inputError(fmt.Errorf("the prompt is empty; %s", sources))
	}
	p := task.Prompt{Text: text, Attachments: splitList(in.attach), By: currentUser()}
	if err := task.ValidatePrompt(p); err != nil {
		return task.Prompt{}, inputError(err)
	}
	return p, nil
}

// readPrompt reads a prompt from r, refusing one over task.MaxPromptBytes
// without reading the rest of it.
func readPrompt(r io.Reader, name string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, task.MaxPromptBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the prompt from %s: %w", name, err)
	}
	if len(b) > task.MaxPromptBytes {
		return "", inputError(fmt.Errorf("the prompt in %s is more than %d bytes; one prompt is at most %d bytes, measured as JSON",
			name, task.MaxPromptBytes, task.MaxPromptBytes))
	}
	return string(b), nil
}

// splitList splits comma-separated values, dropping empty ones.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// flagOf names the flag that sets a field of task's input.
var flagOf = map[string]string{
	"id":                      "--id",
	"workspace":               "--workspace",
	"repo":                    "--repo",
	"base":                    "--base",
	"profile.permission_mode": "--mode",
	"profile.max_turns":       "--max-turns",
	"profile.model":           "--model",
	"idle_timeout":            "--idle-timeout",
	"profile.after_plan":      "--after-plan",
	"approval_timeout":        "--approval-timeout",
	"mode":                    "--mode",
	"budget.max_cost_usd":     "--budget-cost",
	"budget.max_turns":        "--budget-turns",
	"budget.max_duration":     "--budget-duration",
	"max_cost_usd":            "--budget-cost",
	"max_turns":               "--budget-turns",
	"max_duration":            "--budget-duration",
}

// inputError restates the *task.InvalidError problems in err with the flags
// that set the fields, one problem a line.
func inputError(err error) error {
	errs := flatten(err)
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		var ie *task.InvalidError
		if !errors.As(e, &ie) {
			lines = append(lines, e.Error())
			continue
		}
		name := ie.Field
		switch {
		case strings.HasPrefix(name, "attachments["):
			name = "--attach"
		case flagOf[name] != "":
			name = flagOf[name]
		}
		lines = append(lines, name+": "+ie.Reason)
	}
	msg := lines[0]
	if len(lines) > 1 {
		msg = "invalid input:\n  " + strings.Join(lines, "\n  ")
	}
	return &invalidInput{msg: msg, err: err}
}

// flatten lists the errors that err joins, at any depth.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// invalidInput is input refused before anything was sent.
type invalidInput struct {
	msg string
	err error
}

func (e *invalidInput) Error() string { return e.msg }
func (e *invalidInput) Unwrap() error { return e.err }
