package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), with the build events the go command
// adds (ImportPath, build-output, build-fail).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

// testID names one test (or subtest) of one package.
type testID struct{ pkg, test string }

func (id testID) String() string { return id.pkg + " " + id.test }

// Gate reads a `go test -json` stream, prints it as `go test` would without -v (the output of
// failed and skipped tests, one result line per package; all of it when Verbose), and judges
// it: a failed test, a test that never ended, a failed package, a failed build or a skip the
// allow-list does not name fails the run.
type Gate struct {
	// Out receives the readable output as it streams, and the summary.
	Out io.Writer
	// Allowed are the tests that may skip, with why.
	Allowed map[testID]string
	// Verbose prints every line of output, as `go test -v` would.
	Verbose bool

	running   map[testID][]string // tests started and not ended, with their output so far
	pkgOutput map[string][]string // package-level output not printed yet
	pkgs      map[string]bool     // packages seen

	passed      int
	failed      []testID
	said        map[testID][]string // what each failed or unfinished test reported, for the summary
	unfinished  []testID
	skipped     map[testID]string // every skipped test, with its reason
	failedPkgs  []string
	failedBuild []string
	noTests     int
	unparsed    int
}

// Run reads the stream r to its end, printing as it goes, then prints the summary and
// reports whether the run passed.
func (g *Gate) Run(r io.Reader) (bool, error) {
	g.running = map[testID][]string{}
	g.pkgOutput = map[string][]string{}
	g.pkgs = map[string]bool{}
	g.skipped = map[testID]string{}
	g.said = map[testID][]string{}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if strings.TrimSpace(line) != "" {
			g.line(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, fmt.Errorf("reading the test stream: %w", err)
		}
	}
	return g.summary(), nil
}

// line handles one line of the stream.
func (g *Gate) line(line string) {
	var ev event
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Action == "" {
		// Not test2json's: show it, and count it, since nothing should print here.
		g.unparsed++
		g.print(line)
		return
	}
	switch ev.Action {
	case "build-output":
		g.print(ev.Output)
		return
	case "build-fail":
		g.failedBuild = append(g.failedBuild, ev.ImportPath)
		return
	}
	if ev.Package == "" {
		return
	}
	g.pkgs[ev.Package] = true
	if ev.Test == "" {
		g.packageEvent(ev)
		return
	}
	id := testID{ev.Package, ev.Test}
	switch ev.Action {
	case "run":
		g.running[id] = nil
	case "output":
		if g.Verbose {
			g.print(ev.Output)
		} else if !isProgressLine(ev.Output) {
			g.running[id] = append(g.running[id], ev.Output)
		}
	case "pass":
		g.passed++
		delete(g.running, id)
	case "fail":
		g.failed = append(g.failed, id)
		g.said[id] = reports(g.running[id])
		g.flush(id)
	case "skip":
		g.skipped[id] = skipReason(g.running[id])
		g.flush(id)
	}
}

// packageEvent handles an event of the package itself: its own output and its end.
func (g *Gate) packageEvent(ev event) {
	switch ev.Action {
	case "output":
		switch {
		case g.Verbose:
			g.print(ev.Output)
		case isResultLine(ev.Output):
			g.endTests(ev.Package)
			if strings.HasPrefix(ev.Output, "FAIL") {
				g.flushPackage(ev.Package)
			}
			g.print(ev.Output)
		default:
			g.pkgOutput[ev.Package] = append(g.pkgOutput[ev.Package], ev.Output)
		}
	case "pass", "skip", "fail":
		g.endTests(ev.Package)
		if ev.Action == "fail" {
			g.failedPkgs = append(g.failedPkgs, ev.Package)
			g.flushPackage(ev.Package)
		}
		if ev.Action == "skip" {
			g.noTests++
		}
		delete(g.pkgOutput, ev.Package)
	}
}

// endTests ends the tests of pkg still running: the package has ended, so they never will (a
// panic, a timeout or an exit stopped the test binary). Their output holds why.
func (g *Gate) endTests(pkg string) {
	var left []testID
	for id := range g.running {
		if id.pkg == pkg {
			left = append(left, id)
		}
	}
	slices.SortFunc(left, func(a, b testID) int { return strings.Compare(a.test, b.test) })
	for _, id := range left {
		g.unfinished = append(g.unfinished, id)
		g.said[id] = reports(g.running[id])
		g.flush(id)
	}
}

// flush prints what a test printed, and forgets it.
func (g *Gate) flush(id testID) {
	for _, s := range g.running[id] {
		g.print(s)
	}
	delete(g.running, id)
}

