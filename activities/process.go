package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// processSpec is everything needed to start the CLI for a task.
type processSpec struct {
	cmd               claudecode.Command
	sessionID         string // the session the process will serve
	resumeSessionID   string // set when it resumes an existing session
	resumeAt          string
	priorTotalCostUSD float64
	handler           claudecode.Handler
	debug             *streamjson.DebugCapture
	stopTimeout       time.Duration
	backgroundWait    time.Duration
}

// executorFor returns a process for the task standing exactly at the resume
// point: the kept one when it qualifies, else a fresh one started with
// --resume/--resume-session-at (or a new session).
func (a *Activities) executorFor(ctx context.Context, in task.RunTurnInput, workspace, sessionID, resumeAt string, log *slog.Logger) (*executor, error) {
	if ex := a.execs.get(in.TaskID); ex != nil {
		if ex.reusableAt(sessionID, resumeAt) {
			log.Debug("reusing the running claude process", "pid", ex.pid())
			return ex, nil
		}
		a.dropExecutor(ctx, ex, "not at the committed resume point")
	}

	spec := processSpec{stopTimeout: a.cfg.StopTimeout, backgroundWait: a.cfg.BackgroundWait}
	spec.cmd = a.command(in, workspace)
	if sessionID != "" && resumeAt != "" {
		spec.cmd.Resume = sessionID
		spec.cmd.ResumeSessionAt = resumeAt
		spec.sessionID, spec.resumeSessionID, spec.resumeAt = sessionID, sessionID, resumeAt
		totals, err := store.TaskTotals(ctx, a.cfg.DB, in.TaskID)
		if err != nil {
			return nil, fmt.Errorf("reading the task's totals: %w", err)
		}
		// The CLI's running cost continues across --resume from what the
		// session cost so far; the adapter subtracts it to get this turn's.
		spec.priorTotalCostUSD = totals.CostUSD
	} else {
		spec.sessionID = uuid.NewString()
		spec.cmd.SessionID = spec.sessionID
	}
	if a.cfg.DebugDir != "" && streamjson.DebugEnabled() {
		d, err := streamjson.OpenDebugCapture(streamjson.DebugConfig{Dir: a.cfg.DebugDir, AgentID: in.TaskID, Secrets: []string{a.cfg.Claude.APIKey}})
		if err != nil {
			log.Warn("debug capture unavailable", "error", err)
		} else {
			spec.debug = d
		}
	}

	ex, err := startExecutor(ctx, in.TaskID, spec, log)
	if err != nil {
		return nil, retryable(task.ErrTypeCLI, err)
	}
	if err := ex.initialize(ctx, initializeRequest(in.Profile)); err != nil {
		ex.stop(ctx, "initialize failed")
		<-ex.exited
		if cerr := classifyExit(ex.exitErr); isResumeRejected(ex.exitErr) {
			return nil, cerr
		}
		return nil, retryable(task.ErrTypeCLI, fmt.Errorf("%w%s", err, stderrTail(ex.exitErr)))
	}
	if old := a.execs.put(ex); old != nil {
		old.stop(ctx, "replaced")
	}
	log.Info("claude started", "pid", ex.pid(), "session_id", spec.sessionID, "resume_at", spec.resumeAt)
	return ex, nil
}

// command builds the CLI invocation for a task's profile.
func (a *Activities) command(in task.RunTurnInput, workspace string) claudecode.Command {
	c := claudecode.Command{
		Path:                   a.cfg.Claude.Bin,
		Dir:                    workspace,
		Model:                  in.Profile.Model,
		IncludePartialMessages: a.cfg.Claude.PartialMessages,
		MaxTurns:               in.Profile.MaxTurns,
		AppendSystemPrompt:     in.Profile.AppendSystemPrompt,
		APIKey:                 a.cfg.Claude.APIKey,
		BaseURL:                a.cfg.Claude.BaseURL,
		Env:                    a.childEnv(),
	}
	if len(in.Profile.MCPServers) > 0 {
		c.MCPServers = make(map[string]claudecode.MCPServer, len(in.Profile.MCPServers))
		for name, s := range in.Profile.MCPServers {
			c.MCPServers[name] = claudecode.MCPServer{Command: s.Command, Args: s.Args, Env: s.Env, Type: s.Type, URL: s.URL, Headers: s.Headers}
		}
	}
	// Autonomous is the one mode that runs here (validateInput refuses the
	// others until human approval is wired through the workflow).
	c.DangerouslySkipPermissions = true
	return c
}

