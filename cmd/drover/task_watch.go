package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/taskview"
)

func newTaskWatchCommand(a *app) *cobra.Command {
	var (
		after  int64
		follow bool
	)
	c := &cobra.Command{
		Use:   "watch TASK",
		Short: "Print a task's events as they happen",
		Long: `Print a task's events as they happen, from its event log in Postgres. Stopped
and run again with --after SEQ, it resumes with no gap and no repeat. With
--output json it prints one JSON object a line: seq, time, turn, attempt, type
and event.`,
		Example: `  drover task watch hello
  drover task watch hello --follow=false --output json
  drover task watch hello --after 120`,
		Args: taskArg,
	}
	out := addOutputFlags(c, true)
	c.Flags().Int64Var(&after, "after", 0, "print events after this sequence number (resume a watch where it stopped)")
	c.Flags().BoolVar(&follow, "follow", true, "keep printing new events until interrupted")
	c.RunE = func(c *cobra.Command, args []string) error {
		if after < 0 {
			return inputError(fmt.Errorf("--after: %d is negative; use 0 (from the first event) or a sequence number", after))
		}
		return watchTask(c.Context(), a, args[0], after, follow, out.isJSON())
	}
	return c
}

// watchTask prints the events of task id after the sequence number after,
// and with follow the new ones until ctx ends.
func watchTask(ctx context.Context, a *app, id string, after int64, follow, asJSON bool) error {
	return a.withView(ctx, func(v *taskview.View) error {
		print := func(ev taskview.Event) error {
			if asJSON {
				return writeEventJSON(a.stdout, ev)
			}
			renderEvent(a.stdout, id, ev)
			return nil
		}
		if !follow {
			cursor := after
			for {
				evs, err := v.Events(ctx, id, cursor, 1000)
				if err != nil {
					return fmt.Errorf("task watch: %w", err)
				}
				for _, ev := range evs {
					if err := print(ev); err != nil {
						return err
					}
					cursor = ev.Seq
				}
				if len(evs) < 1000 {
					return nil
				}
			}
		}
		err := v.Watch(ctx, id, after, print)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil
		}
		return err
	})
}

