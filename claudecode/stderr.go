package claudecode

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
)

// ansiEscape matches terminal escape sequences: CSI (colours, cursor), OSC (titles, links) and
// two-byte escapes.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()*+][0-~]|\x1b[@-Z\\-_]`)

// stripANSI removes terminal escape sequences and carriage returns.
func stripANSI(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiEscape.ReplaceAllString(s, "")
	}
	return strings.ReplaceAll(s, "\r", "")
}

// stderrRing keeps the last lines of the CLI's stderr, within a line count and a byte budget.
type stderrRing struct {
	mu       sync.Mutex
	lines    []string
	size     int
	maxLines int
	maxBytes int
	secrets  []string
}

func newStderrRing(maxLines, maxBytes int, secrets []string) *stderrRing {
	return &stderrRing{maxLines: maxLines, maxBytes: maxBytes, secrets: secrets}
}

func (r *stderrRing) add(line string) {
	line = stripANSI(line)
	for _, s := range r.secrets {
		line = strings.ReplaceAll(line, s, Redacted)
	}
	if strings.TrimSpace(line) == "" {
		return
	}
	if len(line) > r.maxBytes {
		line = line[:r.maxBytes]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	r.size += len(line)
	drop := 0
	for len(r.lines)-drop > r.maxLines || r.size > r.maxBytes {
		r.size -= len(r.lines[drop])
		drop++
	}
	if drop > 0 {
		n := copy(r.lines, r.lines[drop:])
		clear(r.lines[n:])
		r.lines = r.lines[:n]
	}
}

// snapshot returns a copy of the kept lines, oldest first.
func (r *stderrRing) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// maxStderrLine is the longest stderr line kept; the rest of a longer line is dropped.
const maxStderrLine = 4 << 10

// consume reads rd to its end, one line at a time, into the ring. Lines longer than maxStderrLine are
// cut; memory stays bounded whatever the CLI writes.
func (r *stderrRing) consume(rd io.Reader) {
	br := bufio.NewReaderSize(rd, maxStderrLine)
	var cur []byte
	skipping := false
	for {
		frag, err := br.ReadSlice('\n')
		if !skipping {
			cur = append(cur, frag...)
		}
		switch {
		case err == nil:
			if !skipping {
				r.add(string(bytes.TrimRight(cur, "\r\n")))
			}
			cur, skipping = cur[:0], false
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping && len(cur) >= maxStderrLine {
				r.add(string(cur[:maxStderrLine]))
				cur, skipping = cur[:0], true
			}
		default:
			if !skipping && len(cur) > 0 {
				r.add(string(cur))
			}
			return
		}
	}
}
