package claudecode

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/drover-run/drover/claudecode/internal/wiregen"
)

// generateDirective is how go generate runs the decoders' generator in this folder.
const generateDirective = "//go:generate go run ./internal/wiregen/cmd/wiregen "

// wiregenArgs returns the arguments of this package's go:generate line for wiregen.
func wiregenArgs(t *testing.T) wiregen.Args {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(src)) {
			if rest, ok := strings.CutPrefix(l, generateDirective); ok {
				a, err := wiregen.ParseArgs(strings.Fields(rest))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				return a
			}
		}
	}
	t.Fatal("no go:generate line runs wiregen")
	return wiregen.Args{}
}

// TestWireDecodeGenerated regenerates the decoders in memory, as go generate does, and fails on any
// difference from the file checked in.
func TestWireDecodeGenerated(t *testing.T) {
	t.Parallel()
	a := wiregenArgs(t)
	files, err := wiregen.ReadSources(".", a)
	if err != nil {
		t.Fatal(err)
	}
	want, err := wiregen.Generate(files)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(a.Output)
	if err != nil {
		t.Fatal(err)
	}
	if err := wiregen.Diff(a.Output, have, want); err != nil {
		t.Fatal(err)
	}
}

// TestWireDecodeDrift shows the check above failing when a field is added to one side only: to a
// wire type without regenerating, or to the decoders by hand.
func TestWireDecodeDrift(t *testing.T) {
	t.Parallel()
	a := wiregenArgs(t)
	files, err := wiregen.ReadSources(".", a)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(a.Output)
	if err != nil {
		t.Fatal(err)
	}

	// A field added to ResultMessage in wire.go only.
	edited := append([]wiregen.File(nil), files...)
	for i, f := range edited {
		if f.Name != "wire.go" {
			continue
		}
		anchor := []byte("type ResultMessage struct {\n\tline\n")
		if !bytes.Contains(f.Src, anchor) {
			t.Fatal("wire.go: ResultMessage not found; update this test")
		}
		src := bytes.Replace(f.Src, anchor, append(anchor, "\tFastMode bool `json:\"fast_mode\"`\n"...), 1)
		edited[i] = wiregen.File{Name: f.Name, Src: src}
	}
	want, err := wiregen.Generate(edited)
	if err != nil {
		t.Fatal(err)
	}
	err = wiregen.Diff(a.Output, have, want)
	if err == nil || !strings.Contains(err.Error(), `fast_mode`) {
		t.Errorf("a field added to wire.go only: check says %v", err)
	}

	// A case added to the decoders only.
	want, err = wiregen.Generate(files)
	if err != nil {
		t.Fatal(err)
	}
	anchor := []byte("\t\tcase \"num_turns\":\n")
	if !bytes.Contains(have, anchor) {
		t.Fatal("no num_turns case in the decoders; update this test")
	}
	hand := bytes.Replace(have, anchor, append([]byte("\t\tcase \"fast_mode\":\n\t\t\td.Skip()\n"), anchor...), 1)
	if err := wiregen.Diff(a.Output, hand, want); err == nil || !strings.Contains(err.Error(), "fast_mode") {
		t.Errorf("a case added to the decoders only: check says %v", err)
	}
}

// TestDecodeAgreesWithEncodingJSON holds every decoded field to encoding/json, a witness that reads
// the same tags independently: a value with every field set is marshalled by encoding/json, and
// decoding the line must give the value back (the bytes kept verbatim aside).
func TestDecodeAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	system := func(sub string, m any) any {
		reflect.ValueOf(m).Elem().FieldByName("SystemHeader").FieldByName("Subtype").SetString(sub)
		return m
	}
	for _, tc := range []struct{ typ, sub string }{
		{TypeSystem, SubtypeInit}, {TypeSystem, SubtypeStatus}, {TypeSystem, SubtypeAPIRetry},
		{TypeSystem, SubtypeCompactBoundary}, {TypeSystem, SubtypeTaskProgress}, {TypeSystem, SubtypeThinkingTokens},
		{TypeSystem, SubtypePermissionDenied}, {TypeSystem, SubtypeInformational}, {TypeSystem, SubtypeNotification},
		{TypeSystem, SubtypeHookResponse}, {TypeAssistant, ""}, {TypeUser, ""}, {TypeResult, SubtypeSuccess},
		{TypeStreamEvent, ""}, {TypeControlCancelRequest, ""}, {TypeRateLimitEvent, ""}, {TypeCommandLifecycle, ""},
		{"some_new_type", ""},
	} {
		probe := mustDecode(t, `{"type":"`+tc.typ+`","subtype":"`+tc.sub+`"}`)
		want := reflect.New(reflect.TypeOf(probe).Elem()).Interface()
		fill(reflect.ValueOf(want).Elem(), 0)
		switch w := want.(type) {
		case *ResultMessage:
			w.Subtype = tc.sub
		case *Unknown:
			w.MessageType, w.Subtype = tc.typ, ""
		default:
			if tc.typ == TypeSystem {
				system(tc.sub, want)
			}
		}
		line := withType(t, tc.typ, want)
		checkRoundTrip(t, line, want, mustDecode(t, string(line)))
	}
	for _, body := range []any{&CanUseTool{}, &HookCallback{}} {
		fill(reflect.ValueOf(body).Elem(), 0)
		sub := RequestCanUseTool
		if _, ok := body.(*HookCallback); ok {
			sub = RequestHookCallback
		}
		req := withType(t, "", body)
		req = append([]byte(`{"subtype":"`+sub+`",`), req[1:]...)
		r := as[*ControlRequest](t, `{"type":"control_request","request_id":"r1","request":`+string(req)+`}`)
		var got any = r.CanUseTool
		if r.HookCallback != nil {
			got = r.HookCallback
		}
		checkRoundTrip(t, req, body, got)
	}
}

