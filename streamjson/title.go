package streamjson

import (
	"path"
	"strings"
	"unicode/utf8"
)

// maxTitleCode is how many bytes of a command or pattern a tool title quotes.
const maxTitleCode = 80

// codeSpan quotes s as inline code for a title, shortened to maxTitleCode bytes.
func codeSpan(s string) string {
	if len(s) > maxTitleCode {
		cut := maxTitleCode
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return "`" + s + "`"
}

// firstLine returns s up to its first line break, marking that more followed.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// baseName is the last element of a slash-separated path, or the path itself when it has none.
func baseName(p string) string {
	if p == "" {
		return ""
	}
	return path.Base(p)
}

// stripANSI removes terminal escape sequences (CSI "ESC [ … final" and two-byte "ESC x") from s.
func stripANSI(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j // skip the final byte too
			continue
		}
		i++ // ESC and the byte after it
	}
	return b.String()
}
