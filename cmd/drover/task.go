package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/worker"
)

func cmdTask(ctx context.Context, args []string, e env, log *slog.Logger, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("task: which subcommand? start, prompt, interrupt, close, cancel, list, show or watch")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "start":
		return taskStart(ctx, args, e, log, stdout, stderr)
	case "prompt":
		return taskPrompt(ctx, args, e, log, stdout, stderr)
	case "interrupt", "close", "cancel":
		return taskControl(ctx, sub, args, e, log, stdout, stderr)
	case "list":
		return taskList(ctx, args, e, log, stdout, stderr)
	case "show":
		return taskShow(ctx, args, e, log, stdout, stderr)
	case "watch":
		return taskWatch(ctx, args, e, log, stdout, stderr)
	default:
		return fmt.Errorf("task: unknown subcommand %q", sub)
	}
}

// withClient dials Temporal for the duration of fn.
func withClient(ctx context.Context, e env, log *slog.Logger, fn func(*taskclient.Client) error) error {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := worker.Dial(dctx, e.temporalAddress, e.namespace, quiet(log))
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(&taskclient.Client{Temporal: c, TaskQueue: e.taskQueue})
}

// quiet keeps the SDK's connection chatter out of interactive commands.
func quiet(log *slog.Logger) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func taskStart(ctx context.Context, args []string, e env, log *slog.Logger, stdout, stderr io.Writer) error {
	fs := newFlags("task start", "drover task start [flags] PROMPT", stderr)
	id := fs.String("id", "", "task id (default: a new uuid); starting an existing task sends it the prompt")
	workspace := fs.String("workspace", ".", "the folder the agent works in, on the worker's host")
	model := fs.String("model", "", "model for the CLI's --model (default: the CLI's)")
	mode := fs.String("mode", string(task.Autonomous), "permission mode (autonomous; supervised and plan are not available yet)")
	maxTurns := fs.Int("max-turns", 0, "bound the agentic loop of each turn (0: none)")
	idle := fs.Duration("idle-timeout", 0, "finish the task after this long without a prompt (0: never)")
	attach := fs.String("attach", "", "comma-separated image paths, relative to the workspace")
	requestID := fs.String("request-id", "", "makes the call idempotent: a retry with the same id is answered once and queues nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if strings.TrimSpace(prompt) == "" {
		return errors.New("task start: the prompt is empty")
	}
	if m := task.PermissionMode(*mode); !m.Valid() {
		return fmt.Errorf("task start: unknown permission mode %q", *mode)
	} else if m != task.Autonomous {
		return fmt.Errorf("task start: permission mode %q is not available yet; use autonomous", *mode)
	}
	ws, err := filepath.Abs(*workspace)
	if err != nil {
		return fmt.Errorf("task start: workspace: %w", err)
	}
	if *id == "" {
		*id = uuid.NewString()
	}
	p := task.Params{
		Workspace:   ws,
		Profile:     task.Profile{Model: *model, PermissionMode: task.PermissionMode(*mode), MaxTurns: *maxTurns},
		IdleTimeout: *idle,
	}
	return withClient(ctx, e, log, func(c *taskclient.Client) error {
		acc, err := c.Start(ctx, *id, p, task.Prompt{Text: prompt, Attachments: splitList(*attach)}, *requestID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "task %s: prompt accepted as turn %d (uuid %s)\n", *id, acc.Turn, acc.PromptUUID)
		fmt.Fprintf(stdout, "follow it with: drover task watch %s\n", *id)
		return nil
	})
}

func taskPrompt(ctx context.Context, args []string, e env, log *slog.Logger, stdout, stderr io.Writer) error {
	fs := newFlags("task prompt", "drover task prompt [flags] TASK PROMPT", stderr)
	attach := fs.String("attach", "", "comma-separated image paths, relative to the workspace")
	requestID := fs.String("request-id", "", "makes the call idempotent: a retry with the same id is answered once and queues nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return errors.New("task prompt: want TASK and PROMPT")
	}
	id, prompt := fs.Arg(0), strings.Join(fs.Args()[1:], " ")
	return withClient(ctx, e, log, func(c *taskclient.Client) error {
		acc, err := c.Prompt(ctx, id, task.Prompt{Text: prompt, Attachments: splitList(*attach)}, *requestID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "task %s: prompt accepted as turn %d (%d ahead of it)\n", id, acc.Turn, acc.Queued)
		return nil
	})
}

