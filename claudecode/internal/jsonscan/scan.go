// Package jsonscan reads JSON text in a single pass: it checks the syntax as it goes, with exactly
// the rules of encoding/json's Valid, and hands the caller each member and value as it meets them, so
// that a caller decodes the fields it wants straight into its own types and skips the rest without
// building anything. Values are never read twice: a skipped value is only checked, a raw value is a
// slice of the input, and a string is copied only when it is kept.
//
// A Decoder never panics on any input. After the first syntax error every method is a no-op and Err
// reports the error.
package jsonscan

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// maxDepth is encoding/json's limit on nesting: deeper input is invalid.
const maxDepth = 10000

// SyntaxError is a JSON syntax error at a byte offset of the input.
type SyntaxError struct {
	Offset int
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.Offset)
}

// Decoder reads one JSON text. The zero value reads nothing; use New or Reset.
type Decoder struct {
	data  []byte
	pos   int
	depth int
	err   error
	key   []byte
	names *Names
	strs  []string // scratch for Strings
}

// New returns a Decoder reading data. The decoder does not copy data: the values of Raw and Key are
// slices of it.
func New(data []byte) *Decoder {
	return &Decoder{data: data}
}

// Reset makes d read data from the start. Names, when not nil, interns the values read with Name.
func (d *Decoder) Reset(data []byte, names *Names) {
	*d = Decoder{data: data, names: names, strs: d.strs[:0]}
}

// Names returns the table given to Reset.
func (d *Decoder) Names() *Names { return d.names }

// Err returns the first syntax error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Key returns the key of the member whose value the decoder stands on, without its quotes and with
// its escapes decoded. It is valid until the next call that moves the decoder.
func (d *Decoder) Key() []byte { return d.key }

// fail records a syntax error at the current position and moves to the end of the input, so that
// every loop of the caller ends.
func (d *Decoder) fail() {
	if d.err == nil {
		d.err = &SyntaxError{Offset: d.pos}
	}
	d.pos = len(d.data)
}

// ws skips white space.
func (d *Decoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value ('{', '[', '"', 't', 'f', 'n', '-' or a digit), or 0
// at the end of the input or after an error.
func (d *Decoder) Peek() byte {
	d.ws()
	if d.err != nil || d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

// Offset returns the position of the decoder in the input: after Peek, where the next value starts.
func (d *Decoder) Offset() int { return d.pos }

// Since returns the input from start (an earlier Offset) to the current position, or nil after an
// error.
func (d *Decoder) Since(start int) []byte {
	if d.err != nil || start > d.pos {
		return nil
	}
	return d.data[start:d.pos]
}

// Rest returns the input from the current position on. The caller may look at it but not move the
// decoder with it.
func (d *Decoder) Rest() []byte { return d.data[d.pos:] }

// End checks that nothing but white space follows the value read.
func (d *Decoder) End() {
	d.ws()
	if d.pos != len(d.data) {
		d.fail()
	}
}

// Object starts reading an object. When the next value is an object with at least one member, it
// returns true with the decoder standing on the first member's value (see Key); the caller must
// consume that value and then call More. Any other value, null included, is checked, skipped, and
// Object returns false; so it does for an empty object.
func (d *Decoder) Object() bool {
	d.ws()
	if d.pos >= len(d.data) {
		d.fail()
		return false
	}
	if d.data[d.pos] != '{' {
		d.Skip()
		return false
	}
	if d.depth >= maxDepth {
		d.fail()
		return false
	}
	d.depth++
	d.pos++
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return false
	}
	return d.member()
}

// More moves to the next member of the object being read: it returns true with the decoder standing
// on the member's value, or false at the end of the object (or after an error).
func (d *Decoder) More() bool {
	d.ws()
	if d.pos >= len(d.data) {
		d.fail()
		return false
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.ws()
		return d.member()
	case '}':
		d.pos++
		d.depth--
		return false
	}
	d.fail()
	return false
}

// member reads `"key" :` and stands on the value.
func (d *Decoder) member() bool {
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		d.fail()
		return false
	}
	end, esc, high, ok := scanString(d.data, d.pos)
	if !ok {
		d.fail()
		return false
	}
	if esc || high && !utf8.Valid(d.data[d.pos+1:end-1]) {
		d.key = []byte(decodeString(d.data[d.pos:end]))
	} else {
		d.key = d.data[d.pos+1 : end-1]
	}
	d.pos = end
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		d.fail()
		return false
	}
	d.pos++
	return true
}