// flushPackage prints what a package printed outside its tests, and forgets it.
func (g *Gate) flushPackage(pkg string) {
	for _, s := range g.pkgOutput[pkg] {
		g.print(s)
	}
	delete(g.pkgOutput, pkg)
}

func (g *Gate) print(s string) {
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	_, _ = io.WriteString(g.Out, s)
}

// summary prints the verdict and reports whether the run passed.
func (g *Gate) summary() bool {
	var allowedSkips, deniedSkips []testID
	for id := range g.skipped {
		if _, ok := g.Allowed[id]; ok {
			allowedSkips = append(allowedSkips, id)
		} else {
			deniedSkips = append(deniedSkips, id)
		}
	}
	byName := func(a, b testID) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(allowedSkips, byName)
	slices.SortFunc(deniedSkips, byName)

	p := func(format string, args ...any) { _, _ = fmt.Fprintf(g.Out, format+"\n", args...) }
	p("")
	p("testgate: %d passed, %d failed, %d did not finish, %d skipped (%d allowed); %d packages (%d without tests), %d failed to build",
		g.passed, len(g.failed), len(g.unfinished), len(g.skipped), len(allowedSkips), len(g.pkgs), g.noTests, len(g.failedBuild))
	list := func(title string, ids []testID, why func(testID) string) {
		if len(ids) == 0 {
			return
		}
		p("%s:", title)
		for _, id := range ids {
			if r := why(id); r != "" {
				p("    %s: %s", id, r)
			} else {
				p("    %s", id)
			}
			for _, s := range g.said[id] {
				p("        %s", s)
			}
		}
	}
	none := func(testID) string { return "" }
	list("failed", g.failed, none)
	list("did not finish (the test binary stopped: panic, timeout or exit)", g.unfinished, none)
	list("skipped, not in the allow-list (a skip is a failure when the tools are installed)", deniedSkips,
		func(id testID) string { return g.skipped[id] })
	list("skipped, allowed", allowedSkips, func(id testID) string { return g.Allowed[id] })
	var stale []testID
	for id := range g.Allowed {
		if _, ok := g.skipped[id]; !ok {
			stale = append(stale, id)
		}
	}
	slices.SortFunc(stale, byName)
	list("allowed to skip but did not (remove from the allow-list?)", stale, none)
	for _, pkg := range g.failedBuild {
		p("build failed: %s", pkg)
	}
	for _, pkg := range g.failedPkgs {
		p("package failed: %s", pkg)
	}
	if g.unparsed > 0 {
		p("%d lines of the stream were not test2json events", g.unparsed)
	}
	if len(g.pkgs) == 0 {
		p("no package was tested")
	}
	ok := len(g.failed) == 0 && len(g.unfinished) == 0 && len(deniedSkips) == 0 && len(g.failedBuild) == 0 &&
		len(g.failedPkgs) == 0 && g.unparsed == 0 && len(g.pkgs) > 0
	if ok {
		p("testgate: PASS")
	} else {
		p("testgate: FAIL")
	}
	return ok
}

// isProgressLine reports whether s is one of the lines -v adds to mark a test's progress.
func isProgressLine(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// isResultLine reports whether s is the line that ends a package's output ("ok  \tpkg\t0.1s",
// "FAIL\tpkg …", "?   \tpkg\t[no test files]").
func isResultLine(s string) bool {
	return strings.HasPrefix(s, "ok  \t") || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "?   \t")
}

// skipReason is what a skipped test said: its output without the "--- SKIP" line.
func skipReason(output []string) string {
	var reason []string
	for _, s := range output {
		if t := strings.TrimSpace(s); t != "" && !strings.HasPrefix(t, "--- SKIP") {
			reason = append(reason, t)
		}
	}
	return strings.Join(reason, " ")
}

// A test's own report: a line t.Error, t.Fatal or t.Log wrote ("    x_test.go:12: want 1"), or
// a panic. Log lines a test copies from the code it runs ("time=… level=…") are not reports.
var reportLine = regexp.MustCompile(`^\s+[\w./-]+\.go:\d+: |^panic: `)

// Most lines of reports and characters per line the summary repeats for one test.
const (
	maxReports    = 12
	maxReportLine = 300
)

// reports picks from a test's output the lines that say why it failed, so that the summary at
// the end of a long run names the cause without the reader finding the test's output.
func reports(output []string) []string {
	var out []string
	for _, s := range output {
		if !reportLine.MatchString(s) {
			continue
		}
		s = strings.TrimSpace(s)
		if _, msg, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(msg, "time=") {
			continue
		}
		if len(s) > maxReportLine {
			s = strings.ToValidUTF8(s[:maxReportLine], "") + " …"
		}
		out = append(out, s)
		if len(out) == maxReports {
			break
		}
	}
	return out
}