// writeEventJSON prints one event as a line of JSON: seq, time, turn, attempt, type, event.
func writeEventJSON(w io.Writer, ev taskview.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// renderEvent prints one event as a line a person reads.
func renderEvent(w io.Writer, taskID string, ev taskview.Event) {
	var a events.AgentEvent
	if err := json.Unmarshal(ev.Event, &a); err != nil {
		fmt.Fprintf(w, "%6d t%d.%d %-18s (unreadable: %v)\n", ev.Seq, ev.Turn, ev.Attempt, ev.Type, err)
		return
	}
	fmt.Fprintf(w, "%6d t%d.%d %-18s %s\n", ev.Seq, ev.Turn, ev.Attempt, ev.Type, describe(a))
	if a.Type == events.TypePermissionRequest {
		for _, l := range requestDetails(taskID, a) {
			fmt.Fprintf(w, "%s%s\n", detailIndent, l)
		}
	}
}

// detailIndent lines up an event's detail lines under its description.
var detailIndent = strings.Repeat(" ", 6+1+5+1+18+1)

// maxDetailLines bounds the lines of a plan or a diff that a watch shows.
const maxDetailLines = 30

// requestDetails are the lines under a permission_request that tell a person what is asked and
// how to answer: the request, its deadline, the plan, diff or questions, and the commands.
func requestDetails(taskID string, a events.AgentEvent) []string {
	p := a.Permission
	if p == nil {
		p = &events.Permission{}
	}
	req := a.PendingID
	head := "request " + req
	if p.Reasked {
		head += " (asked again after a retry of the turn)"
	}
	if !p.Deadline.IsZero() {
		head += "; denied at " + p.Deadline.Local().Format(time.DateTime+" MST") + " if nobody answers"
	}
	lines := []string{head}
	block := func(title, text string) {
		ls := strings.Split(strings.TrimRight(text, "\n"), "\n")
		lines = append(lines, title)
		for i, l := range ls {
			if i == maxDetailLines {
				lines = append(lines, fmt.Sprintf("  … %d more lines", len(ls)-i))
				break
			}
			lines = append(lines, "  "+l)
		}
	}
	approve := fmt.Sprintf("drover task approve %s %s", taskID, req)
	switch {
	case len(p.Questions) > 0:
		for _, q := range p.Questions {
			var opts []string
			for _, o := range q.Options {
				opts = append(opts, o.Label)
			}
			kind := "choose one"
			if q.MultiSelect {
				kind = "choose one or more"
			}
			lines = append(lines, fmt.Sprintf("question: %s (%s: %s)", q.Question, kind, strings.Join(opts, ", ")))
		}
		example := approve
		for _, q := range p.Questions {
			if len(q.Options) > 0 {
				example += " --answer " + shellQuote(q.Question+"="+q.Options[0].Label)
			}
		}
		lines = append(lines, "answer:  "+example, "         (--answer QUESTION=OPTION for each question; repeat it for each option of a multiple choice)")
	case p.Plan != "":
		block("plan:", p.Plan)
		lines = append(lines, "approve: "+approve)
	default:
		if p.Diff != "" {
			block("change:", p.Diff)
		}
		lines = append(lines, "approve: "+approve)
		for i, label := range allowAlwaysLabels(p.AllowAlways) {
			lines = append(lines, fmt.Sprintf("always:  %s --always %d   (%s, for the rest of the task)", approve, i+1, label))
		}
	}
	lines = append(lines, fmt.Sprintf("deny:    drover task deny %s %s --reason %s", taskID, req, shellQuote("why, for the agent")))
	return lines
}

// allowAlwaysLabels says what each "allow always" choice of a request grants, in order (its
// key is its position from 1).
func allowAlwaysLabels(raw json.RawMessage) []string {
	var updates []struct {
		Type  string `json:"type"`
		Rules []struct {
			ToolName    string `json:"toolName"`
			RuleContent string `json:"ruleContent"`
		} `json:"rules"`
		Directories []string `json:"directories"`
		Mode        string   `json:"mode"`
		Behavior    string   `json:"behavior"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &updates) != nil {
		return nil
	}
	out := make([]string, 0, len(updates))
	for _, u := range updates {
		var label string
		switch u.Type {
		case "addRules", "replaceRules":
			var rules []string
			for _, r := range u.Rules {
				if r.RuleContent != "" {
					rules = append(rules, r.ToolName+"("+r.RuleContent+")")
				} else {
					rules = append(rules, "every "+r.ToolName+" call")
				}
			}
			label = strings.TrimSpace(u.Behavior + " " + strings.Join(rules, ", "))
		case "addDirectories":
			label = "add directories " + strings.Join(u.Directories, ", ")
		case "setMode":
			label = "switch to " + u.Mode + " mode"
		default:
			label = u.Type
		}
		out = append(out, oneLine(label, 100))
	}
	return out
}

// shellQuote quotes s for a POSIX shell, so that a command line shown can be pasted as is.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func describe(a events.AgentEvent) string {
	sub := ""
	if a.ParentToolCallID != "" {
		sub = "[subagent] "
	}
	switch a.Type {
	case events.TypeSessionStatus:
		if a.Data != nil {
			return fmt.Sprintf("session %s (%s)", a.SessionID, a.Data.SessionStatus)
		}
		return "session " + a.SessionID
	case events.TypeAvailableCommands:
		return fmt.Sprintf("%d slash commands", len(a.AvailableCommands))
	case events.TypeUserMessage:
		if a.By != "" {
			return "> " + oneLine(a.Text, 120) + "  (by " + a.By + ")"
		}
		return "> " + oneLine(a.Text, 120)
	case events.TypeMessageChunk:
		return sub + oneLine(a.Text, 160)
	case events.TypeReasoning:
		return sub + "(thinking) " + oneLine(a.ReasoningText, 140)
	case events.TypeToolCall, events.TypeToolUpdate:
		return fmt.Sprintf("%s%s %s [%s]", sub, a.ToolStatus, oneLine(a.ToolTitle, 100), a.ToolCallID)
	case events.TypeContextWindow:
		if a.ContextWindow != nil {
			return fmt.Sprintf("%d / %d tokens", a.ContextWindow.Used, a.ContextWindow.Size)
		}
	case events.TypeComplete:
		if a.Data != nil && a.Data.Completion != nil {
			c := a.Data.Completion
			line := fmt.Sprintf("cost $%.6f, %d in / %d out tokens, %d ms, resume at %s", c.CostUSD, c.InputTokens, c.OutputTokens, c.DurationMS, c.LastMessageUUID)
			if c.Checkpoint != "" {
				line += ", checkpoint " + c.Checkpoint
			}
			return line
		}
	case events.TypeWorkspaceRestored:
		if w := a.Workspace; w != nil {
			return w.Message
		}
	case events.TypeError:
		if a.Error != nil {
			return fmt.Sprintf("%s: %s", a.Error.Kind, oneLine(a.Error.Message, 140))
		}
	case events.TypeRateLimit:
		return oneLine(a.RateLimitMessage, 140)
	case events.TypePermissionRequest:
		return sub + permissionHeadline(a)
	case events.TypePermissionCancelled:
		return "request " + a.PendingID + " withdrawn: nobody needs to answer it any more"
	case events.TypePermissionDecision:
		if d := a.Decision; d != nil {
			return decisionLine(a.PendingID, a.ToolName, d)
		}
	case events.TypeTurnRetry:
		if a.TurnRetry != nil {
			return fmt.Sprintf("attempt %d failed (%s); its output above is partial", a.TurnRetry.Attempt, a.TurnRetry.Reason)
		}
	case events.TypeCompaction:
		if a.Compaction != nil {
			return a.Compaction.Phase
		}
	case events.TypeBudgetExhausted:
		if b := a.Budget; b != nil {
			how := "reached"
			if b.Cut {
				how = "reached; the turn was cut"
			}
			return fmt.Sprintf("the task's budget is spent (%s %s): $%.6f, %d turns, %s; raise it with drover task budget",
				b.Bound, how, b.CostUSD, b.Turns, time.Duration(b.WorkDurationMS)*time.Millisecond)
		}
	}
	return ""
}

// decisionLine says in one line how a request was answered.
func decisionLine(requestID, tool string, d *events.Decision) string {
	line := fmt.Sprintf("request %s (%s) %s", requestID, tool, d.Outcome)
	if d.By != "" {
		line += " by " + d.By
	}
	if d.Reason != "" {
		line += ": " + oneLine(d.Reason, 140)
	}
	if d.Grant != "" {
		line += "; always allowed from now on: " + d.Grant
	}
	if d.NextMode != "" {
		line += "; the task continues in " + d.NextMode + " mode"
	}
	return line
}

// permissionHeadline says in one line what a permission request asks.
func permissionHeadline(a events.AgentEvent) string {
	summary := a.ToolTitle
	if a.Permission != nil && a.Permission.Summary != "" {
		summary = a.Permission.Summary
	}
	switch a.ToolName {
	case "ExitPlanMode":
		return "WAITS FOR YOU: the agent presents a plan for approval"
	case "AskUserQuestion":
		return "WAITS FOR YOU: the agent asks " + oneLine(summary, 140)
	case "Bash":
		return "WAITS FOR YOU: may Bash run " + oneLine(summary, 140) + "?"
	}
	return fmt.Sprintf("WAITS FOR YOU: may %s run on %s?", a.ToolName, oneLine(summary, 140))
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
