// Package wiregen writes the one-pass decoders of claudecode's wire types from their struct tags, so
// that a field exists in one place: the type. Each struct type with json tags gets a decode method
// that reads it from a jsonscan.Decoder standing on its value, field by field, as the tags say.
//
// The json tag names a member, as for encoding/json; fields embedded from another tagged struct are
// read as members of the type that embeds them. The wire tag adds what JSON does not say:
//
//   - wire:"text" on a string: a value that seldom repeats (a uuid, a prompt, a file's text), read
//     without interning. Other strings are names (ids, models, enumerations), interned per Reader.
//   - wire:"verbatim" on a json:"-" json.RawMessage: the type reads only an object (anything else
//     leaves it as it was) and keeps the whole object in that field. With ",if=method", it keeps it
//     only when the method of that name, called after the members are read, reports true.
//
// Field types: string, bool, int64, *int64, float64, json.RawMessage, []string, and named types of
// the package as T, *T, []T or map[string]T. A named type without tags must have a hand-written
// decode method.
package wiregen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
)

// ScanPackage is the import path of the decoder the generated code reads with.
const ScanPackage = "github.com/drover-run/drover/claudecode/internal/jsonscan"

// File is one Go source file given to Generate.
type File struct {
	Name string
	Src  []byte
}

// kind says how one field is read.
type kind int

const (
	kindName     kind = iota // string, interned
	kindText                 // string, not interned
	kindBool                 // bool
	kindInt                  // int64
	kindIntPtr               // *int64
	kindFloat                // float64
	kindRaw                  // json.RawMessage
	kindStrings              // []string
	kindStruct               // T
	kindPtr                  // *T
	kindSlice                // []T
	kindMap                  // map[string]T
	kindVerbatim             // json:"-" json.RawMessage keeping the object
)

// field is one member of a generated type.
type field struct {
	goName string
	path   string // the selector of the field from the type: Name, or Embedded.Name
	key    string // the JSON member name
	kind   kind
	elem   string // the named type of kindStruct, kindPtr, kindSlice and kindMap
	cond   string // kindVerbatim: the method that says whether to keep the object, or ""
	depth  int    // 0 for the type's own fields, 1 for those of a type it embeds, …
}

// typeDecl is a struct type of the sources, as parsed.
type typeDecl struct {
	name   string
	st     *ast.StructType
	tagged bool // it has a field with a json or wire tag, its own or embedded
}

// wireType is a type that gets a decode method.
type wireType struct {
	name     string
	fields   []field // in declaration order, embedded members where they are embedded
	verbatim *field  // the field keeping the object, if any
}

// Generate returns the decoders of the tagged struct types of files, formatted, as one file of their
// package. A type that only ever appears embedded gets none: the types embedding it read its members.
func Generate(files []File) ([]byte, error) {
	pkg, decls, err := parseFiles(files)
	if err != nil {
		return nil, err
	}
	types, err := resolve(decls)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	src := render(pkg, names, types)
	out, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("formatting the generated code: %w", err)
	}
	return out, nil
}

// parseFiles parses files and returns their package name and struct types, in order.
func parseFiles(files []File) (string, []*typeDecl, error) {
	fset := token.NewFileSet()
	pkg := ""
	var decls []*typeDecl
	for _, f := range files {
		af, err := parser.ParseFile(fset, f.Name, f.Src, parser.SkipObjectResolution)
		if err != nil {
			return "", nil, fmt.Errorf("parsing %s: %w", f.Name, err)
		}
		if pkg != "" && af.Name.Name != pkg {
			return "", nil, fmt.Errorf("%s: package %s, want %s", f.Name, af.Name.Name, pkg)
		}
		pkg = af.Name.Name
		decls = append(decls, structTypes(af)...)
	}
	if pkg == "" {
		return "", nil, fmt.Errorf("no source files")
	}
	return pkg, decls, nil
}

// structTypes returns the struct types declared in af.
func structTypes(af *ast.File) []*typeDecl {
	var decls []*typeDecl
	for _, d := range af.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			ts := s.(*ast.TypeSpec)
			if st, ok := ts.Type.(*ast.StructType); ok && ts.TypeParams == nil {
				decls = append(decls, &typeDecl{name: ts.Name.Name, st: st})
			}
		}
	}
	return decls
}

