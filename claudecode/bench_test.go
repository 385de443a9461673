package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// benchTranscript is a stdout transcript of at least 50 MB built from representative lines: the seed
// lines (inline, recorded CLI output, testdata/transcripts), a run of stream events, and large tool
// results, in the proportions of a long agentic session.
var benchTranscript = sync.OnceValues(func() ([]byte, int) {
	base := seedLines()
	bigResult := func(n int) []byte {
		body := strings.Repeat(`func main() { fmt.Println(\"hello, world\") }\n\t// a line of a file the agent read\n`, n/80)
		return []byte(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"` +
			body + `","is_error":false}]},"parent_tool_use_id":null,"session_id":"s1","uuid":"u21","tool_use_result":{"stdout":"` +
			body + `","stderr":"","interrupted":false,"isImage":false}}`)
	}
	var deltas [][]byte
	for range 40 {
		deltas = append(deltas, []byte(lineStreamDelta))
	}
	unit := append(append([][]byte{}, base...), deltas...)
	unit = append(unit, bigResult(20_000), bigResult(200_000))

	var buf bytes.Buffer
	lines := 0
	for buf.Len() < 50<<20 {
		for _, l := range unit {
			buf.Write(l)
			buf.WriteByte('\n')
			lines++
		}
	}
	return buf.Bytes(), lines
})

// BenchmarkDecode compares Decode with the json.Unmarshal-into-map baseline on the same lines, and
// measures the NDJSON reader with Decode. Read the ratio of the MB/s columns.
func BenchmarkDecode(b *testing.B) {
	data, n := benchTranscript()
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))

	run := func(b *testing.B, decode func() error) {
		b.SetBytes(int64(len(data)))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for b.Loop() {
			if err := decode(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*n), "allocs/line")
	}

	b.Run("claudecode", func(b *testing.B) {
		run(b, func() error {
			for _, l := range lines {
				if _, err := Decode(l); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("map-baseline", func(b *testing.B) {
		run(b, func() error {
			for _, l := range lines {
				var m map[string]any
				if err := json.Unmarshal(l, &m); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("reader+decode", func(b *testing.B) {
		run(b, func() error {
			rd := NewReader(bytes.NewReader(data))
			for {
				m, err := rd.ReadMessage()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if _, bad := m.(*Malformed); bad {
					return errors.New("malformed line in the bench transcript")
				}
			}
		})
	})
}
