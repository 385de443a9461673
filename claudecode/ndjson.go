package claudecode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/drover-run/drover/claudecode/internal/jsonscan"
)

// readerBufferSize is the size of the bufio.Reader under Reader; lines longer than this are assembled
// in a separate buffer.
const readerBufferSize = 64 << 10

// maxRetainedBuffer is the largest assembly buffer a Reader keeps between lines; a larger one (left by
// a huge line) is dropped so that one big tool result does not pin its memory for the whole session.
const maxRetainedBuffer = 4 << 20

// Reader reads newline-delimited JSON with no limit on the length of a line. Lines end with "\n" or
// "\r\n"; a last line without a terminator counts; blank lines are skipped. A Reader is not safe for
// concurrent use.
type Reader struct {
	br    *bufio.Reader
	buf   []byte
	line  int64
	dec   jsonscan.Decoder // reused from line to line, with a table of repeated values
	views views            // messages reused by ReadMessageView
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	rd := &Reader{br: bufio.NewReaderSize(r, readerBufferSize)}
	rd.dec.Reset(nil, new(jsonscan.Names))
	return rd
}

// ReadLine returns the next non-blank line without its terminator. The returned slice is only valid
// until the next call to ReadLine or ReadMessage: copy it to keep it. At the end of the input it
// returns io.EOF; other errors come from the underlying reader.
func (r *Reader) ReadLine() ([]byte, error) {
	for {
		b, err := r.readRaw()
		if err != nil {
			return nil, err
		}
		r.line++
		b = bytes.TrimRight(b, "\r\n")
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		return b, nil
	}
}

// Line returns the 1-based number of the line last returned (blank lines count).
func (r *Reader) Line() int64 { return r.line }

// ReadMessage reads and decodes the next line. A line that does not decode comes back as a
// *Malformed message with a nil error, and the next call carries on with the next line; the error is
// only for the end of input (io.EOF) or a read failure. The message owns its bytes: the line is
// copied once, or not at all when it was assembled in a buffer of its own.
func (r *Reader) ReadMessage() (Message, error) {
	return r.readMessage(true)
}

// ReadMessageView is ReadMessage for a caller that is done with each message before it reads the
// next one, such as a converter of transcripts: neither the line nor the message is allocated anew, so
// the message, its Raw and its json.RawMessage fields are only valid until the next call to the Reader.
// The strings, slices and maps it holds are its own and stay valid. A *Malformed message owns its
// bytes.
func (r *Reader) ReadMessageView() (Message, error) {
	return r.readMessage(false)
}

func (r *Reader) readMessage(own bool) (Message, error) {
	b, err := r.ReadLine()
	if err != nil {
		return nil, err
	}
	typ, sub, isObject := probe(b)
	if !isObject {
		_, err := Decode(b) // for its error
		return newMalformed(b, r.line, err), nil
	}
	raw := b
	switch {
	case !own:
	case r.owned(b):
		r.buf = nil // the message takes the assembled line; no copy
	default:
		raw = append([]byte(nil), b...)
	}
	var v *views
	if !own {
		v = &r.views
	}
	m, err := decodeOwned(&r.dec, raw, typ, sub, v)
	if err != nil {
		return newMalformed(b, r.line, err), nil
	}
	return m, nil
}

// owned reports whether b lies in the Reader's own assembly buffer (rather than in bufio's).
func (r *Reader) owned(b []byte) bool {
	return len(b) > 0 && len(r.buf) > 0 && &b[0] == &r.buf[0]
}

// readRaw returns the next physical line including its terminator.
func (r *Reader) readRaw() ([]byte, error) {
	if cap(r.buf) > maxRetainedBuffer {
		r.buf = nil
	}
	r.buf = r.buf[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(r.buf) == 0 {
				return frag, nil // valid until the next read, as documented
			}
			r.buf = append(r.buf, frag...)
			return r.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.buf = append(r.buf, frag...)
		case errors.Is(err, io.EOF):
			r.buf = append(r.buf, frag...)
			if len(r.buf) > 0 {
				return r.buf, nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// newMalformed builds a Malformed message for line n, keeping a copy of its bytes.
func newMalformed(b []byte, n int64, err error) *Malformed {
	return &Malformed{line: line{raw: append([]byte(nil), b...)}, Line: n, Err: &LineError{Line: n, Prefix: prefix(b), Err: err}}
}

// LineError is the error of a Malformed message: which line, how it starts, and why it failed.
type LineError struct {
	Line   int64
	Prefix string // at most the first 64 bytes of the line
	Err    error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d (%q): %v", e.Line, e.Prefix, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

func prefix(b []byte) string {
	const n = 64
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// Writer writes newline-delimited JSON. It is safe for concurrent use: each call writes one whole line
// with a single Write to the underlying writer, so lines never interleave.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	onWrite func([]byte) // called with each line written, under mu
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteLine writes line followed by "\n". line must be one JSON value on one line.
func (w *Writer) WriteLine(line []byte) error {
	if bytes.IndexByte(line, '\n') >= 0 {
		return errors.New("writing line: line contains a newline")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(append(w.buf[:0], line...), '\n')
	_, err := w.w.Write(w.buf)
	if err == nil && w.onWrite != nil {
		w.onWrite(w.buf[:len(w.buf)-1])
	}
	if cap(w.buf) > maxRetainedBuffer {
		w.buf = nil
	}
	if err != nil {
		return fmt.Errorf("writing line: %w", err)
	}
	return nil
}
