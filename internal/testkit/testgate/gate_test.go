package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The recordings in testdata are real `go test -json -count=1` output of small packages that
// pass, fail, skip, fail to build, panic, exit from TestMain, time out (-timeout 1s), have no
// tests, or do not exist.
func recording(t *testing.T, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", n+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

func TestGate(t *testing.T) {
	skipTools := testID{"example.com/rec/skip", "TestNeedsTools"}
	skipSub := testID{"example.com/rec/sub", "TestTable/b"}
	for _, tc := range []struct {
		name    string
		streams []string
		allowed map[testID]string
		pass    bool
		show    []string // in the output
		hide    []string // not in the output
	}{
		{name: "pass", streams: []string{"pass"}, pass: true,
			show: []string{"ok  \texample.com/rec/pass", "testgate: 2 passed, 0 failed", "testgate: PASS"},
			hide: []string{"=== RUN", "fine", "--- PASS"}},
		{name: "a failed test", streams: []string{"pass", "fail"},
			show: []string{"--- FAIL: TestBad", "want 1, got 2", "FAIL\texample.com/rec/fail", "failed:\n    example.com/rec/fail TestBad\n        f_test.go:6: want 1, got 2\n",
				"package failed: example.com/rec/fail", "testgate: FAIL"},
			hide: []string{"--- PASS"}},
		{name: "a skip not allowed", streams: []string{"skip"},
			show: []string{"--- SKIP: TestNeedsTools", "not in the allow-list",
				"example.com/rec/skip TestNeedsTools: s_test.go:6: the real Claude CLI is not installed", "testgate: FAIL"}},
		{name: "a skip allowed", streams: []string{"skip"}, pass: true,
			allowed: map[testID]string{skipTools: "needs a GPU"},
			show:    []string{"skipped, allowed:\n    example.com/rec/skip TestNeedsTools: needs a GPU", "testgate: PASS"}},
		{name: "a skipped subtest not allowed", streams: []string{"sub"},
			allowed: map[testID]string{skipTools: "listed but not run"},
			show: []string{"example.com/rec/sub TestTable/b: s_test.go:7: not on this platform",
				"allowed to skip but did not", "testgate: FAIL"}},
		{name: "a skipped subtest allowed", streams: []string{"sub"}, pass: true,
			allowed: map[testID]string{skipSub: "no such platform here"}},
		{name: "a build failure", streams: []string{"pass", "buildfail"},
			show: []string{"cannot use \"no\"", "FAIL\texample.com/rec/buildfail [build failed]",
				"build failed: example.com/rec/buildfail [example.com/rec/buildfail.test]", "testgate: FAIL"}},
		{name: "a panic", streams: []string{"panic"},
			show: []string{"panic: assignment to entry in nil map", "example.com/rec/panic TestPanics\n        panic: assignment to entry in nil map", "testgate: FAIL"},
			hide: []string{"TestNeverRuns"}},
		{name: "TestMain failing after passing tests", streams: []string{"mainexit"},
			show: []string{"cleanup failed", "package failed: example.com/rec/mainexit", "testgate: FAIL"}},
		{name: "a timeout", streams: []string{"timeout"},
			show: []string{"panic: test timed out after 1s", "did not finish", "example.com/rec/timeout TestHangs", "testgate: FAIL"}},
		{name: "a package that does not exist", streams: []string{"nosuch"},
			show: []string{"directory not found", "package failed: ./nosuch", "testgate: FAIL"}},
		{name: "a package without tests", streams: []string{"notests", "pass"}, pass: true,
			show: []string{"?   \texample.com/rec/notests\t[no test files]", "2 packages (1 without tests)"}},
		{name: "nothing tested", streams: nil, show: []string{"no package was tested", "testgate: FAIL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			g := &Gate{Out: &out, Allowed: tc.allowed}
			ok, err := g.Run(strings.NewReader(recording(t, tc.streams...)))
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.pass {
				t.Errorf("passed = %v, want %v", ok, tc.pass)
			}
			for _, s := range tc.show {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output lacks %q", s)
				}
			}
			for _, s := range tc.hide {
				if strings.Contains(out.String(), s) {
					t.Errorf("the output shows %q", s)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out.String())
			}
		})
	}
}

