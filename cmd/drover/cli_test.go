package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-run/drover/task"
)

// parsed is what a command line means to drover's command tree: the command
// it names, the flags it sets and its positional arguments.
type parsed struct {
	command string
	flags   map[string]string
	args    []string
}

func parseLine(t *testing.T, line []string) parsed {
	t.Helper()
	root := newRootCommand(nil, io.Discard, io.Discard)
	c, rest, err := root.Find(line)
	if err != nil {
		t.Fatalf("%q: finding the command: %v", line, err)
	}
	if err := c.ParseFlags(rest); err != nil {
		t.Fatalf("%q: parsing the flags: %v", line, err)
	}
	p := parsed{command: c.CommandPath(), flags: map[string]string{}, args: c.Flags().Args()}
	c.Flags().Visit(func(f *pflag.Flag) { p.flags[f.Name] = f.Value.String() })
	return p
}

// TestFlagsBeforeOrAfterArguments parses each command with its flags before
// its arguments, after them, and mixed in, and expects the same meaning.
func TestFlagsBeforeOrAfterArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lines [][]string
		flags map[string]string
		args  []string
	}{
		{"dev", [][]string{{"dev", "--port", "7300", "--fake-api=false", "--state", "/tmp/s"}},
			map[string]string{"port": "7300", "fake-api": "false", "state": "/tmp/s"}, nil},
		{"demo", [][]string{{"demo", "--keep", "--timeout", "1m"}},
			map[string]string{"keep": "true", "timeout": "1m0s"}, nil},
		{"worker", [][]string{{"worker", "--keep-alive", "2m", "--max-idle", "3", "--stall-timeout", "5m", "--max-concurrent-turns", "4", "--host-id", "h1",
			"--account-max-concurrent-turns", "2"}},
			map[string]string{"keep-alive": "2m0s", "max-idle": "3", "stall-timeout": "5m0s", "max-concurrent-turns": "4", "host-id": "h1",
				"account-max-concurrent-turns": "2"}, nil},
		{"worker (the deprecated --max-turns)", [][]string{{"worker", "--max-turns", "4"}},
			map[string]string{"max-turns": "4"}, nil},
		{"migrate", [][]string{{"migrate"}}, map[string]string{}, nil},
		{"normalize", [][]string{{"normalize", "t.jsonl"}}, map[string]string{}, []string{"t.jsonl"}},
		{"task start", [][]string{
			{"task", "start", "--id", "t1", "--max-turns", "3", "--mode", "autonomous", "--attach", "a.png", "-o", "json", "fix", "it"},
			{"task", "start", "fix", "it", "--id", "t1", "--max-turns", "3", "--mode", "autonomous", "--attach", "a.png", "-o", "json"},
			{"task", "start", "--id=t1", "fix", "--max-turns=3", "it", "--mode", "autonomous", "--attach=a.png", "--output=json"},
		}, map[string]string{"id": "t1", "max-turns": "3", "mode": "autonomous", "attach": "[a.png]", "output": "json"}, []string{"fix", "it"}},
		{"task start from a file", [][]string{
			{"task", "start", "--prompt-file", "p.md", "--idle-timeout", "1h", "--workspace", "/w"},
			{"task", "start", "--workspace", "/w", "--idle-timeout", "1h", "--prompt-file", "p.md"},
		}, map[string]string{"prompt-file": "p.md", "idle-timeout": "1h0m0s", "workspace": "/w"}, nil},
		{"task start from stdin", [][]string{
			{"task", "start", "--model", "m", "-"},
			{"task", "start", "-", "--model", "m"},
		}, map[string]string{"model": "m"}, []string{"-"}},
		{"task start, a prompt after --", [][]string{
			{"task", "start", "--id", "t1", "--", "-v", "is", "broken"},
		}, map[string]string{"id": "t1"}, []string{"-v", "is", "broken"}},
		{"task prompt", [][]string{
			{"task", "prompt", "--attach", "a.png,b.png", "--request-id", "r1", "t1", "look", "here"},
			{"task", "prompt", "t1", "look", "here", "--attach", "a.png,b.png", "--request-id", "r1"},
			{"task", "prompt", "t1", "--attach", "a.png,b.png", "look", "--request-id", "r1", "here"},
		}, map[string]string{"attach": `["a.png,b.png"]`, "request-id": "r1"}, []string{"t1", "look", "here"}},
		{"task interrupt", [][]string{{"task", "interrupt", "-o", "json", "t1"}, {"task", "interrupt", "t1", "-o", "json"}},
			map[string]string{"output": "json"}, []string{"t1"}},
		{"task close", [][]string{{"task", "close", "t1"}}, map[string]string{}, []string{"t1"}},
		{"task cancel", [][]string{{"task", "cancel", "t1"}}, map[string]string{}, []string{"t1"}},
		{"task list", [][]string{{"task", "list", "--status", "idle", "--text", "x", "--limit", "5", "-o", "json"}},
			map[string]string{"status": "idle", "text": "x", "limit": "5", "output": "json"}, nil},
		{"task show", [][]string{{"task", "show", "--json", "t1"}, {"task", "show", "t1", "--json"}},
			map[string]string{"json": "true"}, []string{"t1"}},
		{"task show -o", [][]string{{"task", "show", "-o", "json", "t1"}, {"task", "show", "t1", "--output", "json"}},
			map[string]string{"output": "json"}, []string{"t1"}},
		{"task watch", [][]string{
			{"task", "watch", "--follow=false", "--json", "--after", "7", "t1"},
			{"task", "watch", "t1", "--follow=false", "--json", "--after", "7"},
			{"task", "watch", "--after", "7", "t1", "--follow=false", "--json"},
		}, map[string]string{"follow": "false", "json": "true", "after": "7"}, []string{"t1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := "drover " + strings.Fields(tc.name)[0]
			if strings.HasPrefix(tc.name, "task ") {
				want = "drover task " + strings.Trim(strings.Fields(tc.name)[1], ",")
			}
			for _, line := range tc.lines {
				got := parseLine(t, line)
				if got.command != want {
					t.Errorf("%q names %q, want %q", line, got.command, want)
				}
				for k, v := range tc.flags {
					if got.flags[k] != v {
						t.Errorf("%q: --%s = %q, want %q", line, k, got.flags[k], v)
					}
				}
				if len(got.flags) != len(tc.flags) {
					t.Errorf("%q sets flags %v, want %v", line, got.flags, tc.flags)
				}
				if !slices.Equal(got.args, tc.args) {
					t.Errorf("%q: arguments %q, want %q", line, got.args, tc.args)
				}
			}
		})
	}
}

