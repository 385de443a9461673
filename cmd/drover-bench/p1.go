package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/drover-run/drover/internal/bench"
)

// P1's corpus sizes and limits.
const (
	p1CorpusMiB      = 50
	p1QuickCorpusMiB = 4
	p1RatioGoal      = 1.5
	p1RSSGoalMiB     = 30
)

// p1 is the adapter path as a user runs it: `drover normalize FILE` on a corpus of recorded CLI
// transcripts, against a program that only decodes each line into a map[string]any.
func p1() bench.Figure {
	return bench.Figure{
		ID:      "P1",
		What:    "drover normalize vs map[string]any decode, wall time",
		Goal:    bench.RatioAtLeast(p1RatioGoal),
		Measure: measureP1,
	}
}

func measureP1(ctx context.Context, env *bench.Env) ([]bench.Row, error) {
	size := p1CorpusMiB
	if env.Quick {
		size = p1QuickCorpusMiB
	}
	corpus := filepath.Join(env.Dir, "p1-corpus.jsonl")
	lines, err := writeCorpus(corpus, filepath.Join(env.Root, "streamjson", "testdata", "recorded"), size<<20)
	if err != nil {
		return nil, err
	}
	env.Logf("P1 corpus: %d MiB, %d lines", size, lines)

	// The full run measures drover as the release image builds it; the quick run shares the build
	// cache of the tests.
	opts := bench.BuildOptions{Shipped: !env.Quick}
	drover, err := env.Build(ctx, "./cmd/drover", "drover", opts)
	if err != nil {
		return nil, err
	}
	baseline, err := env.Build(ctx, "./internal/bench/mapdecode", "mapdecode", opts)
	if err != nil {
		return nil, err
	}
	if err := checkNormalize(ctx, drover, corpus, filepath.Join(env.Dir, "p1-events.jsonl")); err != nil {
		return nil, err
	}

	devNull, err := bench.DevNull()
	if err != nil {
		return nil, err
	}
	defer devNull.Close()
	runBaseline := func(ctx context.Context) (bench.Sample, error) {
		cmd := exec.CommandContext(ctx, baseline, corpus)
		cmd.Stdout = devNull
		return bench.RunProcess(cmd)
	}
	runDrover := func(ctx context.Context) (bench.Sample, error) {
		cmd := exec.CommandContext(ctx, drover, "normalize", corpus)
		cmd.Stdout = devNull
		return bench.RunProcess(cmd)
	}
	// One run of each first, so that the corpus and both binaries are in the page cache.
	if _, _, err := bench.Interleave(ctx, 1, runBaseline, runDrover); err != nil {
		return nil, err
	}
	base, subj, err := bench.Interleave(ctx, env.Runs, runBaseline, runDrover)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("%d MiB corpus, %d lines", size, lines)
	return []bench.Row{
		{
			Figure: "P1", What: "drover normalize vs map[string]any decode, wall time", Unit: "s",
			Baseline: bench.Median(bench.Seconds(base)), Drover: bench.Median(bench.Seconds(subj)),
			Ratio: bench.Median(bench.WallRatios(base, subj)), Runs: env.Runs,
			Goal: bench.RatioAtLeast(p1RatioGoal), Note: note,
		},
		{
			Figure: "P1 rss", What: "peak RSS of drover normalize (baseline: map decode)", Unit: "MiB",
			Baseline: bench.Median(bench.MiB(base)), Drover: bench.Median(bench.MiB(subj)), Runs: env.Runs,
			Goal: bench.DroverAtMost(p1RSSGoalMiB, "MiB"), Note: note,
		},
	}, nil
}

// writeCorpus concatenates every line of the transcripts (*.jsonl) in dir, over and over, until the
// file holds at least size bytes, and returns the number of lines written.
func writeCorpus(path, dir string, size int) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("building the corpus: no transcripts in %s", dir)
	}
	var unit bytes.Buffer
	unitLines := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, fmt.Errorf("building the corpus: %w", err)
		}
		b = bytes.TrimRight(b, "\n")
		if len(b) == 0 {
			continue
		}
		unit.Write(b)
		unit.WriteByte('\n')
		unitLines += bytes.Count(b, []byte("\n")) + 1
	}
	out, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("building the corpus: %w", err)
	}
	w := bufio.NewWriter(out)
	written, lines := 0, 0
	for written < size {
		n, _ := w.Write(unit.Bytes())
		written += n
		lines += unitLines
	}
	if err := errors.Join(w.Flush(), out.Close()); err != nil {
		return 0, fmt.Errorf("building the corpus: %w", err)
	}
	return lines, nil
}

// checkNormalize runs drover normalize once with its output kept, and checks that it wrote events:
// a figure must not time a command that does nothing.
func checkNormalize(ctx context.Context, drover, corpus, events string) error {
	f, err := os.Create(events)
	if err != nil {
		return fmt.Errorf("checking drover normalize: %w", err)
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, drover, "normalize", corpus)
	cmd.Stdout = f
	if _, err := bench.RunProcess(cmd); err != nil {
		return err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return fmt.Errorf("checking drover normalize: %w", err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	n, complete := 0, 0
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type == "" {
			return fmt.Errorf("checking drover normalize: line %d is not an event: %.100s", n+1, sc.Bytes())
		}
		n++
		if ev.Type == "complete" {
			complete++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("checking drover normalize: %w", err)
	}
	if n == 0 || complete == 0 {
		return fmt.Errorf("checking drover normalize: %d events, %d turns completed", n, complete)
	}
	return nil
}
