package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
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

func TestEveryCommandHasHelp(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--help"}, {"demo", "--help"}, {"worker", "--help"}, {"migrate", "--help"}, {"normalize", "--help"},
		{"task", "start", "--help"}, {"task", "prompt", "--help"}, {"task", "interrupt", "--help"},
		{"task", "close", "--help"}, {"task", "cancel", "--help"}, {"task", "list", "--help"},
		{"task", "show", "--help"}, {"task", "watch", "--help"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, nil, &out, &errb)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: err = %v", args, err)
		}
		if !strings.Contains(errb.String(), "Usage: drover") || !strings.Contains(errb.String(), "DROVER_DATABASE_URL") {
			t.Errorf("%v: help text lacks the usage line or the environment:\n%s", args, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"bogus"}, nil, &out, &errb); err == nil {
		t.Error("an unknown command was accepted")
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("postgres://drover:hunter2@db:5432/drover")
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "drover:***@db") {
		t.Errorf("redactURL = %q", got)
	}
}
