package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

// promptAccepted is what start and prompt print with --output json.
type promptAccepted struct {
	TaskID string `json:"task_id"`
	task.PromptAccepted
}

func newTaskStartCommand(a *app) *cobra.Command {
	var (
		id, title, workspace, repo, base, model, mode, afterPlan, requestID string
		maxTurns                                                            int
		idle, approvalTimeout                                               time.Duration
		budget                                                              task.Budget
		in                                                                  promptInput
	)
	c := &cobra.Command{
		Use:   "start PROMPT...",
		Short: "Start a task with its first prompt",
		Long: `Start a task with its first prompt. Starting a task that already runs (the
same --id) sends it the prompt.

` + promptHelp,
		Example: `  drover task start --id hello --workspace . "Say hello"
  drover task start --id fix --repo https://github.com/me/app.git --base main "Fix the failing test"
  drover task start "Fix the failing test" --max-turns 20 --idle-timeout 1h
  drover task start --id docs --title "Docs for the API" --prompt-file brief.md
  git diff | drover task start --id review -`,
		Args: cobra.ArbitraryArgs,
	}
	out := addOutputFlags(c, false)
	f := c.Flags()
	f.StringVar(&id, "id", "", "task id (default: a new uuid); starting an existing task sends it the prompt")
	f.StringVar(&title, "title", "", "the task's name in lists and the Temporal UI (default: the first line of the prompt)")
	addFolderFlags(c, &workspace, &repo, &base)
	f.StringVar(&model, "model", "", "model for the CLI's --model (default: the CLI's)")
	f.StringVar(&mode, "mode", string(task.Autonomous), "permission mode: "+modesHelp())
	f.StringVar(&afterPlan, "after-plan", "", "for --mode plan: the mode the task continues in once its plan is approved (autonomous, the default, or supervised)")
	f.DurationVar(&approvalTimeout, "approval-timeout", 0, fmt.Sprintf("how long a permission request waits for a person before it is denied (0: %s)", task.DefaultApprovalTimeout))
	f.IntVar(&maxTurns, "max-turns", 0, "bound the agentic loop of each turn (0: none)")
	f.Float64Var(&budget.MaxCostUSD, "budget-cost", 0, "the task's budget: bound what the API bills it, failed attempts included, in US dollars (0: the worker's default)")
	f.IntVar(&budget.MaxTurns, "budget-turns", 0, "the task's budget: bound its turns (0: the worker's default)")
	f.DurationVar(&budget.MaxDuration, "budget-duration", 0, "the task's budget: bound the time its turns run, added up (0: the worker's default)")
	f.DurationVar(&idle, "idle-timeout", 0, "finish the task after this long without a prompt (0: never)")
	f.StringVar(&requestID, "request-id", "", "makes the call idempotent: a retry with the same id is answered once and queues nothing")
	in.addFlags(c)
	_ = c.RegisterFlagCompletionFunc("mode", completeModes)

	c.RunE = func(c *cobra.Command, args []string) error {
		if !c.Flags().Changed("id") {
			id = uuid.NewString()
		}
		ws, rp, err := startFolder(c, workspace, repo)
		if err != nil {
			return err
		}
		p := task.Params{
			Title:     strings.TrimSpace(title),
			Workspace: ws, Repo: rp, Base: base,
			Profile: task.Profile{Model: model, PermissionMode: task.PermissionMode(mode), MaxTurns: maxTurns,
				AfterPlan: task.PermissionMode(afterPlan)},
			IdleTimeout:     idle,
			ApprovalTimeout: approvalTimeout,
			Budget:          budget,
		}
		if err := task.ValidateStart(id, p); err != nil {
			return inputError(err)
		}
		prompt, err := in.prompt(args, a.stdin)
		if err != nil {
			return err
		}
		ctx := c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			acc, err := tc.Start(ctx, id, p, prompt, requestID)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, promptAccepted{TaskID: id, PromptAccepted: acc})
			}
			fmt.Fprintf(a.stdout, "task %s: prompt accepted as turn %d (uuid %s)\n", id, acc.Turn, acc.PromptUUID)
			fmt.Fprintf(a.stdout, "follow it with: drover task watch %s\n", id)
			return nil
		})
	}
	return c
}

// addFolderFlags adds the flags of where a task runs: --workspace, or --repo and --base.
func addFolderFlags(c *cobra.Command, workspace, repo, base *string) {
	f := c.Flags()
	f.StringVar(workspace, "workspace", ".", "the folder the agent works in, on the worker's host: unmanaged (no isolation, checkpoint or move to another host)")
	f.StringVar(repo, "repo", "", "a git repository (URL, or path on the workers' hosts) the task works on in a worktree and branch of its own, checkpointed every turn; instead of --workspace")
	f.StringVar(base, "base", "", "with --repo: the branch, tag or commit the task starts from (default: the repository's default branch)")
	_ = c.MarkFlagDirname("workspace")
}

// startFolder is where a task runs: an unmanaged --workspace (made absolute) or a managed
// --repo, never both.
func startFolder(c *cobra.Command, workspace, repo string) (ws, rp string, err error) {
	switch {
	case repo != "" && c.Flags().Changed("workspace"):
		return "", "", inputError(&task.InvalidError{Field: "repo", Reason: "is given with --workspace; give one: --repo for a managed worktree of the repository, --workspace for a folder of your own"})
	case repo != "":
		if rp, err = repoArg(repo); err != nil {
			return "", "", fmt.Errorf("--repo: %w", err)
		}
		return "", rp, nil
	}
	if ws, err = filepath.Abs(workspace); err != nil {
		return "", "", fmt.Errorf("--workspace: %w", err)
	}
	return ws, "", nil
}

// repoArg is a repository as the workers' hosts reach it: a URL (scheme://… or the scp-like
// host:path) as given, a local path made absolute.
func repoArg(repo string) (string, error) {
	if strings.Contains(repo, "://") {
		return repo, nil
	}
	if colon := strings.Index(repo, ":"); colon > 0 && !strings.Contains(repo[:colon], "/") {
		return repo, nil
	}
	return filepath.Abs(repo)
}

// modesHelp lists the permission modes for --mode's help.
func modesHelp() string {
	var avail, later []string
	for _, m := range task.PermissionModes() {
		if m.Available() {
			avail = append(avail, string(m))
		} else {
			later = append(later, string(m))
		}
	}
	s := strings.Join(avail, ", ")
	if len(later) > 0 {
		s += " (" + strings.Join(later, " and ") + " are not available yet)"
	}
	return s
}

func completeModes(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, m := range task.AvailableModes() {
		out = append(out, string(m))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
