package jsonscan

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeString returns the value of the quoted JSON string q with encoding/json's rules: escapes
// decoded, invalid UTF-8 and unpaired surrogates replaced by U+FFFD. q has been checked.
func decodeString(q []byte) string {
	if len(q) < 2 {
		return ""
	}
	in := q[1 : len(q)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var out strings.Builder // grows without zeroing and hands over its bytes without a copy
	out.Grow(len(in))
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\\')
		run := in
		if i >= 0 {
			run = in[:i]
		}
		writeValidUTF8(&out, run)
		if i < 0 {
			break
		}
		in = in[i:]
		if len(in) < 2 {
			break
		}
		switch in[1] {
		case '"', '\\', '/', '\'':
			out.WriteByte(in[1])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := hex4(in[2:])
			if !ok {
				return out.String() // invalid input: stop
			}
			in = in[6:]
			if utf16.IsSurrogate(r) {
				if len(in) >= 6 && in[0] == '\\' && in[1] == 'u' {
					if r2, ok := hex4(in[2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							in = in[6:]
							out.WriteRune(dec)
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out.WriteRune(r)
			continue
		default:
			return out.String() // invalid escape: stop
		}
		in = in[2:]
	}
	return out.String()
}

// writeValidUTF8 writes run, replacing each invalid byte by U+FFFD.
func writeValidUTF8(out *strings.Builder, run []byte) {
	if utf8.Valid(run) {
		out.Write(run)
		return
	}
	for len(run) > 0 {
		r, size := utf8.DecodeRune(run)
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError)
		} else {
			out.Write(run[:size])
		}
		run = run[size:]
	}
}

// hex4 decodes four hexadecimal digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
