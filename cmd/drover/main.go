// Command drover runs Claude Code sessions as durable Temporal tasks.
//
//	drover dev                 Temporal dev server + migrations + a worker (local defaults)
//	drover demo                one task end to end, offline, then exit
//	drover worker              a worker host
//	drover migrate             apply database migrations
//	drover task ...            start, prompt, interrupt, close, cancel, list, show, watch
//	drover normalize [FILE]    stream-json transcript → normalized events (JSONL)
//
// Every command takes --help. Addresses and credentials come from the
// environment (see envHelp).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-run/drover/claudecode"
)

const usage = `drover runs Claude Code sessions as durable Temporal tasks.

Usage:
  drover dev [flags]             Temporal dev server, migrations and a worker, until Ctrl-C
  drover demo [flags]            run one task end to end offline (fake Messages API) and exit
  drover worker [flags]          run a worker host
  drover migrate                 apply database migrations
  drover task start [flags] PROMPT
  drover task prompt TASK PROMPT
  drover task interrupt TASK
  drover task close TASK
  drover task cancel TASK
  drover task list [--query Q]
  drover task show TASK
  drover task watch TASK [--after SEQ] [--follow=false] [--json]
  drover normalize [FILE]        print the normalized events of a stream-json transcript

Run "drover COMMAND --help" for a command's flags.
` + envHelp

const envHelp = `
Environment:
  DROVER_DATABASE_URL      Postgres (default postgres://postgres@127.0.0.1:5432/drover?sslmode=disable)
  TEMPORAL_ADDRESS         Temporal frontend (default 127.0.0.1:7233)
  TEMPORAL_NAMESPACE       Temporal namespace (default "default")
  DROVER_TASK_QUEUE        the shared task queue (default "drover")
  DROVER_HOST_ID           this worker host's stable identity (default: the host name)
  DROVER_CLAUDE_BIN        the claude binary (default: the one scripts/tools.sh installs, else PATH)
  DROVER_CLAUDE_CONFIG_DIR where the CLI keeps session transcripts (must survive restarts)
  DROVER_WORKSPACE_ROOT    confine task workspaces to this folder
  ANTHROPIC_API_KEY        the key the CLI uses (never logged)
  ANTHROPIC_BASE_URL       another Messages API address
  OTEL_EXPORTER_OTLP_ENDPOINT  export traces over OTLP/gRPC
  DROVER_LOG_LEVEL         debug, info (default), warn, error
  DROVER_DEBUG_AGENT_MESSAGES=true  capture raw and normalized JSONL of every CLI run
`

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
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "drover:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	env := loadEnv()
	log := newLogger(stderr, env.logLevel)
	switch args[0] {
	case "dev":
		return cmdDev(ctx, args[1:], env, log, stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], env, log, stdout, stderr)
	case "worker":
		return cmdWorker(ctx, args[1:], env, log, stderr)
	case "migrate":
		return cmdMigrate(ctx, args[1:], env, log, stderr)
	case "task":
		return cmdTask(ctx, args[1:], env, log, stdout, stderr)
	case "normalize":
		return cmdNormalize(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// newFlags makes a flag set whose --help prints the command's usage line,
// its flags and the environment it reads.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		fmt.Fprint(stderr, envHelp)
	}
	return fs
}
