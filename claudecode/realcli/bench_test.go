package realcli

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// Each operation here takes a real CLI about a second (cold) or a tenth of one (warm); run with a
// fixed count, for example: go test ./claudecode/realcli -run '^$' -bench . -benchtime 5x

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return float64(m) / float64(time.Millisecond)
}

// BenchmarkColdStart measures a new CLI process from spawn to its first system/init (the first
// prompt is sent right after spawn), reported as the median in ms/op; ns/op covers spawn to the
// first result.
func BenchmarkColdStart(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var inits []time.Duration
	for b.Loop() {
		h := clitest.New(b, clitest.Options{})
		h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Cold.")))
		msgs := h.RunTurn(ctx, "Hello.")
		if r, ok := msgs[len(msgs)-1].(*claudecode.ResultMessage); !ok || r.IsError {
			b.Fatalf("turn failed: %v", msgs[len(msgs)-1])
		}
		inits = append(inits, h.ColdStart())
		b.StopTimer()
		h.Close()
		b.StartTimer()
	}
	b.ReportMetric(median(inits), "ms/op")
}

// BenchmarkWarmTurn measures one more text turn in a running CLI process, from sending the prompt
// to its result, reported as the median in ms/op.
func BenchmarkWarmTurn(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	h := clitest.New(b, clitest.Options{})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Warm-up.")))
	h.RunTurn(ctx, "Warm up.")
	var turns []time.Duration
	for b.Loop() {
		h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Warm.")))
		began := time.Now()
		msgs := h.RunTurn(ctx, "Again.")
		turns = append(turns, time.Since(began))
		if r, ok := msgs[len(msgs)-1].(*claudecode.ResultMessage); !ok || r.IsError {
			b.Fatalf("turn failed: %v", msgs[len(msgs)-1])
		}
	}
	b.ReportMetric(median(turns), "ms/op")
}
