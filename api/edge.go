package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskerr"
)

// What every string a request carries must be: text, without a NUL byte. Postgres stores no
// NUL in text and no invalid UTF-8 at all, and the CLI takes neither in an argument, so such
// input is refused here, naming where it was, rather than failing further in.

// badText says what is wrong with s as text, or "".
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8; send text encoded as UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL byte, which no field takes"
	}
	return ""
}

// textProblem is the 400 answer for a field that is not text.
func textProblem(field, reason string) *taskerr.Error {
	return invalidInput(&task.InvalidError{Field: field, Reason: reason})
}

// checkEdge refuses a request whose path, query or headers are not text: each is named in the
// answer. It runs before any route.
func checkEdge(r *http.Request) *taskerr.Error {
	if why := badText(r.URL.Path); why != "" {
		return textProblem("path", why)
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return textProblem("query", "is not a valid query string ("+err.Error()+")")
	}
	for _, k := range sortedKeys(q) {
		if why := badText(k); why != "" {
			return textProblem("query parameter "+strconv.Quote(strings.ToValidUTF8(k, "?")), why)
		}
		for _, v := range q[k] {
			if why := badText(v); why != "" {
				return textProblem("query parameter "+k, why)
			}
		}
	}
	for _, k := range sortedKeys(r.Header) {
		for _, v := range r.Header[k] {
			if why := badText(v); why != "" {
				return textProblem("header "+k, why)
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkBodyText refuses a body that is not UTF-8, naming the field that holds the bad bytes.
// The JSON decoder would silently replace them.
func checkBodyText(b []byte) *taskerr.Error {
	if utf8.Valid(b) {
		return nil
	}
	return textProblem(fieldAt(b, firstInvalid(b)), "is not valid UTF-8; send text encoded as UTF-8")
}

func firstInvalid(b []byte) int64 {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return int64(i)
		}
		i += n
	}
	return int64(len(b))
}

// frame is one open object or array while fieldAt walks a body.
type frame struct {
	obj     bool
	key     string
	idx     int
	wantKey bool
}

// fieldAt names the field of the JSON body b whose token holds byte offset, as "prompt",
// "attachments[1]" or "answers.q"; "body" when the token is no field's.
func fieldAt(b []byte, offset int64) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []*frame
	path := func() string {
		var sb strings.Builder
		for _, f := range stack {
			switch {
			case f.obj && f.key != "" && sb.Len() > 0:
				sb.WriteString("." + f.key)
			case f.obj:
				sb.WriteString(f.key)
			default:
				fmt.Fprintf(&sb, "[%d]", f.idx)
			}
		}
		if sb.Len() == 0 {
			return "body"
		}
		return sb.String()
	}
	next := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.obj {
			f.wantKey, f.key = true, ""
		} else {
			f.idx++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "body"
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		s, isString := tok.(string)
		isKey := isString && top != nil && top.obj && top.wantKey
		if isKey {
			top.key, top.wantKey = strings.ToValidUTF8(s, "?"), false
		}
		if dec.InputOffset() > offset {
			return path()
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			next()
		default:
			if !isKey {
				next()
			}
		}
	}
}

// nulField names the first string of v (a decoded body) that holds a NUL byte, by its JSON
// name, or returns "".
func nulField(v reflect.Value, path string) string {
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch v.Kind() {
	case reflect.String:
		if strings.IndexByte(v.String(), 0) >= 0 {
			return path
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return nulField(v.Elem(), path)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if f := nulField(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); f != "" {
				return f
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			name := join(k.String())
			if strings.IndexByte(k.String(), 0) >= 0 {
				return name
			}
			if f := nulField(v.MapIndex(k), name); f != "" {
				return f
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" {
				name = sf.Name
			}
			if f := nulField(v.Field(i), join(name)); f != "" {
				return f
			}
		}
	}
	return ""
}
