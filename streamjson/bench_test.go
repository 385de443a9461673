package streamjson

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

const benchTranscriptSize = 50 << 20

// benchUnit is one copy of every recorded session; benchData repeats it.
var benchUnit = sync.OnceValues(func() ([]byte, error) {
	paths, err := filepath.Glob("testdata/recorded/*.jsonl")
	if err != nil || len(paths) == 0 {
		return nil, errors.Join(err, errors.New("no recorded transcripts"))
	}
	var one bytes.Buffer
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		one.Write(bytes.TrimRight(b, "\n"))
		one.WriteByte('\n')
	}
	return one.Bytes(), nil
})

var benchData = sync.OnceValues(func() ([]byte, error) {
	one, err := benchUnit()
	if err != nil {
		return nil, err
	}
	// Realistic lines: every recorded session, back to back, until the size is reached.
	out := make([]byte, 0, benchTranscriptSize+len(one))
	for len(out) < benchTranscriptSize {
		out = append(out, one...)
	}
	return out, nil
})

// BenchmarkAdapter measures decoding plus the adapter over a transcript of ≥ 50 MB built from the
// recorded sessions. "decode" is the NDJSON reader and Decode alone, "decode-view" the same with
// ReadMessageView (as Normalize reads), "adapter" adds the adapter (events counted, not encoded),
// "adapter-only" runs the adapter over the same messages decoded in advance, and "normalize" adds
// JSON encoding of the events. adapter-only against decode is the adapter's cost relative to
// decoding.
func BenchmarkAdapter(b *testing.B) {
	data, err := benchData()
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Count(data, []byte("\n"))

	run := func(b *testing.B, each func(claudecode.Message), done func() int) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		b.ResetTimer()
		for b.Loop() {
			rd := claudecode.NewReader(bytes.NewReader(data))
			for {
				m, err := rd.ReadMessage()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				each(m)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N)/float64(lines), "allocs/line")
		if done != nil {
			b.ReportMetric(float64(done())/b.Elapsed().Seconds(), "events/s")
		}
	}

	b.Run("decode", func(b *testing.B) {
		run(b, func(claudecode.Message) {}, nil)
	})
	b.Run("decode-view", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			rd := claudecode.NewReader(bytes.NewReader(data))
			for {
				if _, err := rd.ReadMessageView(); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("adapter", func(b *testing.B) {
		n := 0
		a, err := New(Config{Sink: SinkFunc(func(events.AgentEvent) { n++ }), PartialMessages: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, a.Handle, func() int { return n })
	})
	b.Run("adapter-only", func(b *testing.B) {
		one, err := benchUnit()
		if err != nil {
			b.Fatal(err)
		}
		var msgs []claudecode.Message
		rd := claudecode.NewReader(bytes.NewReader(one))
		for {
			m, err := rd.ReadMessage()
			if err != nil {
				break
			}
			msgs = append(msgs, m)
		}
		reps := (len(data) + len(one) - 1) / len(one)
		n := 0
		a, err := New(Config{Sink: SinkFunc(func(events.AgentEvent) { n++ }), PartialMessages: true})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(reps * len(one)))
		b.ReportAllocs()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		b.ResetTimer()
		for b.Loop() {
			for range reps {
				for _, m := range msgs {
					a.Handle(m)
				}
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N)/float64(reps*len(msgs)), "allocs/line")
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("normalize", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := Normalize(bytes.NewReader(data), io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
}