// Array starts reading an array. When the next value is an array with at least one element, it
// returns true with the decoder standing on the first element, which the caller must consume before
// calling ArrayMore. Any other value is checked, skipped, and Array returns false; so it does for an
// empty array.
func (d *Decoder) Array() bool {
	d.ws()
	if d.pos >= len(d.data) {
		d.fail()
		return false
	}
	if d.data[d.pos] != '[' {
		d.Skip()
		return false
	}
	if d.depth >= maxDepth {
		d.fail()
		return false
	}
	d.depth++
	d.pos++
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return false
	}
	return true
}

// ArrayMore moves to the next element of the array being read: true when there is one, false at the
// end of the array (or after an error).
func (d *Decoder) ArrayMore() bool {
	d.ws()
	if d.pos >= len(d.data) {
		d.fail()
		return false
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return true
	case ']':
		d.pos++
		d.depth--
		return false
	}
	d.fail()
	return false
}

// Skip checks and consumes one value of any kind.
func (d *Decoder) Skip() {
	d.ws()
	if d.err != nil {
		return
	}
	end, ok := skipValue(d.data, d.pos, d.depth)
	if !ok {
		d.fail()
		return
	}
	d.pos = end
}

// Raw consumes one value and returns its bytes, a slice of the input (nil after an error).
func (d *Decoder) Raw() []byte {
	d.ws()
	start := d.pos
	d.Skip()
	if d.err != nil {
		return nil
	}
	return d.data[start:d.pos]
}

// Str consumes one value and, when it is a string, stores it in *p. Null and values of other types
// leave *p unchanged, as encoding/json does.
func (d *Decoder) Str(p *string) {
	if s, ok := d.String(); ok {
		*p = s
	}
}

// String consumes one value and returns it when it is a string. Invalid UTF-8 and unpaired surrogates
// become U+FFFD, as in encoding/json.
func (d *Decoder) String() (string, bool) {
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		d.Skip()
		return "", false
	}
	end, esc, high, ok := scanString(d.data, d.pos)
	if !ok {
		d.fail()
		return "", false
	}
	q := d.data[d.pos:end]
	d.pos = end
	if !esc && (!high || utf8.Valid(q[1:len(q)-1])) {
		return string(q[1 : len(q)-1]), true
	}
	return decodeString(q), true
}

// Name is Str for values that repeat from line to line (ids, enumerations, tool and model names):
// with the Names given to Reset, each distinct value is allocated once.
func (d *Decoder) Name(p *string) {
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		d.Skip()
		return
	}
	end, esc, high, ok := scanString(d.data, d.pos)
	if !ok {
		d.fail()
		return
	}
	q := d.data[d.pos:end]
	d.pos = end
	if !esc && !high {
		*p = d.names.get(q[1 : len(q)-1])
		return
	}
	*p = decodeString(q)
}

// Bool consumes one value and, when it is true or false, stores it in *p; anything else leaves *p
// unchanged.
func (d *Decoder) Bool(p *bool) {
	d.ws()
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case 't':
			if hasLiteral(d.data, d.pos, "true") {
				d.pos += 4
				*p = true
				return
			}
		case 'f':
			if hasLiteral(d.data, d.pos, "false") {
				d.pos += 5
				*p = false
				return
			}
		}
	}
	d.Skip()
}

