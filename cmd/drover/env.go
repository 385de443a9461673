package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/tools"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/worker"
	"github.com/drover-run/drover/workspace"
)

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/drover?sslmode=disable"

// env is drover's configuration from the environment. This file is the only
// place drover reads environment variables.
type env struct {
	databaseURL     string
	temporalAddress string
	namespace       string
	taskQueue       string
	hostID          string
	claudeBin       string
	temporalBin     string
	// temporalBinErr says why no temporal CLI was found, when temporalBin is empty.
	temporalBinErr  error
	claudeConfigDir string
	workspaceRoot   string
	// worktreeRoot, workspaceState and workspaceRemote configure managed workspaces (see
	// workspaceConfig); empty takes the defaults under drover's state folder.
	worktreeRoot    string
	workspaceState  string
	workspaceRemote string
	// viewDir is where the commands that read checkpoints keep their mirror of the remote.
	viewDir      string
	apiKey       string
	baseURL      string
	logLevel     string
	debugCapture bool
	// otlpTraces and otlpMetrics: an OTLP endpoint is configured for traces, for metrics.
	otlpTraces  bool
	otlpMetrics bool
	// metricsToken is the bearer token a scraper of the worker's metrics presents.
	metricsToken string
	// environ is the whole environment, which the CLI inherits (minus drover's own settings).
	environ []string
	// self is this program's executable, which guards the CLI processes it starts.
	self string
	// home is the user's home folder, where the CLI keeps its state by default.
	home string
	// apiTokens are the bearer tokens drover serve accepts (DROVER_API_TOKENS, comma-separated,
	// and DROVER_API_TOKEN_FILE, one a line), each name:token or a bare token (api.SplitToken);
	// apiTokensErr says why the file could not be read.
	apiTokens    []string
	apiTokensErr error
}

func loadEnv() env {
	e := env{
		databaseURL:     getenv("DROVER_DATABASE_URL", defaultDatabaseURL),
		temporalAddress: getenv("TEMPORAL_ADDRESS", worker.DefaultTemporalAddress),
		namespace:       getenv("TEMPORAL_NAMESPACE", worker.DefaultNamespace),
		taskQueue:       getenv("DROVER_TASK_QUEUE", task.SharedQueue),
		hostID:          os.Getenv("DROVER_HOST_ID"),
		claudeBin:       os.Getenv("DROVER_CLAUDE_BIN"),
		temporalBin:     os.Getenv("DROVER_TEMPORAL_BIN"),
		claudeConfigDir: os.Getenv("DROVER_CLAUDE_CONFIG_DIR"),
		workspaceRoot:   os.Getenv("DROVER_WORKSPACE_ROOT"),
		worktreeRoot:    os.Getenv("DROVER_WORKTREE_ROOT"),
		workspaceState:  os.Getenv("DROVER_WORKSPACE_STATE"),
		workspaceRemote: os.Getenv("DROVER_WORKSPACE_REMOTE"),
		apiKey:          os.Getenv("ANTHROPIC_API_KEY"),
		baseURL:         os.Getenv("ANTHROPIC_BASE_URL"),
		logLevel:        getenv("DROVER_LOG_LEVEL", "info"),
		debugCapture:    os.Getenv("DROVER_DEBUG_AGENT_MESSAGES") == "true",
		otlpTraces:      os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "",
		otlpMetrics:     os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "",
		metricsToken:    os.Getenv("DROVER_METRICS_TOKEN"),
		environ:         os.Environ(),
	}
	e.apiTokens, e.apiTokensErr = readAPITokens(os.Getenv("DROVER_API_TOKENS"), os.Getenv("DROVER_API_TOKEN_FILE"))
	if home, err := os.UserHomeDir(); err == nil {
		e.home = home
	}
	if cache, err := os.UserCacheDir(); err == nil {
		e.viewDir = filepath.Join(cache, "drover", "workspace-view")
	}
	if e.temporalBin == "" {
		e.temporalBin, e.temporalBinErr = tools.Env(os.Getenv).TemporalBin()
	}
	if self, err := os.Executable(); err == nil {
		e.self = self
	}
	if e.claudeBin == "" {
		if p, err := tools.Env(os.Getenv).ClaudeBin(); err == nil {
			e.claudeBin = p
		} else if p, err := exec.LookPath("claude"); err == nil {
			e.claudeBin = p
		}
	}
	return e
}

