package engine

import (
	"context"
	"strings"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/task"
)

// Process is a running CLI as the engine drives it. *claudecode.Process satisfies it; tests
// give a scripted one.
type Process interface {
	// Client is the stream-json client of the process.
	Client() *claudecode.Client
	// Recv returns the next message; at the end of the output, the process's exit error (see
	// claudecode.Process.Recv).
	Recv(ctx context.Context) (claudecode.Message, error)
	// Pid is the process id recorded in the executor row.
	Pid() int
	// Exited is closed once the process has exited and its output is drained.
	Exited() <-chan struct{}
	// Stop ends the process, bounded, and returns how it ended.
	Stop(ctx context.Context) error
}

// Launcher starts CLI processes.
type Launcher interface {
	// Launch starts cmd. The process must outlive ctx: the engine stops it.
	Launch(ctx context.Context, cmd claudecode.Command, cfg claudecode.ProcessConfig) (Process, error)
}

// execLauncher runs the real CLI, under a guard when one is configured.
type execLauncher struct{ guard []string }

func (l execLauncher) Launch(ctx context.Context, c claudecode.Command, cfg claudecode.ProcessConfig) (Process, error) {
	c.Guard = l.guard
	cmd, err := c.Build(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	return claudecode.Start(context.WithoutCancel(ctx), cmd, cfg)
}

// command builds the CLI invocation for a turn of a task with this profile.
func (e *Engine) command(p task.Profile, workspace string) claudecode.Command {
	c := claudecode.Command{
		Path:                   e.cfg.Claude.Bin,
		Dir:                    workspace,
		Model:                  p.Model,
		IncludePartialMessages: !e.cfg.Claude.BlockMessages,
		MaxTurns:               p.MaxTurns,
		AppendSystemPrompt:     p.AppendSystemPrompt,
		APIKey:                 e.cfg.Claude.APIKey,
		BaseURL:                e.cfg.Claude.BaseURL,
		ConfigDir:              e.cfg.Claude.ConfigDir,
		Env:                    e.childEnv(),
		TagPrefix:              e.cfg.HostID,
	}
	if len(p.MCPServers) > 0 {
		c.MCPServers = make(map[string]claudecode.MCPServer, len(p.MCPServers))
		for name, s := range p.MCPServers {
			c.MCPServers[name] = claudecode.MCPServer{Command: s.Command, Args: s.Args, Env: s.Env, Type: s.Type, URL: s.URL, Headers: s.Headers}
		}
	}
	if supervisable(p.PermissionMode) {
		// Every mode from one launch (docs/cli-behaviour.md, Permissions): bypass, with
		// permission prompts and drover's hooks coming to drover, which answers as the task's
		// mode says; plan mode is the CLI's own, entered with set_permission_mode.
		c.PermissionMode = claudecode.PermissionBypass
		c.PermissionPromptToolStdio = true
	} else {
		c.DangerouslySkipPermissions = true
	}
	if c.APIKey != "" && !setsEnv(c.Env, "CLAUDE_CODE_RETRY_WATCHDOG") {
		// An API key's 429 with a retry-after beyond the CLI's 60 s is announced too (see
		// watchdogEnv); a subscription's usage limits keep their own reports.
		c.Env = append(c.Env, watchdogEnv...)
	}
	return c
}

// setsEnv reports whether env (KEY=VALUE) sets name.
func setsEnv(env []string, name string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

// supervisable reports whether a task in mode m needs a process that brings permission
// requests to drover. An autonomous task runs without: its tools need nobody's leave.
func supervisable(m task.PermissionMode) bool {
	return m == task.Supervised || m == task.Plan
}

// initializeRequest registers drover's hooks on a process that brings permission requests to
// drover: a PreToolUse hook on every tool that is not read-only, and a bounded Stop hook.
func initializeRequest(hooked bool) claudecode.InitializeRequest {
	if !hooked {
		return claudecode.InitializeRequest{}
	}
	hooks := claudecode.SupervisedHooks(hookToolApproval, hookStopCheck)
	for i := range hooks[claudecode.HookStop] {
		hooks[claudecode.HookStop][i].Timeout = stopHookTimeout.Seconds()
	}
	return claudecode.InitializeRequest{Hooks: hooks}
}

// cliPermissionMode is the CLI's permission mode for a task in mode m, on a process that
// brings permission requests to drover.
func cliPermissionMode(m task.PermissionMode) string {
	if m == task.Plan {
		return claudecode.PermissionPlan
	}
	return claudecode.PermissionBypass
}

// childEnv is the CLI's environment: Claude.Env minus what the engine sets itself (the API
// address and credentials, the config folder, drover's own settings), plus HOME when
// configured.
func (e *Engine) childEnv() []string {
	env := make([]string, 0, len(e.cfg.Claude.Env)+1)
	for _, kv := range e.cfg.Claude.Env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ANTHROPIC_") || k == "CLAUDE_CONFIG_DIR" || strings.HasPrefix(k, "DROVER_") {
			continue
		}
		if k == "HOME" && e.cfg.Claude.Home != "" {
			continue
		}
		env = append(env, kv)
	}
	if e.cfg.Claude.Home != "" {
		env = append(env, "HOME="+e.cfg.Claude.Home)
	}
	return env
}
