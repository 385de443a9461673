package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/bench"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/procstat"
	"github.com/drover-run/drover/task"
)

// The P5 figures count CPU time, not wall time: on a shared machine load stretches wall time but
// not the CPU a process burns. Each process of the stack is put in a class and its user and
// system time read from /proc/<pid>/stat before and after a batch of turns.

// P5's goals.
const (
	p5Goal     = 0.5 // drover's stack CPU per warm turn ÷ the CLI's
	p5AgeGoal  = 1.1 // P5 with p5StaleFolders stale project folders ÷ P5 with none
	p5ColdGoal = 1.1 // the CLI's CPU on a first turn under drover ÷ on a bare stream-json start
	// p5StaleFolders is how many project folders an old host's CLI config folder holds: one
	// for every workspace it ever served.
	p5StaleFolders = 2000
)

// userHZ is the unit of the times of /proc/<pid>/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// cpuClass names the processes whose CPU a P5 figure adds up.
type cpuClass string

const (
	classWorker   cpuClass = "worker"   // drover worker
	classGuard    cpuClass = "guard"    // drover's guard between the worker and a CLI
	classTemporal cpuClass = "temporal" // the Temporal dev server
	classPostgres cpuClass = "postgres" // the backends of the benchmark's database
	classCLI      cpuClass = "cli"      // the claude processes
)

// stackClasses are drover's stack: everything but the CLI.
var stackClasses = []cpuClass{classWorker, classGuard, classTemporal, classPostgres}

