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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/drover-run/drover/internal/bench"
)

// A stack figure needs the whole of drover's stack: a Temporal server, Postgres, drover workers,
// the real Claude CLI and the fake Messages API. Its measurement is a benchmark of package e2e
// (BenchmarkFigure<Name>), which has the harness that starts those parts; this command builds that
// package's test binary once per run, runs the benchmark, and reads back the rows it reports.
//
// A full run gives each benchmark a process of its own, so that each figure meets a fresh Temporal
// server. A quick run checks the machinery, not the figures: it runs every selected benchmark in
// one process, which starts the harness's shared parts (the dev server, the drover build) once.
type stackRunner struct {
	mu sync.Mutex
	// benchmark names the benchmark of each stack figure, by figure ID.
	benchmark map[string]string
	// selected lists the benchmarks of this run's figures, in the table's order.
	selected []string
	// done holds each benchmark's outcome once it has run.
	done map[string]stackOutcome
	// binary is the e2e test binary, built in binaryDir.
	binary, binaryDir string
}

type stackOutcome struct {
	rows []bench.Row
	err  error
}

func newStackRunner() *stackRunner {
	return &stackRunner{benchmark: map[string]string{}, done: map[string]stackOutcome{}}
}

// figure declares the stack figure id, measured by benchmark.
func (s *stackRunner) figure(id, what string, goal bench.Goal, benchmark string) bench.Figure {
	s.benchmark[id] = benchmark
	return bench.Figure{
		ID:   id,
		What: what,
		Goal: goal,
		Measure: func(ctx context.Context, env *bench.Env) ([]bench.Row, error) {
			return s.measure(ctx, env, id)
		},
	}
}

// selectFigures records which figures this run measures (all when ids is empty).
func (s *stackRunner) selectFigures(all []bench.Figure, ids []string) {
	s.selected = nil
	for _, f := range all {
		if b, ok := s.benchmark[f.ID]; ok && !slices.Contains(s.selected, b) && (len(ids) == 0 || slices.Contains(ids, f.ID)) {
			s.selected = append(s.selected, b)
		}
	}
}

// measure returns the rows of figure id, running its benchmark (with the other selected ones, in
// a quick run) unless that is done.
func (s *stackRunner) measure(ctx context.Context, env *bench.Env, id string) ([]bench.Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	benchmark := s.benchmark[id]
	if _, ok := s.done[benchmark]; !ok {
		batch := []string{benchmark}
		if env.Quick {
			batch = slices.DeleteFunc(slices.Clone(s.selected), func(b string) bool { _, ok := s.done[b]; return ok })
			if !slices.Contains(batch, benchmark) {
				batch = append(batch, benchmark)
			}
		}
		for b, o := range s.run(ctx, env, batch) {
			s.done[b] = o
		}
	}
	o := s.done[benchmark]
	if o.err != nil {
		return nil, fmt.Errorf("%s: %w", id, o.err)
	}
	var rows []bench.Row
	for _, r := range o.rows {
		if r.Figure == id || strings.HasPrefix(r.Figure, id+" ") {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: %s reported no rows of it", id, benchmark)
	}
	return rows, nil
}

// benchmarkOf returns the benchmark that measures row r: the one of its figure, whose ID the
// row's name is or starts ("P3 p50" is a row of P3).
func (s *stackRunner) benchmarkOf(r bench.Row) string {
	id, _, _ := strings.Cut(r.Figure, " ")
	return s.benchmark[id]
}

// build builds the test binary of package e2e once per scratch folder.
func (s *stackRunner) build(ctx context.Context, env *bench.Env) (string, error) {
	if s.binaryDir == env.Dir && s.binary != "" {
		return s.binary, nil
	}
	path := filepath.Join(env.Dir, "bin", "e2e.test")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("building the e2e benchmarks: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", path, "./e2e")
	cmd.Dir = env.Root
	cmd.Env = env.GoEnv
	env.Logf("go %v", cmd.Args[1:])
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the e2e benchmarks: %w: %s", err, bytes.TrimSpace(out))
	}
	s.binary, s.binaryDir = path, env.Dir
	return path, nil
}

