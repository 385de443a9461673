package main

import (
	"context"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
)

// newTaskDecideCommand makes approve or deny.
func newTaskDecideCommand(a *app, allow bool) *cobra.Command {
	verb, short := "deny", "Deny a pending permission request; the agent reads the reason"
	if allow {
		verb, short = "approve", "Approve a pending permission request (a tool call, a plan, an answer to a question)"
	}
	c := &cobra.Command{
		Use:   verb + " TASK [REQUEST]",
		Short: short,
		Long: short + `.

REQUEST is the request's id, as drover task pending and drover task watch show it; it
may be left out when the task has exactly one request waiting.

The decision is recorded in Postgres and sent to the task; no worker needs to run. The
command returns once it is recorded, and the task applies it when its worker runs. With
--wait it waits that long for the task to apply it, and prints what was applied.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf(c, "want TASK and, optionally, REQUEST; got %d argument(s)", len(args))
			}
			return checkTaskArg(c, args[0])
		},
	}
	f := &decideFlags{allow: allow, verb: verb}
	f.add(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		d, err := f.decision(c, args)
		if err != nil {
			return err
		}
		return a.decide(c.Context(), args[0], d, f)
	}
	return c
}

// decideFlags are the flags of approve and deny.
type decideFlags struct {
	allow              bool
	verb               string
	reason, always, by string
	wait               time.Duration
	answers            []string
	out                *output
}

func (f *decideFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.reason, "reason", "", "why (a denial's reason is what the agent reads; required to deny)")
	c.Flags().StringVar(&f.by, "by", "", "who decides (default: your user name)")
	c.Flags().DurationVar(&f.wait, "wait", 0, "wait up to this long for the task to apply the decision (0: return once it is recorded)")
	if f.allow {
		c.Flags().StringVar(&f.always, "always", "", "also grant, for the rest of the task, the request's suggestion with this key (see drover task pending)")
		c.Flags().StringArrayVar(&f.answers, "answer", nil, `for a question: "QUESTION=OPTION" (repeat for each question, or for each option of a multi-select one)`)
	}
	f.out = addOutputFlags(c, false)
}

// decision is the decision the flags and arguments say, checked as far as it can be without
// its request (task.Decision.Validate).
func (f *decideFlags) decision(c *cobra.Command, args []string) (task.Decision, error) {
	if f.wait < 0 {
		return task.Decision{}, usageErrorf(c, "--wait: %s is negative", f.wait)
	}
	d := task.Decision{Allow: f.allow, Reason: strings.TrimSpace(f.reason), By: f.by, Always: f.always}
	if err := d.Validate(); err != nil {
		return d, usageErrorf(c, "--%v", err)
	}
	answers, err := parseAnswers(f.answers)
	if err != nil {
		return d, usageErrorf(c, "--answer: %v", err)
	}
	d.Answers = answers
	if d.By == "" {
		d.By = currentUser()
	}
	if len(args) == 2 {
		d.RequestID = args[1]
	}
	return d, nil
}

// decide records d on task id through taskclient.Decider and prints what happened.
func (a *app) decide(ctx context.Context, id string, d task.Decision, f *decideFlags) error {
	return a.withClient(ctx, func(tc *taskclient.Client) error {
		return a.withView(ctx, func(v *taskview.View) error {
			if d.RequestID == "" {
				// Named here, so that what is printed names it too.
				r, err := v.OnlyPending(ctx, id)
				if err != nil {
					return err
				}
				d.RequestID = r.RequestID
			}
			dc := &taskclient.Decider{Temporal: tc.Temporal, View: v}
			rec, applied, err := dc.Decide(ctx, id, d, f.wait)
			if err != nil {
				return err
			}
			return a.printDecided(id, d.RequestID, f, rec, applied)
		})
	})
}

// printDecided says what became of a decision: recorded, or applied (and what it granted).
func (a *app) printDecided(id, requestID string, f *decideFlags, rec task.DecisionRecord, applied bool) error {
	if f.out.isJSON() {
		return writeJSON(a.stdout, struct {
			TaskID    string               `json:"task_id"`
			RequestID string               `json:"request_id"`
			Recorded  bool                 `json:"recorded"`
			Delivered bool                 `json:"delivered"`
			Decision  *task.DecisionRecord `json:"decision,omitempty"`
		}{id, requestID, true, applied, recordOrNil(rec, applied)})
	}
	if !applied {
		fmt.Fprintf(a.stdout, "task %s: %s of request %s recorded; the task's worker applies it (--wait DURATION waits until it has)\n", id, f.verb, requestID)
		return nil
	}
	fmt.Fprintf(a.stdout, "task %s: request %s %s by %s\n", id, requestID, rec.Outcome, rec.By)
	if rec.Grant != nil {
		fmt.Fprintf(a.stdout, "granted for the rest of the task: %s\n", rec.Grant.Label)
	}
	if rec.NextMode != "" {
		fmt.Fprintf(a.stdout, "the task continues in %s mode\n", rec.NextMode)
	}
	return nil
}

func recordOrNil(rec task.DecisionRecord, ok bool) *task.DecisionRecord {
	if !ok {
		return nil
	}
	return &rec
}

// parseAnswers turns "QUESTION=OPTION" flags into the answers of a question request.
func parseAnswers(flags []string) (map[string][]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, f := range flags {
		q, o, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(q) == "" || strings.TrimSpace(o) == "" {
			return nil, fmt.Errorf("%q is not QUESTION=OPTION", f)
		}
		out[q] = append(out[q], o)
	}
	return out, nil
}

// currentUser names the person deciding, for the record.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}