// readAPITokens gathers the API's tokens from a comma-separated list and a file of one token a
// line (blank lines and lines starting with # skipped). The error never holds a token.
func readAPITokens(list, file string) ([]string, error) {
	var out []string
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if file == "" {
		return out, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading DROVER_API_TOKEN_FILE: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, nil
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// workerConfig is the worker configuration the environment describes.
func (e env) workerConfig() worker.Config {
	cfg := worker.Config{
		TemporalAddress: e.temporalAddress,
		Namespace:       e.namespace,
		TaskQueue:       e.taskQueue,
		DatabaseURL:     e.databaseURL,
		MetricsToken:    e.metricsToken,
		Config: engine.Config{
			HostID:        e.hostID,
			WorkspaceRoot: e.workspaceRoot,
			Claude: engine.Claude{
				Bin:       e.claudeBin,
				ConfigDir: e.configDir(),
				APIKey:    e.apiKey,
				BaseURL:   e.baseURL,
				Env:       e.environ,
			},
		},
	}
	cfg.Workspaces = e.workspaceConfig(e.stateDir())
	if e.self != "" {
		cfg.Claude.Guard = []string{e.self, guardCommand}
	}
	if e.debugCapture {
		cfg.DebugDir = "."
	}
	return cfg
}

// stateDir is drover's own state folder on a worker host: ~/.drover ("" without a home).
func (e env) stateDir() string {
	if e.home == "" {
		return ""
	}
	return filepath.Join(e.home, ".drover")
}

// workspaceConfig is the managed workspaces' configuration: what the environment sets, and
// otherwise the worktrees at <state>/worktrees and the mirrors and default remote at
// <state>/workspaces. Without any, the host manages none.
func (e env) workspaceConfig(state string) workspace.Config {
	c := workspace.Config{Root: e.worktreeRoot, StateDir: e.workspaceState, Remote: e.workspaceRemote}
	if c.Root == "" && state != "" {
		c.Root = filepath.Join(state, "worktrees")
	}
	if c.StateDir == "" && state != "" {
		c.StateDir = filepath.Join(state, "workspaces")
	}
	return c
}

// addWorkspaceFlags adds the flags of managed workspaces, their defaults taken from c (the
// environment's, see workspaceConfig).
func addWorkspaceFlags(f *pflag.FlagSet, c *workspace.Config, retention *time.Duration) {
	f.StringVar(&c.Root, "worktree-root", c.Root, "managed tasks' worktrees, at <root>/<task id>: keep it the same path on every host (DROVER_WORKTREE_ROOT)")
	f.StringVar(&c.StateDir, "workspace-state", c.StateDir, "this host's repository mirrors, and the default remote (DROVER_WORKSPACE_STATE)")
	f.StringVar(&c.Remote, "workspace-remote", c.Remote, "where checkpoints are pushed: a bare repository or git URL every host reaches (DROVER_WORKSPACE_REMOTE; default <workspace-state>/remote.git, this host's alone)")
	f.DurationVar(retention, "workspace-retention", 0, fmt.Sprintf("keep a task's checkpoints this long after its newest one (0: %s)", worker.DefaultWorkspaceRetention))
}

// absWorkspaces makes c's folders absolute, as package workspace wants them.
func absWorkspaces(c workspace.Config) (workspace.Config, error) {
	for _, p := range []*string{&c.Root, &c.StateDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return c, fmt.Errorf("managed workspaces: %w", err)
		}
		*p = abs
	}
	return c, nil
}

// configDir is where the CLI keeps its sessions: DROVER_CLAUDE_CONFIG_DIR, or the CLI's own
// default (~/.claude). drover must know it to keep the session mirror.
func (e env) configDir() string {
	if e.claudeConfigDir != "" || e.home == "" {
		return e.claudeConfigDir
	}
	return filepath.Join(e.home, ".claude")
}

// defaultWorkspaceRemoteHelp names the default remote in the flags' help.
const defaultWorkspaceRemoteHelp = "the workers' default, remote.git in DROVER_WORKSPACE_STATE (~/.drover/workspaces), this host's alone"

// defaultWorkspaceRemote is the remote a worker of this host pushes to when
// DROVER_WORKSPACE_REMOTE is unset: its workspace state folder's ("" without a home).
func (e env) defaultWorkspaceRemote() string {
	c := e.workspaceConfig(e.stateDir())
	if c.Remote != "" || c.StateDir == "" {
		return c.Remote
	}
	return workspace.DefaultRemote(c.StateDir)
}