// number consumes one value and returns it when it is a number.
func (d *Decoder) number() ([]byte, bool) {
	d.ws()
	if d.pos < len(d.data) {
		if c := d.data[d.pos]; c == '-' || '0' <= c && c <= '9' {
			end, ok := scanNumber(d.data, d.pos)
			if !ok {
				d.fail()
				return nil, false
			}
			num := d.data[d.pos:end]
			d.pos = end
			return num, true
		}
	}
	d.Skip()
	return nil, false
}

// Int consumes one value and, when it is a number that fits an int64 (no fraction, no exponent),
// stores it in *p; anything else leaves *p unchanged, as encoding/json does.
func (d *Decoder) Int(p *int64) {
	num, ok := d.number()
	if !ok {
		return
	}
	if v, ok := parseInt(num); ok {
		*p = v
	}
}

// IntPtr is Int for an optional field: a number sets *p to a new value, null sets it to nil.
func (d *Decoder) IntPtr(p **int64) {
	if d.Peek() == 'n' {
		d.Skip()
		*p = nil
		return
	}
	var v int64
	num, ok := d.number()
	if !ok {
		return
	}
	if v, ok = parseInt(num); ok {
		*p = &v
	}
}

// Float consumes one value and, when it is a number in float64's range, stores it in *p.
func (d *Decoder) Float(p *float64) {
	num, ok := d.number()
	if !ok {
		return
	}
	if v, ok := parseInt(num); ok && v > -1<<53 && v < 1<<53 && (v != 0 || num[0] != '-') { // -0 keeps its sign
		*p = float64(v)
		return
	}
	if v, err := strconv.ParseFloat(string(num), 64); err == nil {
		*p = v
	}
}

// parseInt parses a JSON number as an int64, failing on fractions, exponents and overflow.
func parseInt(num []byte) (int64, bool) {
	digits := num
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		v, err := strconv.ParseInt(string(num), 10, 64)
		return v, err == nil
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) != len(num) {
		v = -v
	}
	return v, true
}

// Strings consumes one value and, when it is an array, returns its string elements, read as with
// Name (elements of
// other types are ""; an empty array gives an empty, non-nil slice). Null gives nil; other values
// leave old in place, as encoding/json does.
func (d *Decoder) Strings(old []string) []string {
	switch d.Peek() {
	case 'n':
		d.Skip()
		return nil
	case '[':
	default:
		d.Skip()
		return old
	}
	d.strs = d.strs[:0]
	for more := d.Array(); more; more = d.ArrayMore() {
		var s string
		d.Name(&s)
		d.strs = append(d.strs, s)
	}
	out := make([]string, len(d.strs)) // one allocation of the right size
	copy(out, d.strs)
	clear(d.strs)
	return out
}

// Names interns short ASCII strings, so that values repeated from one line to the next are allocated
// once. It holds at most a few thousand values and starts over when full. A nil *Names interns
// nothing. It is not safe for concurrent use.
type Names struct {
	m map[string]string
}

const (
	maxName  = 64   // longer values are not interned
	maxNames = 4096 // values held at most
)

func (n *Names) get(b []byte) string {
	if n == nil || len(b) > maxName {
		return string(b)
	}
	if s, ok := n.m[string(b)]; ok {
		return s
	}
	if n.m == nil {
		n.m = make(map[string]string, 256)
	} else if len(n.m) >= maxNames {
		clear(n.m)
	}
	s := string(b)
	n.m[s] = s
	return s
}

// le64 loads 8 bytes little-endian.
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special reports whether any of the 8 bytes of w is a quote, a backslash or a control byte.
func special(w uint64) bool {
	q := w ^ (ones * '"')
	b := w ^ (ones * '\\')
	zq := (q - ones) &^ q
	zb := (b - ones) &^ b
	ctl := (w - ones*0x20) &^ w
	return (zq|zb|ctl)&highs != 0
}