// procCPU returns the user and system time pid has used, in milliseconds, and its command name.
func procCPU(pid int) (ms float64, comm string, ok bool) {
	fields, comm, ok := procstat.Fields(pid)
	if !ok || len(fields) < 13 {
		return 0, "", false
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return float64(utime+stime) * 1000 / userHZ, comm, true
}

// cpuSnapshot is the CPU time of each process of the stack at one moment, by class and pid.
type cpuSnapshot map[cpuClass]map[int]float64

// snapshotCPU reads the CPU of the worker at workerPID and everything below it (the guards and
// the CLIs), of the Temporal server below this process, and of the Postgres backends serving
// database db.
func snapshotCPU(workerPID int, db string) cpuSnapshot {
	s := cpuSnapshot{}
	add := func(c cpuClass, pid int, ms float64) {
		if s[c] == nil {
			s[c] = map[int]float64{}
		}
		s[c][pid] = ms
	}
	if ms, _, ok := procCPU(workerPID); ok {
		add(classWorker, workerPID, ms)
	}
	for _, pid := range descendants(workerPID) {
		if ms, comm, ok := procCPU(pid); ok {
			if comm == "claude" {
				add(classCLI, pid, ms)
			} else {
				add(classGuard, pid, ms)
			}
		}
	}
	for _, pid := range descendants(os.Getpid()) {
		if ms, comm, ok := procCPU(pid); ok && comm == "temporal" {
			add(classTemporal, pid, ms)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(string(cmdline), "postgres: ") || !strings.Contains(string(cmdline), " "+db+" ") {
			continue
		}
		if ms, _, ok := procCPU(pid); ok {
			add(classPostgres, pid, ms)
		}
	}
	return s
}

// since returns the CPU each class used from earlier to s, in milliseconds. A process that
// started in between counts from zero; one that ended in between is lost (the stack's
// processes live through a batch of warm turns).
func (s cpuSnapshot) since(earlier cpuSnapshot) map[cpuClass]float64 {
	out := map[cpuClass]float64{}
	for c, pids := range s {
		for pid, ms := range pids {
			out[c] += ms - earlier[c][pid]
		}
	}
	return out
}

// reapedCPU returns the CPU time, in milliseconds, of pid's children that ended and were reaped,
// theirs included (cutime and cstime of /proc/<pid>/stat): a CLI that ended, with its guard.
func reapedCPU(pid int) float64 {
	fields, _, ok := procstat.Fields(pid)
	if !ok || len(fields) < 15 {
		return 0
	}
	cu, _ := strconv.ParseInt(fields[13], 10, 64)
	cs, _ := strconv.ParseInt(fields[14], 10, 64)
	return float64(cu+cs) * 1000 / userHZ
}

// ownReapedCPU is reapedCPU of this process: the bare CLIs a benchmark ran and waited for.
func ownReapedCPU() float64 { return reapedCPU(os.Getpid()) }

// stackParts describes the median of drover's stack's CPU per turn over the batches, with its parts.
func stackParts(batches []p5Batch) string {
	var total []float64
	parts := map[cpuClass][]float64{}
	for _, b := range batches {
		total = append(total, b.stack())
		for _, c := range stackClasses {
			parts[c] = append(parts[c], b[c])
		}
	}
	var note []string
	for _, c := range stackClasses {
		note = append(note, fmt.Sprintf("%s %.1f", c, bench.Median(parts[c])))
	}
	return fmt.Sprintf("%.1f ms (%s)", bench.Median(total), strings.Join(note, ", "))
}

// dbName is the database of a Postgres URL.
func dbName(dsn string) string {
	path := dsn[strings.LastIndexByte(dsn, '/')+1:]
	name, _, _ := strings.Cut(path, "?")
	return name
}

// staleFolders makes n project folders, each with an old session's transcript, in store (a
// folder beside the config folder), and returns the functions that move them into the config
// folder's projects/ and back out.
func staleFolders(tb testing.TB, configDir, store string, n int) (in, out func()) {
	tb.Helper()
	for i := range n {
		dir := filepath.Join(store, fmt.Sprintf("-old-workspace-%04d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%08d-0000-4000-8000-000000000000.jsonl", i)), []byte("{}\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	move := func(from, to string) func() {
		return func() {
			for i := range n {
				name := fmt.Sprintf("-old-workspace-%04d", i)
				if err := os.Rename(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	projects := filepath.Join(configDir, "projects")
	if err := os.MkdirAll(projects, 0o700); err != nil {
		tb.Fatal(err)
	}
	return move(store, projects), move(projects, store)
}

// p5Batch is what one batch of warm turns cost, per turn, by class.
type p5Batch map[cpuClass]float64

func (b p5Batch) stack() float64 {
	var sum float64
	for _, c := range stackClasses {
		sum += b[c]
	}
	return sum
}

func (b p5Batch) ratio() float64 { return b.stack() / b[classCLI] }

// BenchmarkFigureP5 measures figures P5, P5age and P5cold: what drover's own stack (worker, guard,
// Temporal, Postgres) burns in CPU per warm turn against what the CLI burns; the same with the
// CLI config folder of an old host; and what the CLI itself burns on a task's first turn against
// a bare stream-json start, with the count_tokens requests drover makes it send.
//
//	go test ./e2e -run '^$' -bench '^BenchmarkFigureP5$' -benchtime 1x -v
func BenchmarkFigureP5(b *testing.B) {
	e := newBenchEnv(b)
	turns := 10
	if *benchQuick {
		turns = 3
	}
	wp := e.startWorker("host-" + e.queue)
	worker := wp.cmd.Process.Pid
	w := &warmTaskRun{e: e, id: e.taskID("p5")}
	w.seen, _ = e.completions(w.id)
	if _, err := e.tc.Start(e.ctx, w.id, e.params(), task.Prompt{Text: "warm-up prompt"}, ""); err != nil {
		b.Fatal(err)
	}
	w.waitNext()
	db := dbName(e.dsn)
	in, out := staleFolders(b, e.configDir, filepath.Join(filepath.Dir(e.configDir), "stale"), p5StaleFolders)
	batch := func() p5Batch {
		before := snapshotCPU(worker, db)
		for i := range turns {
			if _, err := e.tc.Prompt(e.ctx, w.id, task.Prompt{Text: fmt.Sprintf("p5 prompt %d", i)}, ""); err != nil {
				b.Fatal(err)
			}
			w.waitNextRecorded()
		}
		// The last turn's workflow task may still be completing after its record: one query,
		// which the server answers once it has, brings it into the batch.
		e.waitIdle(w.id)
		used := snapshotCPU(worker, db).since(before)
		per := p5Batch{}
		for c, ms := range used {
			per[c] = ms / float64(turns)
		}
		return per
	}
	var fresh, aged []p5Batch
	for i := range figureRuns(b) {
		if i%2 == 0 {
			fresh = append(fresh, batch())
			in()
			aged = append(aged, batch())
			out()
		} else {
			in()
			aged = append(aged, batch())
			out()
			fresh = append(fresh, batch())
		}
	}
	w.check()
	rows := []bench.Row{p5Row(fresh), p5AgeRow(fresh, aged)}
	rows = append(rows, e.p5Cold(b, worker)...)
	reportRows(b, rows...)
}

// p5Row is P5 of the batches: the CLI's CPU per warm turn against the stack's, with its parts.
func p5Row(batches []p5Batch) bench.Row {
	var cli, stack, ratios []float64
	parts := map[cpuClass][]float64{}
	for _, b := range batches {
		cli, stack, ratios = append(cli, b[classCLI]), append(stack, b.stack()), append(ratios, b.ratio())
		for _, c := range stackClasses {
			parts[c] = append(parts[c], b[c])
		}
	}
	var note []string
	for _, c := range stackClasses {
		note = append(note, fmt.Sprintf("%s %.1f", c, bench.Median(parts[c])))
	}
	// The parts go in the table's "measured" column too, which prints no note.
	return bench.Row{Figure: "P5", What: "CPU per warm turn: drover's stack (ms: " + strings.Join(note, ", ") + ") ÷ the CLI's own",
		Unit: "ms", Baseline: bench.Median(cli), Drover: bench.Median(stack), Ratio: bench.Median(ratios),
		Runs: len(batches), Goal: bench.RatioAtMost(p5Goal),
		Note: "stack's parts, ms per turn: " + strings.Join(note, ", ")}
}

// p5AgeRow is P5 with the stale project folders against P5 without, pair by pair.
func p5AgeRow(fresh, aged []p5Batch) bench.Row {
	var base, old, ratios []float64
	var workerFresh, workerAged []float64
	for i := range fresh {
		base, old = append(base, fresh[i].ratio()), append(old, aged[i].ratio())
		ratios = append(ratios, aged[i].ratio()/fresh[i].ratio())
		workerFresh, workerAged = append(workerFresh, fresh[i][classWorker]), append(workerAged, aged[i][classWorker])
	}
	return bench.Row{Figure: "P5age", What: fmt.Sprintf("P5 with %d stale project folders in the CLI config folder ÷ P5 with none (the worker: %.1f ms ÷ %.1f ms)",
		p5StaleFolders, bench.Median(workerAged), bench.Median(workerFresh)),
		Unit: "×", Baseline: bench.Median(base), Drover: bench.Median(old), Ratio: bench.Median(ratios), Runs: len(fresh),
		Goal: bench.RatioAtMost(p5AgeGoal),
		Note: fmt.Sprintf("the worker's CPU per warm turn: %.1f ms without, %.1f ms with them", bench.Median(workerFresh), bench.Median(workerAged))}
}

// p5Cold measures P5cold: pairs of a bare stream-json start's first turn and a new task's first
// turn under drover, each the CLI process's CPU from its start to its first result; and the
// requests the fake API received per start on each side (count_tokens among them).
func (e *benchEnv) p5Cold(b *testing.B, worker int) []bench.Row {
	var base, drover, ratios []float64
	var bareCalls, droverCalls, countTokens int
	var stackMS []float64 // the stack's CPU over each first turn under drover
	for i := range figureRuns(b) {
		bare := func() float64 {
			before := len(e.fake.Calls())
			p, err := startClaude(e.ctx, e.claudeCommand())
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Stop(e.ctx) }()
			if err := claudeTurn(e.ctx, p, "cold prompt"); err != nil {
				b.Fatal(err)
			}
			ms, _, _ := procCPU(p.Pid())
			bareCalls += len(e.fake.Calls()) - before
			return ms
		}
		under := func() float64 {
			before := len(e.fake.Calls())
			known := map[int]bool{}
			stackBefore := snapshotCPU(worker, dbName(e.dsn))
			for pid := range stackBefore[classCLI] {
				known[pid] = true
			}
			id := e.taskID(fmt.Sprintf("p5-cold-%d", i))
			if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "cold prompt"}, ""); err != nil {
				b.Fatal(err)
			}
			e.waitRecordedIdle(id, 1)
			after := snapshotCPU(worker, dbName(e.dsn))
			var ms float64
			for pid, used := range after[classCLI] {
				if !known[pid] {
					ms += used
				}
			}
			stackMS = append(stackMS, p5Batch(after.since(stackBefore)).stack())
			if err := e.closeTask(id); err != nil {
				b.Fatal(err)
			}
			calls := e.fake.Calls()[before:]
			droverCalls += len(calls)
			countTokens += len(calls.Class(fa.ClassCountTokens))
			return ms
		}
		var x, y float64
		if i%2 == 0 {
			x, y = bare(), under()
		} else {
			y, x = under(), bare()
		}
		base, drover, ratios = append(base, x), append(drover, y), append(ratios, y/x)
	}
	starts := float64(len(base))
	return []bench.Row{
		{Figure: "P5cold", What: "the CLI's CPU on a task's first turn under drover ÷ on a bare stream-json start's first turn",
			Unit: "ms", Baseline: bench.Median(base), Drover: bench.Median(drover), Ratio: bench.Median(ratios),
			Runs: len(base), Goal: bench.RatioAtMost(p5ColdGoal),
			Note: fmt.Sprintf("drover's stack (worker, guard, Temporal, Postgres) over the same first turn: %.0f ms", bench.Median(stackMS))},
		{Figure: "P5cold requests", What: "API requests per CLI start and first turn, under drover ÷ bare",
			Unit: "requests", Baseline: float64(bareCalls) / starts, Drover: float64(droverCalls) / starts,
			Ratio: float64(droverCalls) / float64(max(bareCalls, 1)), Runs: len(base), Goal: bench.RatioAtMost(1),
			Note: fmt.Sprintf("count_tokens requests per start under drover: %.1f", float64(countTokens)/starts)},
	}
}
