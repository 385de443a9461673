package claudecode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader) []string {
	t.Helper()
	rd := NewReader(r)
	var out []string
	for {
		l, err := rd.ReadLine()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(l))
	}
}

func TestReaderLines(t *testing.T) {
	t.Parallel()
	in := "{\"a\":1}\r\n\n   \n{\"b\":2}\n\r\n{\"c\":3}"
	want := []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(in),
		"one byte": iotest.OneByteReader(strings.NewReader(in)),
		"half":     iotest.HalfReader(strings.NewReader(in)),
	} {
		if got := readAll(t, r); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

func TestReaderLineNumbers(t *testing.T) {
	t.Parallel()
	rd := NewReader(strings.NewReader("\n{\"type\":\"x\"}\n\nnot json\n{\"type\":\"control_cancel_request\",\"request_id\":\"r\"}\n"))
	m, err := rd.ReadMessage()
	if err != nil || rd.Line() != 2 {
		t.Fatalf("first: %T %v line %d", m, err, rd.Line())
	}
	m, err = rd.ReadMessage()
	mf, ok := m.(*Malformed)
	if err != nil || !ok {
		t.Fatalf("second: %T %v, want *Malformed", m, err)
	}
	var le *LineError
	if mf.Line != 4 || string(mf.Raw()) != "not json" || !errors.As(mf.Err, &le) || le.Line != 4 || le.Prefix != "not json" {
		t.Errorf("malformed = line %d raw %q err %v", mf.Line, mf.Raw(), mf.Err)
	}
	// It carries on after the bad line.
	m, err = rd.ReadMessage()
	if _, ok := m.(*ControlCancelRequest); err != nil || !ok {
		t.Fatalf("third: %T %v", m, err)
	}
	if _, err := rd.ReadMessage(); !errors.Is(err, io.EOF) {
		t.Errorf("end: %v, want io.EOF", err)
	}
}

func TestReaderHugeLine(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	big := make([]byte, 0, size+200)
	big = append(big, `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"`...)
	for len(big) < size {
		big = append(big, "abcdefghijklmnopqrstuvwxyz0123456789"...)
	}
	big = append(big, `"}]}}`...)
	in := io.MultiReader(strings.NewReader(`{"type":"control_cancel_request","request_id":"a"}`+"\n"),
		bytes.NewReader(big), strings.NewReader("\n"+`{"type":"control_cancel_request","request_id":"b"}`))
	rd := NewReader(in)
	var got []Message
	for {
		m, err := rd.ReadMessage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("got %d messages, want 3", len(got))
	}
	u, ok := got[1].(*UserMessage)
	if !ok {
		t.Fatalf("middle message is %T: %v", got[1], got[1])
	}
	if n := len(u.Message.Content.Blocks[0].Content.Text); n < size-200 {
		t.Errorf("tool result is %d bytes, want about %d", n, size)
	}
	if !bytes.Equal(u.Raw(), big) {
		t.Error("Raw of the huge line differs from the input")
	}
	if c := got[2].(*ControlCancelRequest); c.RequestID != "b" {
		t.Errorf("last = %+v", c)
	}
}

// errAfter returns data then a non-EOF error.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, e.err
	}
	return n, err
}

func TestReaderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	rd := NewReader(&errAfter{r: strings.NewReader("{\"a\":1}\n{\"partial"), err: boom})
	if l, err := rd.ReadLine(); err != nil || string(l) != `{"a":1}` {
		t.Fatalf("first = %q %v", l, err)
	}
	if _, err := rd.ReadLine(); !errors.Is(err, boom) {
		t.Fatalf("second error = %v, want boom", err)
	}
}

func TestWriterConcurrent(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	w := NewWriter(pw)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for j := range each {
				line := fmt.Sprintf(`{"w":%d,"j":%d,"pad":"%s"}`, i, j, strings.Repeat("x", 5000+j))
				if err := w.WriteLine([]byte(line)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); pw.Close() }()
	rd := NewReader(pr)
	n := 0
	for {
		m, err := rd.ReadMessage()
		if errors.Is(err, io.EOF) {
			break
		}
		if _, ok := m.(*Malformed); ok {
			t.Fatalf("interleaved line: %.100s", m.Raw())
		}
		n++
	}
	if n != writers*each {
		t.Errorf("read %d lines, want %d", n, writers*each)
	}
	if err := w.WriteLine([]byte("a\nb")); err == nil {
		t.Error("a line with a newline was written")
	}
}
