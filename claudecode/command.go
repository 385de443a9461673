package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Permission modes of the CLI (--permission-mode).
const (
	PermissionDefault     = "default"
	PermissionAcceptEdits = "acceptEdits"
	PermissionBypass      = "bypassPermissions"
	PermissionPlan        = "plan"
)

// Command describes one CLI invocation. It always runs
// `claude -p --output-format=stream-json --input-format=stream-json --verbose` plus the flags below.
// Arguments are passed as argv, never through a shell. Secrets belong in APIKey (passed in the
// environment), never in arguments.
type Command struct {
	// Path is the CLI executable. Required.
	Path string
	// Dir is the working directory; empty means the current one.
	Dir string
	// Model is passed as --model.
	Model string
	// PermissionMode is default, acceptEdits, bypassPermissions or plan; empty leaves the CLI's default.
	PermissionMode string
	// DangerouslySkipPermissions passes --dangerously-skip-permissions.
	DangerouslySkipPermissions bool
	// PermissionPromptToolStdio passes --permission-prompt-tool=stdio: permission prompts arrive as
	// can_use_tool control requests. Without it, prompts are denied in print mode.
	PermissionPromptToolStdio bool
	// IncludePartialMessages passes --include-partial-messages (stream_event lines, status frames).
	IncludePartialMessages bool
	// ReplayUserMessages passes --replay-user-messages (echo of our user messages and answers).
	ReplayUserMessages bool
	// ForwardSubagentText passes --forward-subagent-text.
	ForwardSubagentText bool
	// Resume is the session id to continue (--resume). The session keeps its id unless ForkSession.
	Resume string
	// ResumeSessionAt keeps the resumed transcript up to and including this assistant or user uuid
	// (--resume-session-at). Requires Resume.
	ResumeSessionAt string
	// SessionID fixes the id of a new session (--session-id). With Resume it requires ForkSession.
	SessionID string
	// ForkSession gives a resumed session a new id (--fork-session). Requires Resume.
	ForkSession bool
	// MaxTurns limits agentic turns per prompt (--max-turns); 0 means no limit.
	MaxTurns int
	// MCPServers are passed as --mcp-config '{"mcpServers":{…}}'.
	MCPServers map[string]MCPServer
	// StrictMCPConfig passes --strict-mcp-config: only MCPServers, no MCP servers from settings.
	StrictMCPConfig bool
	// AllowedTools and DisallowedTools are tool rules ("Bash(git log:*)", "Edit").
	AllowedTools    []string
	DisallowedTools []string
	// SystemPrompt replaces Claude Code's system prompt; AppendSystemPrompt adds to it.
	SystemPrompt       string
	AppendSystemPrompt string
	// ExtraArgs are appended verbatim after every other argument.
	ExtraArgs []string
	// Env is the base environment (KEY=VALUE); nothing else is inherited.
	Env []string
	// APIKey is set as ANTHROPIC_API_KEY. It never appears in arguments, String or LogValue.
	APIKey string
	// BaseURL is set as ANTHROPIC_BASE_URL.
	BaseURL string
	// ConfigDir is set as CLAUDE_CONFIG_DIR (where the CLI keeps session transcripts).
	ConfigDir string
	// WaitDelay is set on the exec.Cmd: how long Wait waits after a cancelled context killed the
	// process group before closing pipes. Defaults to 5s.
	WaitDelay time.Duration
	// TagPrefix names the owner of the process tree in its TagEnv tag (prefix/random), so that
	// the owner can find the trees it left behind with KillTaggedUnder. Defaults to "claude".
	TagPrefix string
	// Guard, when set, is a guard command (see RunGuard): the built command runs
	// Guard... --tag=TAG -- Path args..., and the guard runs the CLI as its child.
	Guard []string
	// MCPConfigFile, when set, is where Build writes the MCP configuration (mode 0600, in a
	// folder only the owner can enter) so that it reaches the CLI as a file path instead of
	// argv, where every process on the host could read it. The caller removes the file when
	// the process has stopped.
	MCPConfigFile string
}

