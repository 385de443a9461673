// Package archcheck holds the module to the import rules that docs/architecture.md states: which
// packages may not reach which imports, the order of the packages table (imports point down it),
// and which packages may read the environment. It checks a list of packages as `go list -json`
// describes them, so a test can run it on the module itself and on a list made up to break a rule.
package archcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Package is the part of `go list -json`'s description that the rules read.
type Package struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	Imports    []string // the imports of the package's non-test files
}

// Load runs `go list -deps -json` on patterns in dir and returns every package it lists.
func Load(ctx context.Context, dir string, patterns ...string) ([]Package, error) {
	args := append([]string{"list", "-deps", "-json"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.Bytes())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// A Violation is one import, or one read of the environment, that breaks a rule.
type Violation struct {
	Rule  string   // the rule as the document states it
	Chain []string // the imports from the package the rule names to the one that breaks it
	At    string   // for a read of the environment or a long function: file:line
}

func (v Violation) String() string {
	if v.At != "" {
		return fmt.Sprintf("%s: %s reads the environment (%s)", v.Rule, v.Chain[0], v.At)
	}
	return fmt.Sprintf("%s: %s", v.Rule, strings.Join(v.Chain, " -> "))
}

// Module is a module's packages, named relative to its path (module path "m", package "m/store"
// is "store").
type Module struct {
	Path string
	pkgs map[string]Package // by import path, the module's own packages only
}

// NewModule keeps the packages of module path among pkgs.
func NewModule(path string, pkgs []Package) Module {
	m := Module{Path: path, pkgs: map[string]Package{}}
	for _, p := range pkgs {
		if p.ImportPath == path || strings.HasPrefix(p.ImportPath, path+"/") {
			m.pkgs[p.ImportPath] = p
		}
	}
	return m
}

// rel names an import path relative to the module, or returns it whole if it is not the module's.
func (m Module) rel(path string) string {
	if r, ok := strings.CutPrefix(path, m.Path+"/"); ok {
		return r
	}
	return path
}

// under reports whether name is prefix or a package below it; the prefix "" holds every name.
func under(name, prefix string) bool {
	return prefix == "" || name == prefix || strings.HasPrefix(name, prefix+"/")
}

func underAny(name string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return under(name, p) })
}

// sorted returns the module's packages by name, relative to the module.
func (m Module) sorted() []string {
	names := make([]string, 0, len(m.pkgs))
	for path := range m.pkgs {
		names = append(names, m.rel(path))
	}
	slices.Sort(names)
	return names
}

// A Rule forbids the packages under From (but not under Except) to reach, through the module's
// own packages, an import under Forbid. Names are relative to the module for its own packages
// ("store") and whole for the others ("os/exec", "go.temporal.io").
type Rule struct {
	Name   string
	From   []string
	Except []string
	Forbid []string
}

// Check returns every import that breaks a rule, once each, with the chain that reaches it.
func (m Module) Check(rules []Rule) []Violation {
	var out []Violation
	for _, r := range rules {
		seen := map[[2]string]bool{}
		for _, name := range m.sorted() {
			if !underAny(name, r.From) || underAny(name, r.Except) {
				continue
			}
			for _, chain := range m.reach(name, r.Forbid) {
				edge := [2]string{chain[len(chain)-2], chain[len(chain)-1]}
				if !seen[edge] {
					seen[edge] = true
					out = append(out, Violation{Rule: r.Name, Chain: chain})
				}
			}
		}
	}
	return out
}

// reach walks the module's packages from start and returns a chain to each forbidden import it
// meets; it does not walk on through a forbidden import.
func (m Module) reach(start string, forbid []string) [][]string {
	var found [][]string
	from := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, imp := range m.pkgs[m.Path+"/"+name].Imports {
			r := m.rel(imp)
			if underAny(r, forbid) {
				found = append(found, append(chainTo(from, name), r))
				continue
			}
			if _, ours := m.pkgs[imp]; !ours {
				continue
			}
			if _, ok := from[r]; !ok {
				from[r] = name
				queue = append(queue, r)
			}
		}
	}
	return found
}

func chainTo(from map[string]string, name string) []string {
	var chain []string
	for ; name != ""; name = from[name] {
		chain = append(chain, name)
	}
	slices.Reverse(chain)
	return chain
}

// CheckLayers holds the module to an ordered list of rows, each a list of package prefixes: a
// package's imports of the module's packages point to its own row or a row below it. A package
// belongs to the row naming its longest prefix; one that no row names is a violation too.
// Packages under exempt are not held to the order. A row's name that holds no package is a
// violation as well: the table names only what exists.
func (m Module) CheckLayers(rule string, rows [][]string, exempt []string) []Violation {
	var out []Violation
	names := m.sorted()
	for _, row := range rows {
		for _, p := range row {
			if !slices.ContainsFunc(names, func(n string) bool { return under(n, p) }) {
				out = append(out, Violation{Rule: rule + " (no such package)", Chain: []string{p}})
			}
		}
	}
	for _, name := range names {
		if underAny(name, exempt) {
			continue
		}
		row := rowOf(rows, name)
		if row < 0 {
			out = append(out, Violation{Rule: rule + " (the package is in no row)", Chain: []string{name}})
			continue
		}
		for _, imp := range m.pkgs[m.Path+"/"+name].Imports {
			if _, ours := m.pkgs[imp]; !ours {
				continue
			}
			if r := rowOf(rows, m.rel(imp)); r < row {
				out = append(out, Violation{Rule: rule, Chain: []string{name, m.rel(imp)}})
			}
		}
	}
	return out
}

func rowOf(rows [][]string, name string) int {
	row, longest := -1, -1
	for i, prefixes := range rows {
		for _, p := range prefixes {
			if under(name, p) && len(p) > longest {
				row, longest = i, len(p)
			}
		}
	}
	return row
}

// envFuncs are the functions of package os that read or change the process's environment.
var envFuncs = []string{"Getenv", "LookupEnv", "Environ", "ExpandEnv", "Setenv", "Unsetenv", "Clearenv"}

// CheckEnv returns every use of the os package's environment functions in the non-test files of
// the module's packages other than those under allowed.
func (m Module) CheckEnv(rule string, allowed []string) ([]Violation, error) {
	var out []Violation
	for _, name := range m.sorted() {
		if underAny(name, allowed) {
			continue
		}
		p := m.pkgs[m.Path+"/"+name]
		for _, f := range p.GoFiles {
			at, err := envReads(filepath.Join(p.Dir, f))
			if err != nil {
				return nil, err
			}
			for _, a := range at {
				out = append(out, Violation{Rule: rule, Chain: []string{name}, At: a})
			}
		}
	}
	return out, nil
}

// envReads returns file:line of each reference to an environment function of package os.
func envReads(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	osName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "os" {
			osName = "os"
			if imp.Name != nil {
				osName = imp.Name.Name
			}
		}
	}
	if osName == "" {
		return nil, nil
	}
	var at []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == osName && slices.Contains(envFuncs, sel.Sel.Name) {
			pos := fset.Position(sel.Pos())
			at = append(at, fmt.Sprintf("%s:%d: os.%s", filepath.Base(pos.Filename), pos.Line, sel.Sel.Name))
		}
		return true
	})
	return at, nil
}
