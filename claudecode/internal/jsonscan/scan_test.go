package jsonscan

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

var seeds = []string{``, ` `, `1`, `-0.5e+3`, `01`, `-`, `1.`, `1e`, `"\u12"`, `"\uD834\uDD1E"`, "\"\x01\"",
	"\"\xff\"", `[1,]`, `{"a":1,}`, `{"a" 1}`, `{,}`, `[[]]`, `{"a":{"b":[true,false,null]}}`, `nul`, `[1 2]`,
	`{"a":"b"} `, ` {"a":"b"}x`, `{"k\u0065y":"v","n":-12.5e3,"i":9007199254740993,"s":["x","\u00e9",""]}`,
	`"a long string of more than eight bytes with a \"quote\" and a \\ backslash"`, "\"tab\there\"",
	`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]},"uuid":"u"}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

// FuzzValid keeps Valid equal to json.Valid.
func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", data, got, want)
		}
	})
}

// FuzzWalk decodes any value with the typed methods of Decoder and compares it with what
// encoding/json makes of the same input: the same acceptance, and the same value.
func FuzzWalk(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want any
		wantErr := json.Unmarshal(data, &want)
		d := New(data)
		got := walk(d)
		d.End()
		if (d.Err() == nil) != (wantErr == nil) {
			t.Fatalf("input %q: decoder error %v, encoding/json error %v", data, d.Err(), wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q: decoded %#v, encoding/json %#v", data, got, want)
		}
	})
}

// walk builds the value at d the way encoding/json builds an any.
func walk(d *Decoder) any {
	switch d.Peek() {
	case '{':
		m := map[string]any{}
		for more := d.Object(); more; more = d.More() {
			k := string(d.Key())
			m[k] = walk(d)
		}
		return m
	case '[':
		a := []any{}
		for more := d.Array(); more; more = d.ArrayMore() {
			a = append(a, walk(d))
		}
		return a
	case '"':
		s, _ := d.String()
		return s
	case 't', 'f':
		var b bool
		d.Bool(&b)
		return b
	case 'n':
		d.Skip()
		return nil
	default:
		var f float64
		d.Float(&f)
		return f
	}
}

// FuzzString keeps String and Name equal to encoding/json's decoding of a string.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\t\"q\"\\ \/"`, `"\u00e9\uD834\uDD1E"`, `"\uD834x"`, `"\uDD1E\uD834"`,
		"\"bad \xff utf8 \xc3\"", `"\uD834\u0041"`, `""`, `"0123456789abcdef\u0041"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		var want string
		if json.Unmarshal(q, &want) != nil || !bytes.HasPrefix(bytes.TrimSpace(q), []byte(`"`)) {
			return
		}
		got, ok := New(q).String()
		if !ok || got != want {
			t.Fatalf("String(%q) = %q, %v; encoding/json says %q", q, got, ok, want)
		}
		var name string
		d := New(q)
		d.names = new(Names)
		d.Name(&name)
		if name != want {
			t.Fatalf("Name(%q) = %q; encoding/json says %q", q, name, want)
		}
	})
}

func TestNumbers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		i    int64
		iok  bool
		fval float64
	}{
		{`0`, 0, true, 0}, {`-0`, 0, true, 0}, {`42`, 42, true, 42}, {`-7`, -7, true, -7},
		{`1.5`, 0, false, 1.5}, {`1e3`, 0, false, 1000}, {`9223372036854775807`, 9223372036854775807, true, 9223372036854775807},
		{`9223372036854775808`, 0, false, 9223372036854775808}, {`-9223372036854775808`, -9223372036854775808, true, -9223372036854775808},
		{`123456789012345678`, 123456789012345678, true, 123456789012345678}, {`-0.0`, 0, false, 0},
	} {
		i := int64(-1)
		New([]byte(c.in)).Int(&i)
		if c.iok && i != c.i || !c.iok && i != -1 {
			t.Errorf("Int(%s) = %d", c.in, i)
		}
		var f float64
		New([]byte(c.in)).Float(&f)
		var want float64
		_ = json.Unmarshal([]byte(c.in), &want)
		if f != want || f != c.fval || math.Signbit(f) != math.Signbit(want) {
			t.Errorf("Float(%s) = %v, want %v", c.in, f, want)
		}
	}
	// Values of other types leave the destination alone.
	for _, in := range []string{`"5"`, `null`, `true`, `[1]`, `{"a":1}`} {
		i, f, b, s := int64(3), 3.5, true, "keep"
		New([]byte(in)).Int(&i)
		New([]byte(in)).Float(&f)
		if in != `true` {
			New([]byte(in)).Bool(&b)
		}
		if in != `"5"` {
			New([]byte(in)).Str(&s)
		}
		if i != 3 || f != 3.5 || !b || s != "keep" {
			t.Errorf("%s changed a field of another type: %d %v %v %q", in, i, f, b, s)
		}
	}
}

func TestRawAndStrings(t *testing.T) {
	t.Parallel()
	d := New([]byte(` {"a" : [ "x", 1, "y" ] , "b": {"c":[null]}, "n": null, "e": []} `))
	var got []string
	var raw, none []byte
	empty := []string{"old"}
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "a":
			got = d.Strings(nil)
		case "b":
			raw = d.Raw()
		case "n":
			none = d.Raw()
		case "e":
			empty = d.Strings(empty)
		}
	}
	d.End()
	if d.Err() != nil || !reflect.DeepEqual(got, []string{"x", "", "y"}) || string(raw) != `{"c":[null]}` ||
		string(none) != "null" || empty == nil || len(empty) != 0 {
		t.Errorf("err %v, strings %q, raw %s, null %s, empty %v", d.Err(), got, raw, none, empty)
	}
}

func TestNamesInterns(t *testing.T) {
	t.Parallel()
	names := new(Names)
	var a, b string
	d := New([]byte(`["Bash","Bash"]`))
	d.names = names
	for more, i := d.Array(), 0; more; more, i = d.ArrayMore(), i+1 {
		if i == 0 {
			d.Name(&a)
		} else {
			d.Name(&b)
		}
	}
	if a != "Bash" || b != "Bash" || len(names.m) != 1 {
		t.Fatalf("names = %v (%q %q)", names.m, a, b)
	}
}

func TestErrorsStop(t *testing.T) {
	t.Parallel()
	d := New([]byte(`{"a":"x","b":tru,"c":"y"}`))
	var a, c string
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "a":
			d.Str(&a)
		case "c":
			d.Str(&c)
		default:
			d.Skip()
		}
	}
	if d.Err() == nil || a != "x" || c != "" {
		t.Errorf("err %v a %q c %q", d.Err(), a, c)
	}
}
