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
	"strconv"
	"sync"

	"github.com/drover-run/drover/internal/bench"
)

// A stack figure needs the whole of drover's stack: a Temporal server, Postgres, drover workers,
// the real Claude CLI and the fake Messages API. Its measurement is a benchmark of package e2e
// (BenchmarkFigure<Name>), which has the harness that starts those parts; this command builds that
// package's test binary once per run, runs the one benchmark, and reads back the rows it reports.
func stackFigure(id, what string, goal bench.Goal, benchmark string) bench.Figure {
	return bench.Figure{
		ID:   id,
		What: what,
		Goal: goal,
		Measure: func(ctx context.Context, env *bench.Env) ([]bench.Row, error) {
			return runStackBenchmark(ctx, env, id, benchmark)
		},
	}
}

// e2eBinary builds the test binary of package e2e once per scratch folder.
var e2eBinary struct {
	sync.Mutex
	dir, path string
}

func buildE2E(ctx context.Context, env *bench.Env) (string, error) {
	e2eBinary.Lock()
	defer e2eBinary.Unlock()
	if e2eBinary.dir == env.Dir && e2eBinary.path != "" {
		return e2eBinary.path, nil
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
	e2eBinary.dir, e2eBinary.path = env.Dir, path
	return path, nil
}

// runStackBenchmark runs benchmark once and returns the rows it reported.
func runStackBenchmark(ctx context.Context, env *bench.Env, id, benchmark string) ([]bench.Row, error) {
	bin, err := buildE2E(ctx, env)
	if err != nil {
		return nil, err
	}
	rowsFile := filepath.Join(env.Dir, "rows-"+benchmark+".jsonl")
	_ = os.Remove(rowsFile)
	args := []string{
		"-test.run", "^$",
		"-test.bench", "^" + benchmark + "$",
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
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	env.Logf("%s %v", filepath.Base(bin), args)
	runErr := cmd.Run()
	rows, readErr := readRows(rowsFile)
	switch {
	case runErr != nil:
		return nil, fmt.Errorf("%s: %s: %w\n%s", id, benchmark, runErr, testLines(out.Bytes(), 20, 10))
	case readErr != nil:
		return nil, fmt.Errorf("%s: %s: %w", id, benchmark, readErr)
	case len(rows) == 0:
		return nil, fmt.Errorf("%s: %s reported no rows (is it skipped?)\n%s", id, benchmark, tail(out.Bytes(), 40))
	}
	return rows, nil
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