// run runs the benchmarks in one process, each once, and returns each one's rows or error.
func (s *stackRunner) run(ctx context.Context, env *bench.Env, benchmarks []string) map[string]stackOutcome {
	out := map[string]stackOutcome{}
	fail := func(err error) map[string]stackOutcome {
		for _, b := range benchmarks {
			out[b] = stackOutcome{err: err}
		}
		return out
	}
	bin, err := s.build(ctx, env)
	if err != nil {
		return fail(err)
	}
	rowsFile := filepath.Join(env.Dir, "rows-"+benchmarks[0]+".jsonl") // a batch begins with a benchmark not yet run
	_ = os.Remove(rowsFile)
	args := []string{
		"-test.run", "^$",
		"-test.bench", "^(" + strings.Join(benchmarks, "|") + ")$",
		"-test.benchtime", "1x",
		"-test.timeout", "90m",
		"-test.v",
		"-bench.rows", rowsFile,
		"-bench.runs", strconv.Itoa(env.Runs),
	}
	if env.Quick {
		args = append(args, "-bench.quick")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = filepath.Join(env.Root, "e2e") // the harness builds ../cmd/drover
	cmd.Env = env.GoEnv
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	env.Logf("%s %v", filepath.Base(bin), args)
	runErr := cmd.Run()
	rows, readErr := readRows(rowsFile)
	if readErr != nil {
		return fail(readErr)
	}
	parts := splitByBenchmark(output.Bytes(), benchmarks)
	for _, b := range benchmarks {
		var mine []bench.Row
		for _, r := range rows {
			if s.benchmarkOf(r) == b {
				mine = append(mine, r)
			}
		}
		part, ran := parts[b]
		if !ran {
			part = output.Bytes() // it never started: what came before explains why
		}
		failed := bytes.Contains(part, []byte("--- FAIL: "+b))
		switch {
		case failed || runErr != nil && len(mine) == 0:
			err := runErr
			if err == nil {
				err = errors.New("failed")
			}
			out[b] = stackOutcome{err: fmt.Errorf("%s: %w\n%s", b, err, testLines(part, 20, 10))}
		case len(mine) == 0:
			out[b] = stackOutcome{err: fmt.Errorf("%s reported no rows (is it skipped?)\n%s", b, tail(part, 40))}
		default:
			out[b] = stackOutcome{rows: mine}
		}
	}
	return out
}

// splitByBenchmark cuts the output of a test binary run with -test.v into each benchmark's part:
// from the line that names it alone, as the testing package writes it when the benchmark starts,
// to the next such line of another benchmark.
func splitByBenchmark(output []byte, benchmarks []string) map[string][]byte {
	parts := map[string][]byte{}
	current, from := "", 0
	at := 0
	for line := range bytes.Lines(output) {
		if name := string(bytes.TrimSpace(line)); slices.Contains(benchmarks, name) && name != current {
			if current != "" {
				parts[current] = append(parts[current], output[from:at]...)
			}
			current, from = name, at
		}
		at += len(line)
	}
	if current != "" {
		parts[current] = append(parts[current], output[from:]...)
	}
	return parts
}

func readRows(path string) ([]bench.Row, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading rows: %w", err)
	}
	defer f.Close()
	var rows []bench.Row
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r bench.Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("reading rows: %w", err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading rows: %w", err)
	}
	return rows, nil
}

// testLines picks what explains a failed benchmark out of its output, where the logs of the
// parts it ran (workers, servers) bury the test's own lines: up to most lines that the testing
// package wrote for the benchmark (file:line: message), then the last n lines.
func testLines(b []byte, most, n int) []byte {
	var picked [][]byte
	for line := range bytes.Lines(b) {
		if len(picked) < most && testLine.Match(line) {
			picked = append(picked, bytes.TrimRight(line, "\n"))
		}
	}
	if len(picked) == 0 {
		return tail(b, n)
	}
	return append(append(bytes.Join(picked, []byte("\n")), "\n...\n"...), tail(b, n)...)
}

// testLine matches a line the testing package writes for a t.Log or t.Fatal of a test file.
var testLine = regexp.MustCompile(`^\s*[a-z0-9_]+_test\.go:\d+: `)

// tail returns the last n lines of b.
func tail(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
