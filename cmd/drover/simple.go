package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/telemetry"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/worker"
)

func cmdMigrate(ctx context.Context, args []string, e env, log *slog.Logger, stderr io.Writer) error {
	fs := newFlags("migrate", "drover migrate", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := store.EnsureDatabase(ctx, e.databaseURL); err != nil {
		return err
	}
	pool, err := store.Connect(ctx, e.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := store.Migrate(ctx, pool, log)
	if err != nil {
		return err
	}
	log.Info("migrations applied", "versions", applied)
	return nil
}

func cmdWorker(ctx context.Context, args []string, e env, log *slog.Logger, stderr io.Writer) error {
	fs := newFlags("worker", "drover worker [flags]", stderr)
	cfg := e.workerConfig()
	fs.StringVar(&cfg.HostID, "host-id", cfg.HostID, "this worker host's stable identity (DROVER_HOST_ID)")
	fs.DurationVar(&cfg.KeepAlive, "keep-alive", 0, fmt.Sprintf("how long a task's CLI waits for its next turn (0: %s; negative: stop after each turn)", engine.DefaultKeepAlive))
	fs.IntVar(&cfg.MaxIdle, "max-idle", 0, fmt.Sprintf("CLI processes kept waiting for a next turn; the longest idle beyond it stop (0: %d)", engine.DefaultMaxIdle))
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", 0, fmt.Sprintf("stop and retry a turn whose CLI prints nothing for this long (0: %s)", engine.DefaultStallTimeout))
	fs.IntVar(&cfg.MaxConcurrentTurns, "max-turns", 0, fmt.Sprintf("turns this host runs at once (0: %d)", worker.DefaultMaxConcurrentTurns))
	if err := fs.Parse(args); err != nil {
		return err
	}
	shutdown, err := telemetry.Setup(ctx, "drover-worker", version)
	if err != nil {
		return err
	}
	defer shutdown(context.WithoutCancel(ctx))
	if err := store.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	cfg.Logger = log
	return worker.Run(ctx, cfg)
}

func cmdNormalize(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("normalize", "drover normalize [FILE]   (reads stdin without FILE or with -)", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	in := stdin
	if fs.NArg() > 1 {
		return fmt.Errorf("normalize: want at most one FILE")
	}
	if name := fs.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("normalize: %w", err)
		}
		defer f.Close()
		in = f
	}
	return streamjson.Normalize(in, stdout)
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"
