package main

import (
	"strings"

	fa "github.com/drover-run/drover/internal/offlinemodel"
)

// offlinePrefix marks what the offline model says, so that no one takes it for a real model.
const offlinePrefix = "(offline model) "

// offlineOutputMax bounds how much of a command's output the offline model quotes.
const offlineOutputMax = 2000

// offlineModel is the model of drover dev without an API key. It quotes a prompt back, except a
// prompt whose last line reads "run COMMAND": it then calls the Bash tool with COMMAND (a
// supervised task asks a person first) and, once the tool's result comes back, reports it. That
// is enough to try every part of drover offline, approvals included.
func offlineModel(r *fa.Request) (fa.Response, bool) {
	if r.Class != fa.ClassMain || len(r.Messages) == 0 {
		return fa.Response{}, false
	}
	if results := r.Messages[len(r.Messages)-1].ToolResults(); len(results) > 0 {
		res := results[len(results)-1]
		out := strings.TrimSpace(res.Content)
		if len(out) > offlineOutputMax {
			out = out[:offlineOutputMax] + "…"
		}
		if res.IsError {
			return fa.Reply(fa.Text(offlinePrefix + "The command did not run: " + out)), true
		}
		if out == "" {
			return fa.Reply(fa.Text(offlinePrefix + "The command ran; it printed nothing.")), true
		}
		return fa.Reply(fa.Text(offlinePrefix + "The command ran and printed:\n" + out)), true
	}
	text := strings.TrimSpace(r.LastUserText())
	if i := strings.LastIndex(text, "\n"); i >= 0 {
		text = strings.TrimSpace(text[i+1:])
	}
	if cmd, ok := runCommand(text); ok {
		return fa.Reply(fa.Text(offlinePrefix+"I will run `"+cmd+"`."), fa.UseBash(cmd)), true
	}
	return fa.Reply(fa.Text(offlinePrefix + "You said: " + text)), true
}

// runCommand reads "run COMMAND" (any case, a colon allowed after run).
func runCommand(line string) (string, bool) {
	if len(line) < 4 || !strings.EqualFold(line[:3], "run") || (line[3] != ' ' && line[3] != ':') {
		return "", false
	}
	cmd := strings.TrimSpace(line[4:])
	return cmd, cmd != ""
}
