package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/telemetry"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/worker"
)

func newMigrateCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			if err := store.EnsureDatabase(ctx, a.env.databaseURL); err != nil {
				return err
			}
			pool, err := store.Connect(ctx, a.env.databaseURL)
			if err != nil {
				return err
			}
			defer pool.Close()
			applied, err := store.Migrate(ctx, pool, a.log)
			if err != nil {
				return err
			}
			a.log.Info("migrations applied", "versions", applied)
			return nil
		},
	}
}

func newWorkerCommand(a *app) *cobra.Command {
	cfg := a.env.workerConfig()
	c := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker host",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			tel, err := telemetry.Setup(ctx, telemetry.Config{Service: "drover-worker", Version: version, Instance: cfg.HostID,
				Traces: a.env.otlpTraces, Metrics: a.env.otlpMetrics, Prometheus: cfg.MetricsListen != "", Logger: a.log})
			if err != nil {
				return err
			}
			defer tel.Shutdown(context.WithoutCancel(ctx))
			cfg.MetricsHandler = tel.MetricsHandler
			if err := store.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
				return err
			}
			cfg.Logger = a.log
			if cfg.Workspaces, err = absWorkspaces(cfg.Workspaces); err != nil {
				return err
			}
			return worker.Run(ctx, cfg)
		},
	}
	// Zero means the package default for each, named in the help from where it is defined.
	f := c.Flags()
	f.StringVar(&cfg.HostID, "host-id", cfg.HostID, "this worker host's stable identity (DROVER_HOST_ID)")
	f.DurationVar(&cfg.KeepAlive, "keep-alive", 0, fmt.Sprintf("how long a task's CLI waits for its next turn (0: %s; negative: stop after each turn)", engine.DefaultKeepAlive))
	f.DurationVar(&cfg.PauseIdle, "pause-idle", 0, fmt.Sprintf("pause a CLI that has waited this long for its next turn, so that it burns no CPU until that turn (0: %s; negative: never)", engine.DefaultPauseIdle))
	f.IntVar(&cfg.MaxIdle, "max-idle", 0, fmt.Sprintf("CLI processes kept waiting for a next turn; the longest idle beyond it stop (0: %d)", engine.DefaultMaxIdle))
	f.DurationVar(&cfg.StallTimeout, "stall-timeout", 0, fmt.Sprintf("stop and retry a turn whose CLI prints nothing for this long (0: %s)", engine.DefaultStallTimeout))
	f.IntVar(&cfg.MaxConcurrentTurns, "max-concurrent-turns", 0, fmt.Sprintf("turns this host runs at once (0: %d)", worker.DefaultMaxConcurrentTurns))
	f.IntVar(&cfg.MaxConcurrentTurns, "max-turns", 0, "turns this host runs at once")
	_ = f.MarkDeprecated("max-turns", "use --max-concurrent-turns")
	f.IntVar(&cfg.AccountMaxConcurrentTurns, "account-max-concurrent-turns", 0, "turns running at once on this host's account, over every host that shares it; the others queue (0: no bound)")
	f.DurationVar(&cfg.LimitRecheckFirst, "limit-recheck-first", 0, fmt.Sprintf("after a look past a limit's announced reset found it still held, wait this long before the next; each next wait doubles (0: %s)", engine.DefaultLimitRecheckFirst))
	f.DurationVar(&cfg.LimitRecheck, "limit-recheck", 0, fmt.Sprintf("the longest wait between two looks at a limit held past its announced reset (0: %s)", engine.DefaultLimitRecheck))
	f.StringVar(&cfg.MetricsListen, "metrics-listen", worker.DefaultMetricsListen, "serve Prometheus metrics at http://ADDRESS/metrics (empty: none); beyond loopback it needs DROVER_METRICS_TOKEN")
	f.StringVar(&cfg.PprofListen, "pprof-listen", "", "serve Go's runtime profiles at http://ADDRESS/debug/pprof/ (empty: none); beyond loopback it needs DROVER_METRICS_TOKEN")
	f.Float64Var(&cfg.DefaultBudget.MaxCostUSD, "default-budget-cost", 0, "bound what the API bills each task, failed attempts included, in US dollars, unless the task's budget sets it (0: none)")
	f.IntVar(&cfg.DefaultBudget.MaxTurns, "default-budget-turns", 0, "bound each task's turns, unless the task's budget sets it (0: none)")
	f.DurationVar(&cfg.DefaultBudget.MaxDuration, "default-budget-duration", 0, "bound the time each task's turns run, added up, unless the task's budget sets it (0: none)")
	f.StringVar(&cfg.ArchiveDir, "archive-dir", "", "archive finished tasks past their retention into this folder (one compressed file each) and delete them from Postgres (empty: keep them)")
	f.DurationVar(&cfg.Retention, "retention", 0, fmt.Sprintf("how long a finished task keeps its rows after its last activity, unless the task sets its own (0: %s)", task.DefaultRetention))
	f.DurationVar(&cfg.ArchiveInterval, "archive-interval", 0, fmt.Sprintf("time between two passes of the archive job (0: %s)", archive.DefaultInterval))
	addWorkspaceFlags(f, &cfg.Workspaces, &cfg.WorkspaceRetention)
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, fmt.Sprintf("on SIGTERM, how long running turns may finish before they are stopped and continue on another host (0: %s)", worker.DefaultDrainTimeout))
	return c
}

func newNormalizeCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "normalize [FILE]",
		Short: "Print the normalized events of a stream-json transcript",
		Long: `Print the normalized events of a stream-json transcript, one JSON object a
line. It reads standard input without FILE or with -.`,
		Args: argsBetween(0, 1, "at most one FILE"),
		RunE: func(_ *cobra.Command, args []string) error {
			var in io.Reader = a.stdin
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("normalize: %w", err)
				}
				defer f.Close()
				in = f
			}
			return streamjson.Normalize(in, a.stdout)
		},
	}
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"