// childEnv is the CLI's environment: the worker's, minus what drover sets
// itself (the API address and credentials, the config folder) and its own
// settings, plus the configured values. CLI knobs such as
// CLAUDE_CODE_MAX_RETRIES set on the worker reach the CLI.
func (a *Activities) childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ANTHROPIC_") || k == "CLAUDE_CONFIG_DIR" || strings.HasPrefix(k, "DROVER_") {
			continue
		}
		if k == "HOME" && a.cfg.Claude.Home != "" {
			continue
		}
		env = append(env, kv)
	}
	if a.cfg.Claude.Home != "" {
		env = append(env, "HOME="+a.cfg.Claude.Home)
	}
	if a.cfg.Claude.ConfigDir != "" {
		env = append(env, "CLAUDE_CONFIG_DIR="+a.cfg.Claude.ConfigDir)
	}
	return append(env, a.cfg.Claude.Env...)
}

func initializeRequest(p task.Profile) claudecode.InitializeRequest {
	return claudecode.InitializeRequest{}
}

// dropExecutor stops ex and forgets it.
func (a *Activities) dropExecutor(ctx context.Context, ex *executor, reason string) {
	a.execs.removeIf(ex)
	ex.stop(ctx, reason)
}

// keepOrStop keeps a process that finished its turn for the next one, or
// stops it when processes are not kept.
func (a *Activities) keepOrStop(ctx context.Context, ex *executor) {
	if a.cfg.KeepAlive < 0 {
		a.dropExecutor(ctx, ex, "not kept between turns")
		return
	}
	ex.idleFor(a.cfg.KeepAlive, func() {
		if a.execs.removeIf(ex) {
			ex.stop(context.Background(), "idle")
		}
	})
	a.evictIdle(ctx)
}

// evictIdle stops the processes idle the longest while more than MaxIdle
// wait for a next turn: each holds a couple of hundred MB.
func (a *Activities) evictIdle(ctx context.Context) {
	type idle struct {
		ex    *executor
		since time.Time
	}
	var idles []idle
	for _, ex := range a.execs.all() {
		if since, ok := ex.idleSince(); ok {
			idles = append(idles, idle{ex, since})
		}
	}
	if len(idles) <= a.cfg.MaxIdle {
		return
	}
	slices.SortFunc(idles, func(x, y idle) int { return x.since.Compare(y.since) })
	for _, i := range idles[:len(idles)-a.cfg.MaxIdle] {
		if a.execs.removeIf(i.ex) {
			go i.ex.stop(context.WithoutCancel(ctx), "too many idle processes")
		}
	}
}

func (a *Activities) markFailed(ctx context.Context, taskID, execID string, cause error) {
	ctx = context.WithoutCancel(ctx)
	if err := store.MarkExecutor(ctx, a.cfg.DB, taskID, execID, store.ExecutorFailed, cause.Error(), true); err != nil {
		a.cfg.Logger.Warn("recording the failed attempt", "task_id", taskID, "error", err)
	}
}

func (a *Activities) markStopped(ctx context.Context, taskID, execID string, cause error) {
	ctx = context.WithoutCancel(ctx)
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	if err := store.MarkExecutor(ctx, a.cfg.DB, taskID, execID, store.ExecutorStopped, msg, true); err != nil {
		a.cfg.Logger.Warn("recording the stopped attempt", "task_id", taskID, "error", err)
	}
}

// classifyExit turns the way the CLI ended into an activity error.
func classifyExit(err error) error {
	if isResumeRejected(err) {
		return nonRetryable(task.ErrTypeResumeRejected, fmt.Errorf("claude rejected the resume point: %w", err))
	}
	if err == nil {
		err = errors.New("claude exited before the turn ended")
	}
	return retryable(task.ErrTypeCLI, fmt.Errorf("claude exited before the turn ended: %w", err))
}

func isResumeRejected(err error) bool {
	var rr *claudecode.ResumeRejectedError
	return errors.As(err, &rr)
}

func stderrTail(err error) string {
	var ee *claudecode.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "; stderr: " + strings.Join(ee.Stderr, " | ")
	}
	return ""
}

func (ex *executor) currentSession() string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.sessionID
}
