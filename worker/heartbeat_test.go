package worker

import (
	"testing"
	"time"

	"github.com/drover-run/drover/engine"
)

// The host's worker sends each turn's heartbeat to Temporal as often as the engine beats, not
// at the SDK's default of 0.8 of the heartbeat timeout, which leaves a loaded host 2 s of slack
// before Temporal times a live turn out.
func TestHostWorkerSendsEveryHeartbeat(t *testing.T) {
	for _, c := range []struct {
		beat, want time.Duration
	}{
		{0, engine.DefaultHeartbeatInterval},
		{500 * time.Millisecond, 500 * time.Millisecond},
	} {
		o := hostWorkerOptions(3, c.beat)
		if o.MaxHeartbeatThrottleInterval != c.want {
			t.Errorf("beat %s: heartbeats are sent at most every %s, want %s", c.beat, o.MaxHeartbeatThrottleInterval, c.want)
		}
		if o.MaxConcurrentActivityExecutionSize != 3 {
			t.Errorf("beat %s: %d turns at once, want 3", c.beat, o.MaxConcurrentActivityExecutionSize)
		}
	}
}
