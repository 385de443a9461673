package archcheck

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rules are the import rules docs/architecture.md states under its packages table, one each.
var rules = []Rule{
	{
		Name:   "claudecode, streamjson and events import neither Temporal nor pgx",
		From:   []string{"claudecode", "streamjson", "events"},
		Forbid: []string{"go.temporal.io", "github.com/jackc/pgx"},
	},
	{
		Name:   "workspace imports neither Temporal nor pgx",
		From:   []string{"workspace"},
		Forbid: []string{"go.temporal.io", "github.com/jackc/pgx"},
	},
	{
		Name:   "workflows imports neither store, engine, claudecode, pgx nor os/exec",
		From:   []string{"workflows"},
		Forbid: []string{"store", "engine", "claudecode", "github.com/jackc/pgx", "os/exec"},
	},
	{
		Name:   "store, taskview and archive import no Temporal",
		From:   []string{"store", "taskview", "archive"},
		Forbid: []string{"go.temporal.io"},
	},
	{
		Name:   "nothing imports cmd/",
		From:   []string{""},
		Forbid: []string{"cmd"},
	},
	{
		Name:   "only the test kits and tests import internal/testkit/…",
		From:   []string{""},
		Except: []string{"internal/testkit"},
		Forbid: []string{"internal/testkit"},
	},
}

// exempt are the packages the table's order does not hold: test kits and end-to-end tests may
// import any package but cmd/.
var exempt = []string{"internal/testkit", "e2e"}

const envRule = "only cmd/ reads the environment"

const funcRule = "no function of a shipped package spans more than 80 lines"

// envReaders may read the environment: the command line, and the test kits.
var envReaders = []string{"cmd", "internal/testkit"}

