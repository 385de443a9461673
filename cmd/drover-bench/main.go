// Command drover-bench measures drover's performance figures, each as a ratio to a baseline run on
// the same machine in the same run, prints them as one table, writes the table as JSON, and exits
// non-zero when a figure misses its goal. `make bench` runs it; `make bench BENCH_QUICK=1` runs it
// on small inputs to check that it works.
//
//	drover-bench [-quick] [-runs N] [-only P1,…] [-out bench-results.json] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/drover-run/drover/internal/bench"
)

// figures lists every figure of the table, in order. Each one builds what it needs; the stack
// figures run their benchmarks through stack.
func figures(stack *stackRunner) []bench.Figure {
	all := []bench.Figure{
		p1(), p2(stack), p2CLI(stack), p2Cold(stack),
		stack.figure("P3", "fake API text delta → drover task watch prints it, p99",
			bench.DroverAtMost(50, "ms"), "BenchmarkFigureP3"),
		stack.figure("P3append", "event log append on the live path, events/s",
			bench.DroverAtLeast(20000, "events/s"), "BenchmarkFigureP3Append"),
		stack.figure("P4", "turns/s, many tasks on one worker (drover ÷ bare CLIs)",
			bench.RatioAtLeast(0.8), "BenchmarkFigureP4"),
		d1(stack),
		c1(),
		stack.figure("C2", "console: first render of a 50,000-event task from drover serve and Postgres (and JS heap ≤ 100 MiB)",
			bench.DroverAtMost(1000, "ms"), "BenchmarkFigureC2"),
	}
	all = append(all, wFigures()...)
	all = append(all, p5Figures(stack)...)
	return append(all, apiFigures(stack)...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "drover-bench:", err)
		os.Exit(1)
	}
}

// errGoalMissed is returned when the table holds a missed goal or a figure that could not run.
var errGoalMissed = errors.New("a figure missed its goal or could not be measured")

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("drover-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small inputs and few runs: check the machinery, report goals without enforcing them")
	runs := fs.Int("runs", 0, "interleaved (baseline, drover) pairs per figure (default 7, or 3 with -quick)")
	only := fs.String("only", "", "comma-separated figures to run (for example P1); the others are reported as skipped")
	out := fs.String("out", "bench-results.json", "where to write the table as JSON")
	keep := fs.Bool("keep", false, "keep the scratch folder (builds, corpora) and print its path")
	root := fs.String("root", "", "the repository's root folder (default: found from the working folder)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: drover-bench [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *runs <= 0 {
		*runs = 7
		if *quick {
			*runs = 3
		}
	}
	var ids []string
	stack := newStackRunner()
	all := figures(stack)
	known := map[string]bool{}
	for _, f := range all {
		known[f.ID] = true
	}
	for id := range strings.SplitSeq(*only, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		if !known[id] {
			return fmt.Errorf("-only: no figure %q", id)
		}
		ids = append(ids, id)
	}
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	dir, err := os.MkdirTemp("", "drover-bench-")
	if err != nil {
		return fmt.Errorf("making a scratch folder: %w", err)
	}
	if *keep {
		fmt.Fprintln(stderr, "scratch folder:", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	stack.selectFigures(all, ids)
	env := &bench.Env{Root: *root, Dir: dir, Quick: *quick, Runs: *runs, GoEnv: environ, Log: stderr}
	started := time.Now()
	rep, err := bench.Run(ctx, bench.Config{Figures: all, Only: ids, Env: env})
	if err != nil {
		return err
	}
	rep.Started = started.UTC()
	rep.GoVersion = runtime.Version()
	rep.Platform = runtime.GOOS + "/" + runtime.GOARCH
	rep.CPUs = runtime.NumCPU()
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if err := rep.WriteJSON(*out); err != nil {
		return err
	}
	if rep.Failed() {
		return errGoalMissed
	}
	return nil
}

// findRoot returns the folder of the go.mod above the working folder.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository: no go.mod above the working folder (use -root)")
		}
		dir = parent
	}
}