// Lines that are not test2json events are shown, and fail the run.
func TestGateUnparsedLines(t *testing.T) {
	var out bytes.Buffer
	g := &Gate{Out: &out}
	ok, err := g.Run(strings.NewReader(recording(t, "pass") + "something else\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.Contains(out.String(), "something else\n") || !strings.Contains(out.String(), "1 lines of the stream were not") {
		t.Errorf("passed = %v, output:\n%s", ok, out.String())
	}
}

// -v shows everything the tests printed.
func TestGateVerbose(t *testing.T) {
	var out bytes.Buffer
	g := &Gate{Out: &out, Verbose: true}
	if ok, err := g.Run(strings.NewReader(recording(t, "pass"))); err != nil || !ok {
		t.Fatalf("passed %v, %v", ok, err)
	}
	for _, s := range []string{"=== RUN   TestOne", "fine", "--- PASS: TestTwo", "PASS\n"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the output lacks %q:\n%s", s, out.String())
		}
	}
}

func TestParseAllowList(t *testing.T) {
	good := `# Tests that may skip even with the tools installed.

example.com/a TestX   # needs a GPU
example.com/b TestY/sub # not on this platform
`
	got, err := parseAllowList(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	want := map[testID]string{{"example.com/a", "TestX"}: "needs a GPU", {"example.com/b", "TestY/sub"}: "not on this platform"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for id, why := range want {
		if got[id] != why {
			t.Errorf("%s: %q, want %q", id, got[id], why)
		}
	}
	for _, bad := range []string{
		"example.com/a TestX\n",                              // no reason
		"example.com/a TestX #   \n",                         // an empty reason
		"TestX # why\n",                                      // no package
		"example.com/a TestX extra # why\n",                  // too many fields
		"example.com/a TestX # a\nexample.com/a TestX # b\n", // listed twice
	} {
		if _, err := parseAllowList(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// The program's exit status: 0 when the run passed, 1 when it did not, 2 when it cannot judge.
func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	allow := filepath.Join(dir, "allow")
	if err := os.WriteFile(allow, []byte("example.com/rec/skip TestNeedsTools # for this test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("example.com/rec/skip TestNeedsTools\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		stream string
		want   int
	}{
		{nil, "pass", 0},
		{nil, "skip", 1},
		{[]string{"-allow", allow}, "skip", 0},
		{[]string{"-allow", allow}, "fail", 1},
		{[]string{"-allow", bad}, "pass", 2},
		{[]string{"-allow", filepath.Join(dir, "missing")}, "pass", 2},
		{[]string{"extra"}, "pass", 2},
	} {
		var stdout, stderr bytes.Buffer
		if got := run(tc.args, strings.NewReader(recording(t, tc.stream)), &stdout, &stderr); got != tc.want {
			t.Errorf("%v on %s: exit %d, want %d\n%s%s", tc.args, tc.stream, got, tc.want, stdout.String(), stderr.String())
		}
	}
}

// The summary repeats a failed test's own reports, not the log lines it copied from the code
// under test, and cuts long ones.
func TestReports(t *testing.T) {
	long := "    x_test.go:9: " + strings.Repeat("é", 400) + "\n"
	got := reports([]string{
		"=== RUN   TestX\n",
		"    harness_test.go:40: time=2026-12-05T09:15:12Z level=INFO msg=started\n",
		"        continued line of a log\n",
		"    x_test.go:7: turn 2: 1 complete events\n",
		"        sub_test.go:3: in a subtest\n",
		long,
		"--- FAIL: TestX (1.00s)\n",
	})
	if len(got) != 3 || got[0] != "x_test.go:7: turn 2: 1 complete events" || got[1] != "sub_test.go:3: in a subtest" {
		t.Fatalf("reports = %q", got)
	}
	if !strings.HasSuffix(got[2], " …") || len(got[2]) > maxReportLine+len(" …") || !utf8.ValidString(got[2]) {
		t.Errorf("a long report is not cut cleanly: %q", got[2])
	}
}
