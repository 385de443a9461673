package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/worker"
)

// The demo's two prompts, and what the offline model answers to them.
const (
	demoPrompt1 = "Create hello.txt containing a greeting."
	demoPrompt2 = "Now show me what the file says."
	demoContent = "Hello from a durable Claude Code task!\n"
)

func newDemoCommand(a *app) *cobra.Command {
	var o demoOptions
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run one task end to end offline (fake Messages API) and exit",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runDemo(c.Context(), a, o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.real, "real-api", false, "use the real Messages API with ANTHROPIC_API_KEY instead of the offline fake")
	f.BoolVar(&o.keep, "keep", false, "keep the demo's state folder (printed at the end)")
	f.DurationVar(&o.timeout, "timeout", 3*time.Minute, "give up after this long")
	return c
}

type demoOptions struct {
	real, keep bool
	timeout    time.Duration
}

func runDemo(ctx context.Context, a *app, o demoOptions) error {
	e, stdout, stderr := a.env, a.stdout, a.stderr
	if o.real && e.apiKey == "" {
		return errors.New("demo: --real-api needs ANTHROPIC_API_KEY")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	state, err := os.MkdirTemp("", "drover-demo-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(state)
	}
	workspace := filepath.Join(state, "workspace")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return err
	}

	// The demo quiets drover's own logs: what it shows is the event log.
	quietLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintln(stdout, "Starting a Temporal dev server, the fake Messages API and a worker...")
	s, err := startStack(ctx, e, stackOptions{
		stateDir: state, headless: true, fakeAPI: !o.real, hostID: "demo-" + uuid.NewString()[:8],
	}, quietLog)
	if err != nil {
		return err
	}
	defer s.stop(ctx)
	if s.fake != nil {
		scriptDemo(s.fake, workspace)
	}

	taskID := "demo-" + uuid.NewString()
	fmt.Fprintf(stdout, "Task %s, workspace %s\n\n", taskID, workspace)
	st, err := runDemoTask(ctx, s.worker, taskID, workspace, stdout)
	if err != nil {
		return err
	}

	content, _ := os.ReadFile(filepath.Join(workspace, "hello.txt"))
	fmt.Fprintf(stdout, "\nTask %s: %d turns, $%.6f, session %s\n", taskID, st.Totals.Turns, st.Totals.CostUSD, st.SessionID)
	fmt.Fprintf(stdout, "hello.txt on disk: %q\n", string(content))
	if o.keep {
		fmt.Fprintf(stdout, "State kept in %s\n", state)
	}
	if st.LastError != "" {
		return fmt.Errorf("demo: the task reported an error: %s", st.LastError)
	}
	if !o.real && string(content) != demoContent {
		return errors.New("demo: hello.txt does not hold what the agent wrote")
	}
	return nil
}

// scriptDemo tells the offline model what to answer the demo's two prompts: write hello.txt,
// then read it back.
func scriptDemo(model *offlinemodel.Server, workspace string) {
	model.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("I'll create the file."), offlinemodel.UseWrite(filepath.Join(workspace, "hello.txt"), demoContent)),
		offlinemodel.Reply(offlinemodel.Text("Created hello.txt with a greeting.")),
		offlinemodel.Reply(offlinemodel.UseBash("cat hello.txt")),
		offlinemodel.Reply(offlinemodel.Text("The file says: "+demoContent)),
	)
}

// runDemoTask starts the demo's task, sends its second prompt while the first turn runs, prints
// the event log live until both turns are done, and closes the task.
func runDemoTask(ctx context.Context, w *worker.Worker, taskID, workspace string, stdout io.Writer) (task.State, error) {
	tc := &taskclient.Client{Temporal: w.Client()}
	params := task.Params{Workspace: workspace, Profile: task.Profile{PermissionMode: task.Autonomous}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = taskview.New(w.Pool()).Watch(watchCtx, taskID, 0, func(ev taskview.Event) error {
			renderEvent(stdout, taskID, ev)
			return nil
		})
	})
	stop := func() { stopWatch(); wg.Wait() }

	if _, err := tc.Start(ctx, taskID, params, task.Prompt{Text: demoPrompt1}, ""); err != nil {
		stop()
		return task.State{}, err
	}
	// The second prompt arrives while the first turn runs: it waits its turn.
	if _, err := tc.Prompt(ctx, taskID, task.Prompt{Text: demoPrompt2}, ""); err != nil {
		stop()
		return task.State{}, err
	}
	st, err := waitTurns(ctx, tc, taskID, 2)
	// Let the watcher print the last events before it stops.
	time.Sleep(300 * time.Millisecond)
	stop()
	if err != nil {
		return task.State{}, err
	}
	return st, tc.Close(ctx, taskID)
}

// waitTurns waits until the task has finished n turns and is idle.
func waitTurns(ctx context.Context, tc *taskclient.Client, taskID string, n int) (task.State, error) {
	for {
		st, err := tc.State(ctx, taskID)
		if err == nil && st.Totals.Turns >= n && st.RunningTurn == 0 && len(st.Pending) == 0 {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("demo: waiting for %d turns: %w", n, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