func moduleRoot(t *testing.T) (dir, path string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			return dir, strings.TrimSpace(strings.TrimPrefix(first, "module"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// tableRows reads the first column of the packages table of docs/architecture.md, top to bottom:
// each row's package names, a name ending in "/…" standing for the packages below it.
func tableRows(t *testing.T, doc []byte) [][]string {
	t.Helper()
	name := regexp.MustCompile("`([^`]+)`")
	var rows [][]string
	inPackages := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inPackages = line == "## Packages"
			continue
		}
		if !inPackages || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		var row []string
		for _, m := range name.FindAllStringSubmatch(cell, -1) {
			row = append(row, strings.TrimSuffix(strings.TrimSuffix(m[1], "…"), "/"))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no packages table under ## Packages")
	}
	return rows
}

// TestModuleKeepsItsRules holds the module's own packages to the rules of docs/architecture.md.
func TestModuleKeepsItsRules(t *testing.T) {
	dir, path := moduleRoot(t)
	pkgs, err := Load(context.Background(), dir, "./...")
	if err != nil {
		t.Fatal(err)
	}
	m := NewModule(path, pkgs)
	if len(m.pkgs) < 10 {
		t.Fatalf("go list found %d of the module's packages", len(m.pkgs))
	}
	doc, err := os.ReadFile(filepath.Join(dir, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	vs := m.Check(rules)
	vs = append(vs, m.CheckLayers("imports point down the packages table of docs/architecture.md", tableRows(t, doc), exempt)...)
	env, err := m.CheckEnv(envRule, envReaders)
	if err != nil {
		t.Fatal(err)
	}
	long, err := m.CheckFuncLengths(funcRule, MaxFuncLines, exempt)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(append(vs, env...), long...) {
		t.Error(v)
	}
	stated := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "`", "")), " ")
	for _, r := range append(rules, Rule{Name: envRule}, Rule{Name: funcRule}) {
		if !strings.Contains(stated, r.Name) {
			t.Errorf("docs/architecture.md does not state the rule %q", r.Name)
		}
	}
}

func pkg(path string, imports ...string) Package { return Package{ImportPath: path, Imports: imports} }

// TestCheckReportsAWrongArrow shows that a rule broken anywhere in a package's reach is reported,
// with the chain that reaches it, once.
func TestCheckReportsAWrongArrow(t *testing.T) {
	m := NewModule("m", []Package{
		pkg("m/workflows", "m/task", "fmt"),
		pkg("m/task", "m/store"),
		pkg("m/store", "github.com/jackc/pgx/v5"),
		pkg("m/claudecode", "go.temporal.io/sdk/client"),
		pkg("m/streamjson", "m/claudecode"),
		pkg("m/events"),
		pkg("m/taskview", "m/store", "m/internal/testkit/pgtest"),
		pkg("m/internal/testkit/pgtest", "m/store"),
		pkg("m/internal/testkit/fakecli", "m/internal/testkit/pgtest"),
	})
	var got []string
	for _, v := range m.Check(rules) {
		got = append(got, v.String())
	}
	want := []string{
		"claudecode, streamjson and events import neither Temporal nor pgx: claudecode -> go.temporal.io/sdk/client",
		"workflows imports neither store, engine, claudecode, pgx nor os/exec: workflows -> task -> store",
		"only the test kits and tests import internal/testkit/…: taskview -> internal/testkit/pgtest",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	clean := NewModule("m", []Package{pkg("m/workflows", "m/task"), pkg("m/task", "time")})
	if vs := clean.Check(rules); len(vs) != 0 {
		t.Errorf("a module that keeps the rules: %v", vs)
	}
}

// TestCheckLayersReportsAnImportUp shows that an import pointing up the table is reported, a
// package the table does not name, and a name of the table that no package has.
func TestCheckLayersReportsAnImportUp(t *testing.T) {
	doc := []byte("## Packages\n\n| package | job |\n| --- | --- |\n" +
		"| `cmd/drover` | top |\n| `engine` | middle |\n| `store`, `migrations` | bottom |\n" +
		"| `internal/testkit/…` | kits |\n| `gone` | moved away |\n\n## Queues\n\n| `queue` | not a package |\n")
	rows := tableRows(t, doc)
	if want := [][]string{{"cmd/drover"}, {"engine"}, {"store", "migrations"}, {"internal/testkit"}, {"gone"}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("rows = %q, want %q", rows, want)
	}
	m := NewModule("m", []Package{
		pkg("m/cmd/drover", "m/engine", "m/store"),
		pkg("m/engine", "m/store"),
		pkg("m/store", "m/migrations", "m/engine"),
		pkg("m/migrations"),
		pkg("m/newthing"),
		pkg("m/internal/testkit/pgtest", "m/engine"),
	})
	var got []string
	for _, v := range m.CheckLayers("down", rows, exempt) {
		got = append(got, v.String())
	}
	want := []string{"down (no such package): gone", "down (the package is in no row): newthing", "down: store -> engine"}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckEnvReportsARead shows that a package outside cmd/ that reads the environment, under
// any name it gives package os, is reported.
func TestCheckEnvReportsARead(t *testing.T) {
	dir := t.TempDir()
	src := "package engine\n\nimport sys \"os\"\n\nfunc home() string { return sys.Getenv(\"HOME\") }\n\nvar lookup = sys.LookupEnv\n"
	if err := os.WriteFile(filepath.Join(dir, "engine.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	quiet := "package store\n\nimport \"os\"\n\nfunc open(p string) (*os.File, error) { return os.Open(p) }\n"
	if err := os.WriteFile(filepath.Join(dir, "store.go"), []byte(quiet), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewModule("m", []Package{
		{ImportPath: "m/engine", Dir: dir, GoFiles: []string{"engine.go"}},
		{ImportPath: "m/cmd/drover", Dir: dir, GoFiles: []string{"engine.go"}},
		{ImportPath: "m/store", Dir: dir, GoFiles: []string{"store.go"}},
	})
	vs, err := m.CheckEnv("env", envReaders)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	want := []string{
		"env: engine reads the environment (engine.go:5: os.Getenv)",
		"env: engine reads the environment (engine.go:7: os.LookupEnv)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestShippedBinariesLinkNoTestKit lists what the shipped binaries link, as `go list -deps`
// sees it, and finds no test kit among it.
func TestShippedBinariesLinkNoTestKit(t *testing.T) {
	dir, path := moduleRoot(t)
	pkgs, err := Load(context.Background(), dir, "./cmd/...")
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, p := range pkgs {
		if !under(p.ImportPath, path) {
			continue
		}
		linked++
		if under(p.ImportPath, path+"/internal/testkit") {
			t.Errorf("a shipped binary links the test kit %s", p.ImportPath)
		}
	}
	if linked < 10 {
		t.Fatalf("go list found %d of the module's packages behind cmd/", linked)
	}
}

// TestCheckFuncLengthsReportsALongFunction shows the length rule catching a function one line
// over the limit, and passing one at it.
func TestCheckFuncLengthsReportsALongFunction(t *testing.T) {
	dir := t.TempDir()
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + body("atLimit", MaxFuncLines) + body("overLimit", MaxFuncLines+1)
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewModule("example.com/m", []Package{{ImportPath: "example.com/m/p", Dir: dir, GoFiles: []string{"p.go"}}})
	vs, err := m.CheckFuncLengths(funcRule, MaxFuncLines, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || !strings.Contains(vs[0].At, "overLimit") {
		t.Fatalf("want one violation naming overLimit, got %v", vs)
	}
}
