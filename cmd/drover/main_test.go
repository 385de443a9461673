package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/testkit/pgtest"
)

func TestNormalizeCommandOnRecordedTranscripts(t *testing.T) {
	files, _ := filepath.Glob("../../claudecode/testdata/transcripts/*.jsonl")
	var n int
	for _, f := range files {
		if strings.HasSuffix(f, ".stdin.jsonl") {
			continue
		}
		n++
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"normalize", f}, nil, &out, &errb); err != nil {
			t.Errorf("%s: %v\n%s", f, err, errb.String())
			continue
		}
		var completes int
		for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var ev struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
				t.Fatalf("%s: output line %q is not an event", f, line)
			}
			if ev.Type == "complete" {
				completes++
			}
		}
		if completes == 0 {
			t.Errorf("%s: no complete event", f)
		}
	}
	if n == 0 {
		t.Skip("no recorded transcripts")
	}
}

func TestNormalizeCommandSurvivesGarbage(t *testing.T) {
	in := strings.NewReader("not json\n{\"type\":\"result\"\n\x00\x01\n{}\n[1,2]\n{\"type\":\"assistant\",\"message\":null}\n")
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"normalize"}, in, &out, &errb); err != nil {
		t.Fatalf("normalize failed on bad input: %v", err)
	}
	if !strings.Contains(out.String(), `"error"`) {
		t.Errorf("malformed lines were not reported: %q", out.String())
	}
}

// everyCommand is every command line that names one command.
var everyCommand = [][]string{
	{"dev"}, {"demo"}, {"worker"}, {"migrate"}, {"normalize"}, {"task"},
	{"task", "start"}, {"task", "prompt"}, {"task", "interrupt"}, {"task", "close"},
	{"task", "cancel"}, {"task", "list"}, {"task", "show"}, {"task", "watch"},
	{"completion"},
}

func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range everyCommand {
		// --help, -h and "drover help …" print the same help, on stdout.
		var first string
		for _, args := range [][]string{
			append(slices.Clone(cmd), "--help"), append(slices.Clone(cmd), "-h"), append([]string{"help"}, cmd...),
		} {
			var out, errb bytes.Buffer
			if err := run(context.Background(), args, nil, &out, &errb); err != nil {
				t.Errorf("%v: err = %v", args, err)
			}
			help := out.String()
			if !strings.Contains(help, "Usage:\n  drover "+strings.Join(cmd, " ")) {
				t.Errorf("%v: help text lacks the usage line:\n%s", args, help)
			}
			if cmd[0] != "completion" && !strings.Contains(help, "DROVER_DATABASE_URL") {
				t.Errorf("%v: help text lacks the environment:\n%s", args, help)
			}
			if first == "" {
				first = help
			} else if help != first {
				t.Errorf("%v prints another help than %v --help", args, cmd)
			}
		}
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"bogus"}, nil, &out, &errb); err == nil {
		t.Error("an unknown command was accepted")
	}
	if err := run(context.Background(), nil, nil, &out, &errb); err == nil || !strings.Contains(errb.String(), "Usage:") {
		t.Errorf("no command: err = %v, stderr %q; want an error and the usage", err, errb.String())
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("postgres://drover:hunter2@db:5432/drover")
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "drover:***@db") {
		t.Errorf("redactURL = %q", got)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"completion", shell}, nil, &out, io.Discard); err != nil {
			t.Fatalf("completion %s: %v", shell, err)
		}
		if !strings.Contains(out.String(), "drover") {
			t.Errorf("completion %s printed no script for drover", shell)
		}
	}
	// What the shell asks when completing: subcommands, then flag values.
	for _, tc := range []struct {
		line []string
		want []string
	}{
		{[]string{"__complete", "task", ""}, []string{"start", "prompt", "interrupt", "close", "cancel", "budget", "resolve", "list", "show", "diff", "rewind", "fork", "watch", "pending", "approve", "deny"}},
		{[]string{"__complete", "task", "start", "--mode", ""}, []string{"autonomous", "supervised", "plan"}},
		{[]string{"__complete", "task", "show", "t1", "-o", ""}, []string{"text", "json"}},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), tc.line, nil, &out, io.Discard); err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		var got []string
		for _, l := range strings.Split(out.String(), "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				name, _, _ := strings.Cut(l, "\t")
				got = append(got, name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q completes %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestMigrateThenWatch runs migrate and a watch with its flags after the task
// id on a real database: an empty log prints nothing and ends.
func TestMigrateThenWatch(t *testing.T) {
	t.Setenv("DROVER_DATABASE_URL", pgtest.NewDatabase(t))
	t.Setenv("DROVER_LOG_LEVEL", "error")
	ctx := context.Background()
	if err := run(ctx, []string{"migrate"}, nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for _, args := range [][]string{
		{"task", "watch", "t1", "--follow=false", "--json"},
		{"task", "watch", "--follow=false", "t1", "-o", "json", "--after", "3"},
		{"task", "watch", "t1", "--follow=false"},
	} {
		var out, errb bytes.Buffer
		if err := run(ctx, args, nil, &out, &errb); err != nil {
			t.Errorf("%q: %v\n%s", args, err, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%q printed %q for an empty log", args, out.String())
		}
	}
}