// MCPServer is one MCP server. Stdio servers set Command (and Args, Env); remote servers set Type
// ("sse" or "http") and URL (and Headers).
type MCPServer struct {
	Type    string            `json:"type,omitempty"` // stdio (default when Command is set), sse, http
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

const defaultWaitDelay = 5 * time.Second

// validate checks the command before it is built.
func (c *Command) validate() error {
	if c.Path == "" {
		return errors.New("no CLI path")
	}
	switch c.PermissionMode {
	case "", PermissionDefault, PermissionAcceptEdits, PermissionBypass, PermissionPlan:
	default:
		return fmt.Errorf("unknown permission mode %q", c.PermissionMode)
	}
	if c.ResumeSessionAt != "" && c.Resume == "" {
		return errors.New("ResumeSessionAt requires Resume")
	}
	if c.ForkSession && c.Resume == "" {
		return errors.New("ForkSession requires Resume")
	}
	if c.SessionID != "" && c.Resume != "" && !c.ForkSession {
		return errors.New("SessionID with Resume requires ForkSession")
	}
	for name, v := range map[string]string{"Resume": c.Resume, "ResumeSessionAt": c.ResumeSessionAt, "SessionID": c.SessionID} {
		if v != "" && !IsUUID(v) {
			return fmt.Errorf("%s %q is not a UUID", name, v)
		}
	}
	if c.MaxTurns < 0 {
		return fmt.Errorf("negative MaxTurns %d", c.MaxTurns)
	}
	for name, s := range c.MCPServers {
		if name == "" {
			return errors.New("MCP server with an empty name")
		}
		switch s.Type {
		case "", "stdio":
			if s.Command == "" {
				return fmt.Errorf("MCP server %q: stdio server without Command", name)
			}
		case "sse", "http":
			if s.URL == "" {
				return fmt.Errorf("MCP server %q: %s server without URL", name, s.Type)
			}
		default:
			return fmt.Errorf("MCP server %q: unknown type %q", name, s.Type)
		}
	}
	for _, s := range append(c.allArgs(), c.Dir, c.Path, c.APIKey, c.BaseURL, c.ConfigDir) {
		if strings.IndexByte(s, 0) >= 0 {
			return errors.New("argument or setting contains a NUL byte")
		}
	}
	for _, kv := range c.Env {
		if strings.IndexByte(kv, 0) >= 0 {
			return errors.New("environment contains a NUL byte")
		}
	}
	return nil
}

// Args returns the CLI's arguments (without the program name). It does not validate; Build does.
func (c *Command) Args() []string { return c.allArgs() }

func (c *Command) allArgs() []string {
	a := []string{"-p", "--output-format=stream-json", "--input-format=stream-json", "--verbose"}
	if c.Model != "" {
		a = append(a, "--model="+c.Model)
	}
	if c.PermissionMode != "" {
		a = append(a, "--permission-mode="+c.PermissionMode)
	}
	if c.DangerouslySkipPermissions {
		a = append(a, "--dangerously-skip-permissions")
	}
	if c.PermissionPromptToolStdio {
		a = append(a, "--permission-prompt-tool=stdio")
	}
	if c.IncludePartialMessages {
		a = append(a, "--include-partial-messages")
	}
	if c.ReplayUserMessages {
		a = append(a, "--replay-user-messages")
	}
	if c.ForwardSubagentText {
		a = append(a, "--forward-subagent-text")
	}
	if c.Resume != "" {
		a = append(a, "--resume="+c.Resume)
	}
	if c.ResumeSessionAt != "" {
		a = append(a, "--resume-session-at="+c.ResumeSessionAt)
	}
	if c.SessionID != "" {
		a = append(a, "--session-id="+c.SessionID)
	}
	if c.ForkSession {
		a = append(a, "--fork-session")
	}
	if c.MaxTurns > 0 {
		a = append(a, "--max-turns="+strconv.Itoa(c.MaxTurns))
	}
	if len(c.MCPServers) > 0 {
		if c.MCPConfigFile != "" {
			a = append(a, "--mcp-config="+c.MCPConfigFile)
		} else {
			a = append(a, "--mcp-config="+string(c.mcpConfigJSON()))
		}
	}
	if c.StrictMCPConfig {
		a = append(a, "--strict-mcp-config")
	}
	for _, t := range c.AllowedTools {
		a = append(a, "--allowedTools="+t)
	}
	for _, t := range c.DisallowedTools {
		a = append(a, "--disallowedTools="+t)
	}
	if c.SystemPrompt != "" {
		a = append(a, "--system-prompt="+c.SystemPrompt)
	}
	if c.AppendSystemPrompt != "" {
		a = append(a, "--append-system-prompt="+c.AppendSystemPrompt)
	}
	return append(a, c.ExtraArgs...)
}

// mcpConfigJSON is the --mcp-config document.
func (c *Command) mcpConfigJSON() []byte {
	cfg, _ := json.Marshal(struct { // maps of strings always marshal
		MCPServers map[string]MCPServer `json:"mcpServers"`
	}{c.MCPServers})
	return cfg
}

// writeMCPConfig writes the MCP configuration to MCPConfigFile, readable by its owner only, in
// a folder no other user may enter.
func (c *Command) writeMCPConfig() error {
	dir := filepath.Dir(c.MCPConfigFile)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("MCP configuration folder: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("MCP configuration folder %s is open to other users (mode %v)", dir, st.Mode().Perm())
	}
	f, err := os.OpenFile(c.MCPConfigFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("writing the MCP configuration: %w", err)
	}
	if _, err := f.Write(c.mcpConfigJSON()); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing the MCP configuration: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the MCP configuration: %w", err)
	}
	return nil
}

