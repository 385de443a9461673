package wiregen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/types_decode.golden")

func sample(t *testing.T) []File {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "types.go"))
	if err != nil {
		t.Fatal(err)
	}
	return []File{{Name: "types.go", Src: src}}
}

// TestGenerateSample generates the decoders of a small type set holding every kind of field, and
// compares them with the golden file (rewritten by -update).
func TestGenerateSample(t *testing.T) {
	got, err := Generate(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "types_decode.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if err := Diff(golden, got, want); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"func (m *Event) decode(", "func (m *Shadow) decode(", "func (m *Item) decode(", // every tagged type…
		`case "kind":` + "\n\t\t\td.Name(&m.Header.Kind)", // …with the members of the header it embeds,
		`case "id":` + "\n\t\t\td.Int(&m.ID)",             // where its own field hides the header's
		`case "Plain":`,                                   // a tag without a name: the field's name
		"if m.keep() {\n\t\tm.Raw = d.Since(start)",       // a verbatim object kept on a condition
		"m.Note = decodeNew(d, (*Note).decode)",           // a pointer to a type that reads any value
		"m.Opt = decodePtr(d, m.Opt, (*Item).decode)",
		"m.ByName = decodeItemMap(d, m.ByName)", "func decodeItemMap(d *jsonscan.Decoder, old map[string]Item) map[string]Item {",
		"m.Text.decode(d)",
	} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("generated code lacks %q", s)
		}
	}
	for _, s := range []string{"*Header) decode", `"-"`, "Hidden", "secret", "*Text) decode"} {
		if bytes.Contains(got, []byte(s)) {
			t.Errorf("generated code holds %q", s)
		}
	}
}

// TestDiffFailsOnOneSide: a field added to the types only, or a case added to the decoders only,
// makes the checked-in file differ from what its sources generate.
func TestDiffFailsOnOneSide(t *testing.T) {
	files := sample(t)
	checkedIn, err := Generate(files)
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Replace(files[0].Src, []byte("\tHeader\n"), []byte("\tHeader\n\tLevel string `json:\"level\"`\n"), 1)
	if bytes.Equal(src, files[0].Src) {
		t.Fatal("testdata/types.go: Event's header not found")
	}
	regenerated, err := Generate([]File{{Name: "types.go", Src: src}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Diff("types_decode.go", checkedIn, regenerated); err == nil || !strings.Contains(err.Error(), `level`) {
		t.Errorf("field added to a type only: Diff = %v", err)
	}
	edited := bytes.Replace(checkedIn, []byte("\t\tcase \"count\":\n"), []byte("\t\tcase \"level\":\n\t\t\td.Skip()\n\t\tcase \"count\":\n"), 1)
	if err := Diff("types_decode.go", edited, checkedIn); err == nil || !strings.Contains(err.Error(), `level`) {
		t.Errorf("case added to the decoders only: Diff = %v", err)
	}
}

// TestGenerateRefuses: what the generator cannot read exactly is an error naming the field.
func TestGenerateRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"A string `json:\"a\"`\nB int", "T.B: no json tag"},
		{"A int `json:\"a\"`", "T.A: no decoder for type int"},
		{"A int64 `json:\"a\" wire:\"text\"`", `T.A: wire:"text" on a int64`},
		{"A string `json:\"a\" wire:\"fast\"`", `T.A: unknown wire option "fast"`},
		{"A json.RawMessage `json:\"a\" wire:\"verbatim\"`", `T.A: wire:"verbatim" needs json:"-"`},
		{"A string `json:\"-\" wire:\"verbatim\"`", `T.A: wire:"verbatim" needs a json.RawMessage`},
		{"A json.RawMessage `json:\"-\" wire:\"if=keep\"`", `T.A: wire:"if=…" needs verbatim`},
		{"A string `json:\"a\"`\nB string `json:\"a\"`", `T: fields A and B both read member "a"`},
		{"A json.RawMessage `json:\"-\" wire:\"verbatim\"`\nB json.RawMessage `json:\"-\" wire:\"verbatim\"`", "T: two verbatim fields"},
		{"A []int64 `json:\"a\"`", "T.A: no decoder for type []int64"},
	} {
		src := "package p\n\nimport \"encoding/json\"\n\nvar _ json.RawMessage\n\ntype T struct {\n" + tc.body + "\n}\n"
		_, err := Generate([]File{{Name: "t.go", Src: []byte(src)}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs([]string{"-o", "out.go", "a.go", "b.go"})
	if err != nil || a.Output != "out.go" || strings.Join(a.Sources, ",") != "a.go,b.go" {
		t.Errorf("ParseArgs = %+v, %v", a, err)
	}
	for _, args := range [][]string{nil, {"a.go"}, {"-o", "out.go"}, {"-x"}} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) accepted", args)
		}
	}
}