// scanString checks the string whose opening quote is at data[i] and returns the index just after its
// closing quote, whether it holds escapes, and whether it holds bytes of 0x80 and above.
func scanString(data []byte, i int) (end int, esc, high, ok bool) {
	i++
	n := len(data)
	for i < n {
		if i+8 <= n {
			w := le64(data[i:])
			if !special(w) {
				if w&highs != 0 {
					high = true
				}
				i += 8
				continue
			}
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, esc, high, true
		case c == '\\':
			esc = true
			if i+1 >= n {
				return 0, false, false, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(data[i+2:]); !ok {
					return 0, false, false, false
				}
				i += 6
			default:
				return 0, false, false, false
			}
		case c < 0x20:
			return 0, false, false, false
		default:
			if c >= 0x80 {
				high = true
			}
			i++
		}
	}
	return 0, false, false, false
}

// scanNumber checks the number starting at data[i] and returns the index after it.
func scanNumber(data []byte, i int) (int, bool) {
	n := len(data)
	digits := func() int {
		s := i
		for i < n && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		return i - s
	}
	if data[i] == '-' {
		i++
	}
	if i >= n {
		return 0, false
	}
	if data[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, false
	}
	if i < n && data[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	return i, true
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// skipValue checks the value starting at data[i] (after white space), nested depth levels deep, and
// returns the index after it. Nested containers are tracked on a stack of their opening bytes, not
// by recursion. Each turn of the loop reads one value, then what follows it: the closing brackets
// of the containers it completes, and the comma (and key) before the next value.
func skipValue(data []byte, i, depth int) (int, bool) {
	n := len(data)
	var stackBuf [64]byte
	stack := stackBuf[:0] // '{' or '['
	for {
		// A value is expected at i.
		if i = skipSpace(data, i); i >= n {
			return 0, false
		}
		switch c := data[i]; {
		case c == '"':
			end, _, _, ok := scanString(data, i)
			if !ok {
				return 0, false
			}
			i = end
		case c == '{' || c == '[':
			if depth+len(stack) >= maxDepth {
				return 0, false
			}
			if i = skipSpace(data, i+1); i < n && data[i] == closer(c) {
				i++
				break // an empty container is a complete value
			}
			stack = append(stack, c)
			if c == '{' {
				if i = key(data, i); i < 0 {
					return 0, false
				}
			}
			continue
		case c == '-' || '0' <= c && c <= '9':
			end, ok := scanNumber(data, i)
			if !ok {
				return 0, false
			}
			i = end
		default:
			if i = scanLiteral(data, i); i < 0 {
				return 0, false
			}
		}
		// A value ended: close the containers it completes, or move to the next value.
		for {
			if len(stack) == 0 {
				return i, true
			}
			if i = skipSpace(data, i); i >= n {
				return 0, false
			}
			top, c := stack[len(stack)-1], data[i]
			if c == ',' {
				if i++; top == '{' {
					if i = key(data, skipSpace(data, i)); i < 0 {
						return 0, false
					}
				}
				break
			}
			if c != closer(top) {
				return 0, false
			}
			i++
			stack = stack[:len(stack)-1]
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not white space.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// closer returns the byte that closes a container opened by open ('{' or '[').
func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// scanLiteral checks the true, false or null at data[i] and returns the index after it, or -1.
func scanLiteral(data []byte, i int) int {
	var lit string
	switch data[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	default:
		return -1
	}
	if !hasLiteral(data, i, lit) {
		return -1
	}
	return i + len(lit)
}

// key checks `"key" :` at data[i] and returns the index after the colon, or -1.
func key(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	end, _, _, ok := scanString(data, i)
	if !ok {
		return -1
	}
	for end < len(data) && (data[end] == ' ' || data[end] == '\t' || data[end] == '\n' || data[end] == '\r') {
		end++
	}
	if end >= len(data) || data[end] != ':' {
		return -1
	}
	return end + 1
}

// Valid reports whether data is one JSON value surrounded by optional white space, with exactly the
// rules of encoding/json's Valid.
func Valid(data []byte) bool {
	d := Decoder{data: data}
	d.Skip()
	d.End()
	return d.err == nil
}