// withType marshals v with encoding/json and puts "type":typ first (none when typ is "").
func withType(t *testing.T, typ string, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if typ == "" {
		return b
	}
	return append([]byte(`{"type":"`+typ+`",`), b[1:]...)
}

// checkRoundTrip compares the decoded got with want, after clearing in both what encoding/json does
// not see: the line and the fields keeping bytes verbatim.
func checkRoundTrip(t *testing.T, line []byte, want, got any) {
	t.Helper()
	w, g := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	clearVerbatim(w)
	clearVerbatim(g)
	if !reflect.DeepEqual(w.Interface(), g.Interface()) {
		t.Errorf("%s decoded differently from what encoding/json wrote:\n line %s\n want %+v\n got  %+v",
			w.Type().Name(), line, w.Interface(), g.Interface())
	}
}

var rawType = reflect.TypeFor[json.RawMessage]()

// fill sets every exported field of v that encoding/json writes to a value that is not zero and,
// but for booleans, differs from every other field's. depth bounds the recursion of content within
// content.
func fill(v reflect.Value, depth int) {
	(&filler{}).fill(v, depth)
}

// filler counts the values it has set, to make each one different.
type filler struct{ n int }

func (fl *filler) fill(v reflect.Value, depth int) {
	fl.n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("v" + strconv.Itoa(fl.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(int64(fl.n))
	case reflect.Float64:
		v.SetFloat(float64(fl.n) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fl.fill(v.Elem(), depth+1)
	case reflect.Slice:
		fl.fillSlice(v, depth)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fl.fill(e, depth+1)
		m.SetMapIndex(reflect.ValueOf("k"), e)
		v.Set(m)
	case reflect.Struct:
		fl.fillStruct(v, depth)
	}
}

func (fl *filler) fillSlice(v reflect.Value, depth int) {
	if v.Type() == rawType {
		v.SetBytes([]byte(`{"k":[1,"x",{"n":null}]}`))
		return
	}
	s := reflect.MakeSlice(v.Type(), 2, 2)
	for i := range 2 {
		fl.fill(s.Index(i), depth+1)
	}
	v.Set(s)
}

func (fl *filler) fillStruct(v reflect.Value, depth int) {
	if c, ok := v.Addr().Interface().(*Content); ok {
		// Content is written either way, never both: blocks near the top, text below.
		if depth < 3 {
			c.Blocks = []ContentBlock{{}}
			fl.fill(reflect.ValueOf(&c.Blocks[0]).Elem(), depth+1)
		} else {
			c.Text = "v-content"
		}
		return
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		if depth > 4 && (f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Slice && f.Type != rawType) {
			continue
		}
		fl.fill(v.Field(i), depth)
	}
}

// clearVerbatim zeroes, through v, the line a message keeps and the fields tagged json:"-" that
// keep bytes verbatim.
func clearVerbatim(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			clearVerbatim(v.Elem())
		}
	case reflect.Slice:
		if v.Type() != rawType {
			for i := range v.Len() {
				clearVerbatim(v.Index(i))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			switch {
			case f.Type == reflect.TypeFor[line]():
				// Unexported: set through its address.
				reflect.NewAt(f.Type, unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem().Set(reflect.Zero(f.Type))
			case f.IsExported() && f.Tag.Get("json") == "-" && f.Type == rawType:
				v.Field(i).SetBytes(nil)
			case f.IsExported():
				clearVerbatim(v.Field(i))
			}
		}
	}
}