func taskControl(ctx context.Context, verb string, args []string, e env, log *slog.Logger, stdout, stderr io.Writer) error {
	fs := newFlags("task "+verb, "drover task "+verb+" TASK", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("task %s: want one TASK", verb)
	}
	id := fs.Arg(0)
	return withClient(ctx, e, log, func(c *taskclient.Client) error {
		switch verb {
		case "interrupt":
			r, err := c.Interrupt(ctx, id)
			if err != nil {
				return err
			}
			if !r.Interrupted {
				fmt.Fprintf(stdout, "task %s: no turn was running\n", id)
				return nil
			}
			fmt.Fprintf(stdout, "task %s: turn %d interrupted\n", id, r.Turn)
		case "close":
			if err := c.Close(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "task %s: closing after its queued prompts\n", id)
		case "cancel":
			if err := c.Cancel(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "task %s: cancel requested\n", id)
		}
		return nil
	})
}

func taskList(ctx context.Context, args []string, e env, log *slog.Logger, stdout, stderr io.Writer) error {
	fs := newFlags("task list", "drover task list [flags]", stderr)
	query := fs.String("query", "", `extra visibility filter, e.g. DroverStatus = "idle"`)
	limit := fs.Int("limit", 50, "at most this many tasks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return withClient(ctx, e, log, func(c *taskclient.Client) error {
		list, err := c.List(ctx, *query, *limit)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSTATUS\tTURNS\tCOST USD\tMODEL\tSTARTED\tWORKSPACE")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.4f\t%s\t%s\t%s\n", s.TaskID, s.Status, s.Turns, s.CostUSD,
				dash(s.Model), s.Started.Local().Format(time.DateTime), s.Workspace)
		}
		return tw.Flush()
	})
}

func taskShow(ctx context.Context, args []string, e env, log *slog.Logger, stdout, stderr io.Writer) error {
	fs := newFlags("task show", "drover task show [flags] TASK", stderr)
	asJSON := fs.Bool("json", false, "print the state as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("task show: want one TASK")
	}
	id := fs.Arg(0)
	return withClient(ctx, e, log, func(c *taskclient.Client) error {
		st, err := c.State(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		fmt.Fprintf(stdout, "task        %s\nstatus      %s\nworkspace   %s\nmode        %s\nmodel       %s\n",
			id, st.Status, st.Workspace, st.PermissionMode, dash(st.Model))
		fmt.Fprintf(stdout, "turns       %d (failed %d)\ncost        $%.6f\ntokens      in %d, out %d\n",
			st.Totals.Turns, st.Totals.FailedTurns, st.Totals.CostUSD, st.Totals.InputTokens, st.Totals.OutputTokens)
		fmt.Fprintf(stdout, "session     %s\nresume at   %s\nhost queue  %s\n", dash(st.SessionID), dash(st.LastMessageUUID), dash(st.HostQueue))
		if st.RunningTurn > 0 {
			fmt.Fprintf(stdout, "running     turn %d\n", st.RunningTurn)
		}
		for _, p := range st.Pending {
			fmt.Fprintf(stdout, "queued      turn %d: %s\n", p.Turn, clip(p.Prompt.Text, 60))
		}
		if st.LastError != "" {
			fmt.Fprintf(stdout, "last error  %s\n", st.LastError)
		}
		return showTurns(ctx, e, id, stdout)
	})
}

// showTurns prints the task's accounting rows when the database is reachable.
func showTurns(ctx context.Context, e env, id string, stdout io.Writer) error {
	pool, err := store.Connect(ctx, e.databaseURL)
	if err != nil {
		fmt.Fprintf(stdout, "(turn records unavailable: %v)\n", err)
		return nil
	}
	defer pool.Close()
	turns, err := store.ListTurns(ctx, pool, id)
	if err != nil {
		fmt.Fprintf(stdout, "(turn records unavailable: %v)\n", err)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTURN\tSTATUS\tATTEMPTS\tCOST USD\tIN\tOUT\tPROMPT")
	for _, t := range turns {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.6f\t%d\t%d\t%s\n", t.Turn, t.Status, t.Attempts, t.CostUSD, t.InputTokens, t.OutputTokens, clip(t.Prompt, 50))
	}
	return tw.Flush()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
