package api_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/taskview"
)

// schemaTypes names the Go type of each schema of the OpenAPI document: what the API takes and
// answers.
var schemaTypes = map[string]reflect.Type{
	"CreateTask":     reflect.TypeFor[api.CreateTask](),
	"Budget":         reflect.TypeFor[api.BudgetJSON](),
	"BudgetChange":   reflect.TypeFor[api.BudgetChange](),
	"ResolveRequest": reflect.TypeFor[api.ResolveRequest](),
	"Resolved":       reflect.TypeFor[api.Resolved](),
	"PromptRequest":  reflect.TypeFor[api.PromptRequest](),
	"Accepted":       reflect.TypeFor[api.Accepted](),
	"Created":        reflect.TypeFor[api.Created](),
	"Control":        reflect.TypeFor[api.Control](),
	"Task":           reflect.TypeFor[api.Task](),
	"TaskDetail":     reflect.TypeFor[api.TaskDetail](),
	"PendingRequest": reflect.TypeFor[taskview.PendingRequest](),
	"DecideRequest":  reflect.TypeFor[api.DecideRequest](),
	"Decided":        reflect.TypeFor[api.Decided](),
	"Event":          reflect.TypeFor[taskview.Event](),
	"EventPage":      reflect.TypeFor[api.EventPage](),
	"TaskDiff":       reflect.TypeFor[api.TaskDiff](),
	"FileChange":     reflect.TypeFor[api.FileChange](),
	"PublishRequest": reflect.TypeFor[api.PublishRequest](),
	"Published":      reflect.TypeFor[api.Published](),
	"RewindRequest":  reflect.TypeFor[api.RewindRequest](),
	"Rewound":        reflect.TypeFor[api.Rewound](),
	"ForkRequest":    reflect.TypeFor[api.ForkRequest](),
	"Forked":         reflect.TypeFor[api.Forked](),
	"ErrorBody": reflect.TypeFor[struct {
		Error taskerr.Error `json:"error"`
	}](),
}

// schema is the part of a JSON Schema the comparison reads.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"` // a name, or a list of names
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties any                `json:"additionalProperties"`
	Enum                 []any              `json:"enum"`
	Const                any                `json:"const"`
}

func (s *schema) types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	return nil
}

// jsonFields are the fields of struct t as encoding/json writes them, embedded structs
// flattened.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-" || (!f.IsExported() && !f.Anonymous):
			continue
		case f.Anonymous && name == "":
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
	durType  = reflect.TypeFor[time.Duration]()
)

// compareSchema lists every difference between schema s of doc and Go type t, at path.
func compareSchema(schemas map[string]*schema, s *schema, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		ref, ok := schemas[name]
		if !ok {
			return []string{path + ": $ref to unknown schema " + name}
		}
		if want, ok := schemaTypes[name]; ok && want != t {
			return []string{fmt.Sprintf("%s: refers to %s (%s), the Go type is %s", path, name, want, t)}
		}
		return compareSchema(schemas, ref, t, path)
	}
	kind := goKind(t)
	if ts := s.types(); len(ts) > 0 && kind != "" && !slices.Contains(ts, kind) && !(kind == "number" && slices.Contains(ts, "integer")) {
		return []string{fmt.Sprintf("%s: schema type %v, the Go type %s is %s", path, ts, t, kind)}
	}
	switch kind {
	case "array":
		if s.Items == nil {
			return []string{path + ": an array with no items schema"}
		}
		return compareSchema(schemas, s.Items, t.Elem(), path+"[]")
	case "object":
		if t.Kind() == reflect.Map {
			if s.AdditionalProperties == nil {
				return []string{path + ": a map with no additionalProperties schema"}
			}
			if a, ok := s.AdditionalProperties.(map[string]any); ok {
				b, _ := json.Marshal(a)
				var as schema
				_ = json.Unmarshal(b, &as)
				return compareSchema(schemas, &as, t.Elem(), path+"{}")
			}
			return nil
		}
		return compareObject(schemas, s, t, path)
	}
	return nil
}

func compareObject(schemas map[string]*schema, s *schema, t reflect.Type, path string) []string {
	var diffs []string
	fields := jsonFields(t)
	for _, name := range sortedNames(fields) {
		p, ok := s.Properties[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s.%s: answered by %s, missing from the schema", path, name, t))
			continue
		}
		diffs = append(diffs, compareSchema(schemas, p, fields[name], path+"."+name)...)
	}
	for _, name := range sortedNames(s.Properties) {
		if _, ok := fields[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s.%s: in the schema, not a field of %s", path, name, t))
		}
	}
	return diffs
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// goKind is the JSON Schema type encoding/json gives t, or "" for any.
func goKind(t reflect.Type) string {
	switch {
	case t == durType:
		return "integer"
	case t == timeType || t == reflect.TypeFor[api.Duration]():
		return "string"
	case t == rawType || t.Kind() == reflect.Interface:
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return ""
}

func loadSchemas(t *testing.T, doc []byte) map[string]*schema {
	t.Helper()
	var d struct {
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	return d.Components.Schemas
}

// diffDocument compares every schema of the document with its Go type.
func diffDocument(schemas map[string]*schema, types map[string]reflect.Type) []string {
	var diffs []string
	for _, name := range sortedNames(types) {
		s, ok := schemas[name]
		if !ok {
			diffs = append(diffs, name+": no such schema in the document")
			continue
		}
		diffs = append(diffs, compareSchema(schemas, s, types[name], name)...)
	}
	return diffs
}

// The OpenAPI document's schemas are the Go types the API takes and answers, field for field,
// nested ones included.
func TestOpenAPISchemasMatchTheTypes(t *testing.T) {
	t.Parallel()
	if diffs := diffDocument(loadSchemas(t, api.OpenAPI()), schemaTypes); len(diffs) > 0 {
		t.Fatalf("the OpenAPI document and the Go types differ:\n%s", strings.Join(diffs, "\n"))
	}
}

// A field on one side only is caught: one added to a schema, one added to a type, one added to a
// nested object of either.
func TestOpenAPIComparisonCatchesOneSidedFields(t *testing.T) {
	t.Parallel()
	extraSchema := loadSchemas(t, api.OpenAPI())
	extraSchema["Accepted"].Properties["extra"] = &schema{Type: "string"}
	if diffs := diffDocument(extraSchema, schemaTypes); !onlyAbout(diffs, "Accepted.extra", "Created.prompt.extra", "Forked.prompt.extra") {
		t.Errorf("a field only in the schema: %q", diffs)
	}
	withExtra := map[string]reflect.Type{"Accepted": reflect.TypeFor[struct {
		api.Accepted
		Extra int `json:"extra"`
	}]()}
	if diffs := diffDocument(loadSchemas(t, api.OpenAPI()), withExtra); !onlyAbout(diffs, "Accepted.extra") {
		t.Errorf("a field only in the type: %q", diffs)
	}
	nested := loadSchemas(t, api.OpenAPI())
	nested["TaskDetail"].Properties["tokens"].Properties["extra"] = &schema{Type: "integer"}
	if diffs := diffDocument(nested, schemaTypes); !onlyAbout(diffs, "TaskDetail.tokens.extra") {
		t.Errorf("a nested field only in the schema: %q", diffs)
	}
}

// onlyAbout reports whether diffs name exactly the paths, one each.
func onlyAbout(diffs []string, paths ...string) bool {
	if len(diffs) != len(paths) {
		return false
	}
	for i, p := range paths {
		if !strings.HasPrefix(diffs[i], p+":") {
			return false
		}
	}
	return true
}