// resolve decides which types get a decode method and reads their fields.
func resolve(decls []*typeDecl) ([]*wireType, error) {
	byName := map[string]*typeDecl{}
	for _, d := range decls {
		if byName[d.name] != nil {
			return nil, fmt.Errorf("type %s declared twice", d.name)
		}
		byName[d.name] = d
	}
	markTagged(decls, byName)
	embeddedOnly := embeddedOnlyTypes(decls, byName)
	var types []*wireType
	for _, d := range decls {
		if !d.tagged || embeddedOnly[d.name] {
			continue
		}
		t := &wireType{name: d.name}
		if err := t.addFields(d, byName, "", map[string]bool{}); err != nil {
			return nil, err
		}
		if err := t.check(); err != nil {
			return nil, err
		}
		types = append(types, t)
	}
	return types, nil
}

// markTagged sets tagged on the types with a tagged field of their own or through an embedded type.
func markTagged(decls []*typeDecl, byName map[string]*typeDecl) {
	for _, d := range decls {
		for _, f := range d.st.Fields.List {
			if f.Tag != nil && hasTag(f.Tag.Value) {
				d.tagged = true
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, d := range decls {
			for _, f := range d.st.Fields.List {
				if e := byName[embeddedName(f)]; e != nil && e.tagged && !d.tagged {
					d.tagged, changed = true, true
				}
			}
		}
	}
}

// embeddedOnlyTypes returns the types that appear embedded and never as the type of a named field.
func embeddedOnlyTypes(decls []*typeDecl, byName map[string]*typeDecl) map[string]bool {
	embedded, used := map[string]bool{}, map[string]bool{}
	for _, d := range decls {
		for _, f := range d.st.Fields.List {
			if len(f.Names) == 0 {
				embedded[embeddedName(f)] = true
				continue
			}
			ast.Inspect(f.Type, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && byName[id.Name] != nil {
					used[id.Name] = true
				}
				return true
			})
		}
	}
	only := map[string]bool{}
	for name := range embedded {
		if !used[name] {
			only[name] = true
		}
	}
	return only
}

// embeddedName returns the type name of an embedded field, or "" for a named field.
func embeddedName(f *ast.Field) string {
	if len(f.Names) > 0 {
		return ""
	}
	if id, ok := f.Type.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// hasTag reports whether a field's literal tag holds a json or wire key.
func hasTag(lit string) bool {
	tag := reflect.StructTag(unquote(lit))
	_, j := tag.Lookup("json")
	_, w := tag.Lookup("wire")
	return j || w
}

func unquote(lit string) string {
	s, err := strconv.Unquote(lit)
	if err != nil {
		return ""
	}
	return s
}

// addFields adds the members of d, reached from t through the selector prefix ("" or "A.B."), to t,
// those of embedded tagged types in place. seen holds the types being read, against a type that
// embeds itself.
func (t *wireType) addFields(d *typeDecl, byName map[string]*typeDecl, prefix string, seen map[string]bool) error {
	if seen[d.name] {
		return fmt.Errorf("type %s embeds itself", d.name)
	}
	seen[d.name] = true
	defer delete(seen, d.name)
	for _, f := range d.st.Fields.List {
		if len(f.Names) == 0 {
			if e := byName[embeddedName(f)]; e != nil && e.tagged {
				if err := t.addFields(e, byName, prefix+e.name+".", seen); err != nil {
					return err
				}
			}
			continue
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			fd, skip, err := readField(d.name, n.Name, f)
			if err != nil {
				return err
			}
			if !skip {
				fd.path, fd.depth = prefix+fd.goName, strings.Count(prefix, ".")
				t.fields = append(t.fields, fd)
			}
		}
	}
	return nil
}

// check refuses two fields of one member name at one depth (the shallower one is kept, as in
// encoding/json) and more than one verbatim field.
func (t *wireType) check() error {
	seen := map[string]int{}
	var kept []field
	for _, f := range t.fields {
		if f.kind == kindVerbatim {
			if t.verbatim != nil {
				return fmt.Errorf("%s: two verbatim fields, %s and %s", t.name, t.verbatim.goName, f.goName)
			}
			t.verbatim = &f
			continue
		}
		if i, ok := seen[f.key]; ok {
			switch {
			case f.depth == kept[i].depth:
				return fmt.Errorf("%s: fields %s and %s both read member %q", t.name, kept[i].goName, f.goName, f.key)
			case f.depth < kept[i].depth:
				kept[i] = f
			}
			continue
		}
		seen[f.key] = len(kept)
		kept = append(kept, f)
	}
	t.fields = kept
	return nil
}

// readField reads one named field's tags and type. skip is true for a json:"-" field.
func readField(typeName, goName string, f *ast.Field) (fd field, skip bool, err error) {
	where := typeName + "." + goName
	tag := reflect.StructTag("")
	if f.Tag != nil {
		tag = reflect.StructTag(unquote(f.Tag.Value))
	}
	jsonTag, ok := tag.Lookup("json")
	if !ok {
		return field{}, false, fmt.Errorf("%s: no json tag", where)
	}
	key, _, _ := strings.Cut(jsonTag, ",")
	if key == "" {
		key = goName
	}
	opts, err := wireOptions(where, tag.Get("wire"))
	if err != nil {
		return field{}, false, err
	}
	fd = field{goName: goName, key: key, cond: opts.cond}
	if key == "-" && jsonTag == "-" {
		if !opts.verbatim {
			return field{}, true, nil
		}
		if typeString(f.Type) != "json.RawMessage" {
			return field{}, false, fmt.Errorf(`%s: wire:"verbatim" needs a json.RawMessage`, where)
		}
		fd.kind = kindVerbatim
		return fd, false, nil
	}
	if opts.verbatim {
		return field{}, false, fmt.Errorf(`%s: wire:"verbatim" needs json:"-"`, where)
	}
	fd.kind, fd.elem, err = fieldKind(where, f.Type, opts.text)
	return fd, false, err
}

// options are the values of a wire tag.
type options struct {
	text, verbatim bool
	cond           string
}

func wireOptions(where, tag string) (options, error) {
	var o options
	if tag == "" {
		return o, nil
	}
	for opt := range strings.SplitSeq(tag, ",") {
		switch {
		case opt == "text":
			o.text = true
		case opt == "verbatim":
			o.verbatim = true
		case strings.HasPrefix(opt, "if=") && token.IsIdentifier(opt[len("if="):]):
			o.cond = opt[len("if="):]
		default:
			return o, fmt.Errorf("%s: unknown wire option %q", where, opt)
		}
	}
	if o.cond != "" && !o.verbatim {
		return o, fmt.Errorf(`%s: wire:"if=…" needs verbatim`, where)
	}
	return o, nil
}

// fieldKind says how a field of type expr is read; elem is the named type it holds, if any.
func fieldKind(where string, expr ast.Expr, text bool) (kind, string, error) {
	ts := typeString(expr)
	if text && ts != "string" {
		return 0, "", fmt.Errorf(`%s: wire:"text" on a %s, not a string`, where, ts)
	}
	switch ts {
	case "string":
		if text {
			return kindText, "", nil
		}
		return kindName, "", nil
	case "bool":
		return kindBool, "", nil
	case "int64":
		return kindInt, "", nil
	case "*int64":
		return kindIntPtr, "", nil
	case "float64":
		return kindFloat, "", nil
	case "json.RawMessage":
		return kindRaw, "", nil
	case "[]string":
		return kindStrings, "", nil
	}
	for _, shape := range []struct {
		prefix string
		kind   kind
	}{{"*", kindPtr}, {"[]", kindSlice}, {"map[string]", kindMap}, {"", kindStruct}} {
		if name, ok := strings.CutPrefix(ts, shape.prefix); ok && token.IsIdentifier(name) && ast.IsExported(name) {
			return shape.kind, name, nil
		}
	}
	return 0, "", fmt.Errorf("%s: no decoder for type %s", where, ts)
}

// typeString prints a type expression.
func typeString(expr ast.Expr) string {
	var b bytes.Buffer
	if err := format.Node(&b, token.NewFileSet(), expr); err != nil {
		return fmt.Sprintf("%T", expr)
	}
	return b.String()
}
