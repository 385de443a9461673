package archcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
)

// MaxFuncLines is the most lines a function of a shipped package may span, its signature and
// closing brace included: past it, a function is read as a list of named steps instead.
const MaxFuncLines = 80

// CheckFuncLengths returns every function or method in the non-test files of the module's
// packages, other than those under exempt, that spans more than limit lines.
func (m Module) CheckFuncLengths(rule string, limit int, exempt []string) ([]Violation, error) {
	var out []Violation
	for _, name := range m.sorted() {
		if underAny(name, exempt) {
			continue
		}
		p := m.pkgs[m.Path+"/"+name]
		for _, f := range p.GoFiles {
			long, err := longFuncs(filepath.Join(p.Dir, f), limit)
			if err != nil {
				return nil, err
			}
			for _, at := range long {
				out = append(out, Violation{Rule: rule, Chain: []string{name}, At: at})
			}
		}
	}
	return out, nil
}

// longFuncs returns file:line (name, lines) of each function in path longer than limit lines.
func longFuncs(path string, limit int) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		from, to := fset.Position(fd.Pos()), fset.Position(fd.End())
		if n := to.Line - from.Line + 1; n > limit {
			out = append(out, fmt.Sprintf("%s:%d (%s, %d lines)", from.Filename, from.Line, fd.Name.Name, n))
		}
	}
	return out, nil
}