// Environ returns the CLI's environment: Env with ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL and CLAUDE_CONFIG_DIR replaced when set, and IS_SANDBOX=1 when running as root
// with a bypass mode (the CLI refuses to start otherwise).
func (c *Command) Environ() []string {
	base := c.Env
	set := map[string]string{}
	if c.APIKey != "" {
		set["ANTHROPIC_API_KEY"] = c.APIKey
	}
	if c.BaseURL != "" {
		set["ANTHROPIC_BASE_URL"] = c.BaseURL
	}
	if c.ConfigDir != "" {
		set["CLAUDE_CONFIG_DIR"] = c.ConfigDir
	}
	if os.Geteuid() == 0 && (c.PermissionMode == PermissionBypass || c.DangerouslySkipPermissions) {
		set["IS_SANDBOX"] = "1"
	}
	env := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok && k != TagEnv {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR", "IS_SANDBOX"} {
		if v, ok := set[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Build validates the command and returns an exec.Cmd ready to start: in its own process group, with
// Cancel killing the whole group when ctx ends and WaitDelay set. Start it with Start (in this
// package) to get pipes, a client and a bounded Stop.
func (c *Command) Build(ctx context.Context) (*exec.Cmd, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("building claude command: %w", err)
	}
	if len(c.MCPServers) > 0 && c.MCPConfigFile != "" {
		if err := c.writeMCPConfig(); err != nil {
			return nil, fmt.Errorf("building claude command: %w", err)
		}
	}
	prefix := c.TagPrefix
	if prefix == "" {
		prefix = "claude"
	}
	tag := newTag(prefix)
	path, args := c.Path, c.allArgs()
	if len(c.Guard) > 0 {
		args = append(append(slices.Clone(c.Guard[1:]), "--tag="+tag, "--", path), args...)
		path = c.Guard[0]
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(c.Environ(), TagEnv+"="+tag)
	cmd.WaitDelay = c.WaitDelay
	prepareCmd(cmd)
	// The CLI (or its guard) dies with the host, even when the host is killed outright.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if len(c.Guard) > 0 {
		cmd.SysProcAttr.Pdeathsig = guardDeathSignal
	}
	cmd.Cancel = func() error { return killGroup(cmd, syscall.SIGKILL) }
	return cmd, nil
}

// prepareCmd puts cmd in its own process group and bounds Wait.
func prepareCmd(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = defaultWaitDelay
	}
}

// killGroup signals cmd's process group.
func killGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// String returns the command line for logs, with secrets redacted: MCP server environment values
// and headers, and any value of an environment variable whose name suggests a secret.
func (c *Command) String() string {
	var sb strings.Builder
	sb.WriteString(strconv.Quote(c.Path))
	for _, a := range c.redactedArgs() {
		sb.WriteByte(' ')
		sb.WriteString(strconv.Quote(a))
	}
	return sb.String()
}

// LogValue implements slog.LogValuer with the same redaction as String.
func (c *Command) LogValue() slog.Value {
	var envNames []string
	for _, kv := range c.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		envNames = append(envNames, k)
	}
	return slog.GroupValue(
		slog.String("path", c.Path),
		slog.String("dir", c.Dir),
		slog.Any("args", c.redactedArgs()),
		slog.Any("env_names", envNames),
	)
}

func (c *Command) redactedArgs() []string {
	r := *c
	if len(c.MCPServers) > 0 {
		r.MCPServers = make(map[string]MCPServer, len(c.MCPServers))
		for name, s := range c.MCPServers {
			s.Env = redactValues(s.Env)
			s.Headers = redactValues(s.Headers)
			r.MCPServers[name] = s
		}
	}
	return r.allArgs()
}

// Redacted stands in for a secret in logs.
const Redacted = "REDACTED"

func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = Redacted
	}
	return out
}

// secretEnvValues returns the values of variables in env that hold credentials, for redaction.
func secretEnvValues(env []string) []string {
	var vals []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < 8 {
			continue
		}
		u := strings.ToUpper(k)
		if strings.Contains(u, "KEY") || strings.Contains(u, "TOKEN") || strings.Contains(u, "SECRET") ||
			strings.Contains(u, "PASSWORD") {
			vals = append(vals, v)
		}
	}
	return vals
}
