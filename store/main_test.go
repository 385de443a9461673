package store_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogger returns a logger that writes to the test's log and, if buf is not nil, to buf.
func testLogger(t testing.TB, buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t: t, buf: buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct {
	t   testing.TB
	buf *syncBuffer
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	if w.buf != nil {
		w.buf.Write(p)
	}
	return len(p), nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
