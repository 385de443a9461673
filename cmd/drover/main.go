// Command drover runs Claude Code sessions as durable Temporal tasks.
//
//	drover dev                 Temporal dev server + migrations + a worker (local defaults)
//	drover demo                one task end to end, offline, then exit
//	drover worker              a worker host
//	drover migrate             apply database migrations
//	drover serve               the HTTP API (and the web console) on 127.0.0.1:8090
//	drover task ...            start, prompt, interrupt, close, cancel, list, show, watch
//	drover normalize [FILE]    stream-json transcript → normalized events (JSONL)
//	drover completion SHELL    shell completion for bash, zsh, fish or powershell
//
// Every command takes --help (or -h), and "drover help COMMAND …" prints the
// same. Addresses and credentials come from the environment (see envHelp),
// read in env.go only.
//
// The command tree is built with github.com/spf13/cobra, the library behind
// the Temporal CLI, gh and kubectl: it accepts flags before or after positional
// arguments, gives every subcommand its own help, and generates shell
// completion, so drover behaves like the tools its users already know.
//
// Each command lives in its own small file as a constructor taking *app; a
// new task subcommand is one such file plus one line in newTaskCommand.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/worker"
)

var envHelp = fmt.Sprintf(`
Environment:
  DROVER_DATABASE_URL      Postgres (default %s)
  TEMPORAL_ADDRESS         Temporal frontend (default %s)
  TEMPORAL_NAMESPACE       Temporal namespace (default %q)
  DROVER_TASK_QUEUE        the shared task queue (default %q)
  DROVER_HOST_ID           this worker host's stable identity (default: the host name)
  DROVER_CLAUDE_BIN        the claude binary (default: the one scripts/tools.sh installs, else PATH)
  DROVER_CLAUDE_CONFIG_DIR where the CLI keeps its sessions (default ~/.claude; must survive restarts)
  DROVER_TEMPORAL_BIN      the temporal CLI that dev and demo run (default: the one scripts/tools.sh installs)
  DROVER_WORKSPACE_ROOT    confine unmanaged task workspaces (--workspace) to this folder
  DROVER_WORKTREE_ROOT     managed tasks' worktrees (default ~/.drover/worktrees; the same path on every host)
  DROVER_WORKSPACE_STATE   repository mirrors of managed tasks (default ~/.drover/workspaces)
  DROVER_WORKSPACE_REMOTE  where managed tasks' checkpoints are pushed, reached by every host (default a bare repository in DROVER_WORKSPACE_STATE); task diff, close --push-to and serve read it
  ANTHROPIC_API_KEY        the key the CLI uses (never logged)
  ANTHROPIC_BASE_URL       another Messages API address
  OTEL_EXPORTER_OTLP_ENDPOINT  export traces and metrics over OTLP/gRPC
  DROVER_METRICS_TOKEN     the bearer token a scraper of the worker's metrics presents (required beyond loopback)
  DROVER_API_TOKENS        bearer tokens drover serve accepts, comma-separated, each NAME:TOKEN
                           (the name records who did what) or a bare TOKEN (required beyond loopback)
  DROVER_API_TOKEN_FILE    a file of such tokens, one a line
  DROVER_LOG_LEVEL         debug, info (default), warn, error
  DROVER_DEBUG_AGENT_MESSAGES=true  capture raw and normalized JSONL of every CLI run
`, defaultDatabaseURL, worker.DefaultTemporalAddress, worker.DefaultNamespace, task.SharedQueue)

// usageTemplate is cobra's default usage text, with the environment appended
// and without a "[flags]" line for commands that only group subcommands.
var usageTemplate = `Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Run "{{.CommandPath}} COMMAND --help" for a command's flags.{{end}}
` + envHelp

func init() {
	// Commands are listed in the order they are added, most used first.
	cobra.EnableCommandSorting = false
}

// guardCommand is the hidden first argument that makes this program the guard of one CLI
// process (see claudecode.RunGuard): drover __guard --tag=TAG -- CLAUDE ARGS...
const guardCommand = "__guard"

func main() {
	if len(os.Args) > 1 && os.Args[1] == guardCommand {
		os.Exit(claudecode.RunGuard(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drover:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "Run \"%s --help\" for usage.\n", ue.command)
		}
		stop()
		os.Exit(1)
	}
}

// app is what every command shares: the configuration from the environment,
// the logger and the standard streams.
type app struct {
	env    env
	log    *slog.Logger
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// run runs the drover command line args with the given streams. A --help
// prints the help on stdout and returns nil.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCommand(stdin, stdout, stderr)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return errors.New("no command given")
	}
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	var ii *invalidInput
	if errors.As(err, &ii) {
		// Name the command: its flags are what the message talks about.
		return &usageError{command: c.CommandPath(), err: err}
	}
	var ue *usageError
	if err == nil || errors.As(err, &ue) {
		return err
	}
	// What a person reads is the message; a program reading -o json gets the code too.
	d := taskerr.Describe(err)
	if wantsJSON(c) {
		_ = writeJSON(stdout, struct {
			Error *taskerr.Error `json:"error"`
		}{d})
	}
	return d
}

// wantsJSON reports whether c was asked for JSON output.
func wantsJSON(c *cobra.Command) bool {
	if c == nil {
		return false
	}
	if f := c.Flags().Lookup("output"); f != nil && f.Value.String() == string(outputJSON) {
		return true
	}
	f := c.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// newRootCommand builds the command tree; run executes it.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	e := loadEnv()
	a := &app{env: e, log: newLogger(stderr, e.logLevel), stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "drover",
		Short: "Run Claude Code sessions as durable Temporal tasks",
		Long: `drover runs Claude Code sessions as durable Temporal tasks: each task is a
workflow, each turn (one prompt, one result) drives the claude CLI, and a
failed turn is retried by itself from its last committed message.`,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{command: c.CommandPath(), err: err}
	})
	root.AddCommand(
		newDevCommand(a),
		newDemoCommand(a),
		newWorkerCommand(a),
		newServeCommand(a),
		newMigrateCommand(a),
		newTaskCommand(a),
		newAccountCommand(a),
		newNormalizeCommand(a),
	)
	return root
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// usageError is a command line that does not fit its command's usage: an
// unknown flag, a missing argument.
type usageError struct {
	command string
	err     error
}

func (e *usageError) Error() string {
	// main prints "drover:" before every error already.
	if _, sub, ok := strings.Cut(e.command, " "); ok {
		return sub + ": " + e.err.Error()
	}
	return e.err.Error()
}
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(c *cobra.Command, format string, args ...any) error {
	return &usageError{command: c.CommandPath(), err: fmt.Errorf(format, args...)}
}

// noArgs is the Args check of a command that takes no arguments.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf(c, "takes no arguments, got %q", args)
	}
	return nil
}

// argsBetween checks that a command got min to max arguments; what names
// them in the error, as the usage line does.
func argsBetween(min, max int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usageErrorf(c, "want %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}
