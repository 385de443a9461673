package main

import (
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
	var reason, always, by string
	var wait time.Duration
	var answers []string
	c.Flags().StringVar(&reason, "reason", "", "why (a denial's reason is what the agent reads; required to deny)")
	c.Flags().StringVar(&by, "by", "", "who decides (default: your user name)")
	c.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the task to apply the decision (0: return once it is recorded)")
	if allow {
		c.Flags().StringVar(&always, "always", "", "also grant, for the rest of the task, the request's suggestion with this key (see drover task pending)")
		c.Flags().StringArrayVar(&answers, "answer", nil, `for a question: "QUESTION=OPTION" (repeat for each question, or for each option of a multi-select one)`)
	}
	out := addOutputFlags(c, false)
	c.RunE = func(c *cobra.Command, args []string) error {
		id, ctx := args[0], c.Context()
		if wait < 0 {
			return usageErrorf(c, "--wait: %s is negative", wait)
		}
		if err := (task.Decision{Allow: allow, Reason: strings.TrimSpace(reason)}).Validate(); err != nil {
			return usageErrorf(c, "--%v", err)
		}
		parsed, err := parseAnswers(answers)
		if err != nil {
			return usageErrorf(c, "--answer: %v", err)
		}
		if by == "" {
			by = currentUser()
		}
		reqID := ""
		if len(args) == 2 {
			reqID = args[1]
		}
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			return a.withView(ctx, func(v *taskview.View) error {
				dc := &taskclient.Decider{Temporal: tc.Temporal, View: v}
				d := task.Decision{RequestID: reqID, Allow: allow, Reason: reason, By: by, Always: always, Answers: parsed}
				if d.RequestID == "" {
					// Named here, so that what is printed names it too.
					r, err := v.OnlyPending(ctx, id)
					if err != nil {
						return err
					}
					d.RequestID = r.RequestID
				}
				rec, applied, err := dc.Decide(ctx, id, d, wait)
				if err != nil {
					return err
				}
				if out.isJSON() {
					return writeJSON(a.stdout, struct {
						TaskID    string               `json:"task_id"`
						RequestID string               `json:"request_id"`
						Recorded  bool                 `json:"recorded"`
						Delivered bool                 `json:"delivered"`
						Decision  *task.DecisionRecord `json:"decision,omitempty"`
					}{id, d.RequestID, true, applied, recordOrNil(rec, applied)})
				}
				if !applied {
					fmt.Fprintf(a.stdout, "task %s: %s of request %s recorded; it applies when the task's worker runs\n", id, verb, d.RequestID)
					return nil
				}
				fmt.Fprintf(a.stdout, "task %s: request %s %s by %s\n", id, d.RequestID, rec.Outcome, rec.By)
				if rec.Grant != nil {
					fmt.Fprintf(a.stdout, "granted for the rest of the task: %s\n", rec.Grant.Label)
				}
				if rec.NextMode != "" {
					fmt.Fprintf(a.stdout, "the task continues in %s mode\n", rec.NextMode)
				}
				return nil
			})
		})
	}
	return c
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