// unreachable points drover at a Temporal server and a database where nothing
// listens: a command that dials either fails with a connection error.
func unreachable(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("DROVER_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
}

// TestInvalidInputIsAnsweredBeforeDialling gives every command input it
// cannot take: each is refused with a message naming the problem and what is
// allowed, without a connection attempt.
func TestInvalidInputIsAnsweredBeforeDialling(t *testing.T) {
	unreachable(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.md", " \n")
	huge := write("huge.md", strings.Repeat("x", task.MaxPromptBytes+1))
	// Under the limit as bytes, over it as JSON: every quote is escaped.
	quotes := write("quotes.md", strings.Repeat(`"`, task.MaxPromptBytes-10))
	ok := write("ok.md", "a prompt")

	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		says  []string
	}{
		{"negative max turns", []string{"task", "start", "--max-turns", "-3", "hello"}, "",
			[]string{"--max-turns: -3 is negative", "use 0 (no bound) or more"}},
		{"repo and workspace", []string{"task", "start", "--repo", "/r", "--workspace", "/w", "hello"}, "",
			[]string{"--repo: is given with --workspace"}},
		{"base without repo", []string{"task", "start", "--base", "main", "hello"}, "",
			[]string{"--base: is given without repo"}},
		{"managed id", []string{"task", "start", "--repo", "/r", "--id", "a.b", "hello"}, "",
			[]string{`--id: "a.b" cannot name a managed task's folder and branch`}},
		{"negative max turns after the prompt", []string{"task", "start", "hello", "--max-turns", "-3"}, "",
			[]string{"--max-turns: -3 is negative"}},
		{"unknown mode", []string{"task", "start", "hello", "--mode", "yolo"}, "",
			[]string{`--mode: "yolo" is unknown`, "use autonomous, supervised or plan"}},
		{"after plan", []string{"task", "start", "hello", "--mode=plan", "--after-plan=plan"}, "",
			[]string{`--after-plan: "plan" is not a mode a task can continue in after its plan`, "autonomous or supervised"}},
		{"approval timeout", []string{"task", "start", "hello", "--approval-timeout=-1m"}, "",
			[]string{"--approval-timeout: -1m0s is negative"}},
		{"negative budget", []string{"task", "start", "hello", "--budget-cost", "-1", "--budget-turns=-2"}, "",
			[]string{"--budget-cost: -1 is not a cost", "--budget-turns: -2 is negative"}},
		{"budget change", []string{"task", "budget", "t1", "--budget-duration=-1s"}, "",
			[]string{"--budget-duration: -1s is negative"}},
		{"budget change by its other name", []string{"task", "budget", "t1", "--max-duration=-1s"}, "",
			[]string{"--budget-duration: -1s is negative"}},
		{"budget change with the agent's loop flag", []string{"task", "budget", "t1", "--max-turns=4"}, "",
			[]string{"unknown flag: --max-turns"}},
		{"budget without a bound", []string{"task", "budget", "t1"}, "",
			[]string{"which bound? give --budget-cost, --budget-turns or --budget-duration"}},
		{"negative idle timeout", []string{"task", "start", "hello", "--idle-timeout", "-5m"}, "",
			[]string{"--idle-timeout: -5m0s is negative", "use 0 (never) or a positive duration"}},
		{"several problems", []string{"task", "start", "hello", "--idle-timeout", "-1s", "--max-turns", "-1"}, "",
			[]string{"--idle-timeout: -1s is negative", "--max-turns: -1 is negative"}},
		{"absolute attachment", []string{"task", "start", "look", "--attach", "/etc/passwd"}, "",
			[]string{`--attach: "/etc/passwd" is not a relative path inside the workspace`, "without .. or a leading /"}},
		{"escaping attachment", []string{"task", "start", "look", "--attach", "ok.png,../../secret.png"}, "",
			[]string{`--attach: "../../secret.png" is not a relative path inside the workspace`}},
		{"escaping attachment on prompt", []string{"task", "prompt", "t1", "look", "--attach", "img/../../x.png"}, "",
			[]string{`--attach: "img/../../x.png" is not a relative path inside the workspace`}},
		{"no prompt", []string{"task", "start", "--id", "t1"}, "",
			[]string{"the prompt is empty", "as arguments, with --prompt-file FILE, or as - to read standard input"}},
		{"blank prompt", []string{"task", "start", " ", "\t"}, "", []string{"the prompt is empty"}},
		{"no prompt to a task", []string{"task", "prompt", "t1"}, "", []string{"the prompt is empty"}},
		{"empty stdin", []string{"task", "start", "-"}, "", []string{"the prompt is empty"}},
		{"blank stdin to a task", []string{"task", "prompt", "t1", "-"}, "\n\n", []string{"the prompt is empty"}},
		{"empty prompt file", []string{"task", "start", "--prompt-file", empty}, "", []string{"the prompt is empty"}},
		{"missing prompt file", []string{"task", "start", "--prompt-file", filepath.Join(dir, "nope.md")}, "",
			[]string{"--prompt-file: open", "no such file"}},
		{"prompt given twice", []string{"task", "start", "hello", "--prompt-file", ok}, "",
			[]string{"the prompt is given twice", "--prompt-file"}},
		{"huge prompt file", []string{"task", "start", "--prompt-file", huge}, "",
			[]string{"more than 1048576 bytes", "at most 1048576 bytes"}},
		{"huge stdin", []string{"task", "prompt", "t1", "-"}, strings.Repeat("y", task.MaxPromptBytes+1),
			[]string{"the prompt in standard input is more than 1048576 bytes"}},
		{"over the limit as JSON", []string{"task", "start", "--prompt-file", quotes}, "",
			[]string{"prompt: ", "bytes as JSON, more than the 1048576 allowed"}},
		{"empty id", []string{"task", "start", "--id", "", "hello"}, "",
			[]string{"--id: is empty", "printable characters, without spaces"}},
		{"id with a space", []string{"task", "start", "hello", "--id", "my task"}, "",
			[]string{`--id: "my task" holds a space`, "printable characters, without spaces"}},
		{"id like a flag", []string{"task", "start", "--id=-x", "hello"}, "", []string{`--id: "-x" starts with '-'`}},
		{"id too long", []string{"task", "start", "--id", strings.Repeat("a", 300), "hello"}, "", []string{"--id: is 300 bytes long"}},
		{"empty TASK", []string{"task", "show", ""}, "", []string{"TASK is empty"}},
		{"empty TASK to prompt", []string{"task", "prompt", "", "hi"}, "", []string{"TASK is empty"}},
		{"two TASKs", []string{"task", "cancel", "t1", "t2"}, "", []string{"want one TASK, got 2"}},
		{"unknown output", []string{"task", "show", "t1", "-o", "yaml"}, "", []string{`"yaml" is not an output format; use text or json`}},
		{"unknown output of list", []string{"task", "list", "--output", "xml"}, "", []string{`"xml" is not an output format`}},
		{"json against text", []string{"task", "watch", "t1", "--json", "-o", "text"}, "", []string{"--json means --output json"}},
		{"negative limit", []string{"task", "list", "--limit", "-1"}, "", []string{"--limit: -1 is negative"}},
		{"negative after", []string{"task", "watch", "t1", "--after", "-1", "--follow=false"}, "",
			[]string{"--after: -1 is negative", "use 0 (from the first event) or a sequence number"}},
		{"unknown flag", []string{"task", "close", "t1", "--force"}, "", []string{"unknown flag: --force"}},
		{"unknown subcommand", []string{"task", "sign-off", "t1"}, "", []string{`unknown subcommand "sign-off"`, "start, prompt"}},
		{"deny without a reason", []string{"task", "deny", "t1", "r1"}, "", []string{"--reason: a denial needs a reason"}},
		{"answer without an option", []string{"task", "approve", "t1", "r1", "--answer", "Which?"}, "", []string{"--answer", "QUESTION=OPTION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			err := run(ctx, tc.args, strings.NewReader(tc.stdin), &out, &errb)
			if err == nil {
				t.Fatalf("%q was accepted", tc.args)
			}
			msg := err.Error()
			for _, s := range []string{"connecting to temporal", "127.0.0.1:1", "context deadline"} {
				if strings.Contains(msg, s) {
					t.Fatalf("%q dialled before refusing its input: %v", tc.args, err)
				}
			}
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("%q: error %q does not say %q", tc.args, msg, s)
				}
			}
			if out.Len() > 0 {
				t.Errorf("%q printed %q", tc.args, out.String())
			}
		})
	}

	// The witness: valid input does dial (Temporal to write, Postgres to read), and fails on
	// the unreachable address, so the cases above would have shown it.
	t.Run("valid input dials", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"task", "start", "hello", "--prompt-file", ""}, "connecting to temporal at 127.0.0.1:1"},
			{[]string{"task", "start", "--prompt-file", ok}, "connecting to temporal at 127.0.0.1:1"},
			{[]string{"task", "show", "t1", "-o", "json"}, "connecting to postgres at 127.0.0.1:1"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := run(ctx, c.args, strings.NewReader(""), io.Discard, io.Discard)
			cancel()
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%q: err = %v, want a failure to connect", c.args, err)
			}
		}
	})
}

func TestPromptInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "prompt.md")
	// Longer than one argument may be on Linux (128 KiB): only a file or
	// standard input can carry it.
	long := strings.Repeat("a long prompt line\n", 300<<10/18)
	if err := os.WriteFile(file, []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		in     promptInput
		args   []string
		stdin  string
		want   string
		attach []string
	}{
		{"arguments", promptInput{}, []string{"fix", "the", "bug"}, "", "fix the bug", nil},
		{"one argument", promptInput{}, []string{"fix the bug"}, "", "fix the bug", nil},
		{"stdin as -", promptInput{}, []string{"-"}, long, long, nil},
		{"stdin as --prompt-file -", promptInput{file: "-"}, nil, "from stdin\n", "from stdin\n", nil},
		{"file", promptInput{file: file}, nil, "not read", long, nil},
		{"- with more words is text", promptInput{}, []string{"-", "is", "a", "dash"}, "not read", "- is a dash", nil},
		{"attachments", promptInput{attach: []string{"a.png, b.png", "", "c.png"}}, []string{"look"}, "", "look", []string{"a.png", "b.png", "c.png"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := tc.in.prompt(tc.args, strings.NewReader(tc.stdin))
			if err != nil {
				t.Fatal(err)
			}
			if p.Text != tc.want {
				t.Errorf("text = %.40q (%d bytes), want %.40q (%d bytes)", p.Text, len(p.Text), tc.want, len(tc.want))
			}
			if !slices.Equal(p.Attachments, tc.attach) {
				t.Errorf("attachments = %q, want %q", p.Attachments, tc.attach)
			}
		})
	}
}
