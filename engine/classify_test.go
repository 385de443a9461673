package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// The limits of the recorded CLI transcripts (claudecode/realcli limits tests), classified from
// the events the adapter makes of them, turn by turn, the way the executor sees them.
func TestClassifyRecordedLimits(t *testing.T) {
	t.Parallel()
	type hit struct {
		reason    task.WaitReason
		limitType string
		reset     bool
	}
	for name, want := range map[string][]*hit{
		"usage-limit-five-hour":  {nil, nil, {task.WaitUsageLimit, "five_hour", true}, {task.WaitUsageLimit, "five_hour", true}, nil},
		"usage-limit-seven-day":  {{task.WaitUsageLimit, "seven_day", true}, {task.WaitRateLimit, "", true}, nil},
		"usage-limit-mid-turn":   {{task.WaitUsageLimit, "five_hour", true}},
		"spend-cap-subscription": {{task.WaitSpendCap, "overage", false}, nil},
		"spend-cap-api-key":      {{task.WaitSpendCap, "", false}, nil, nil, nil},
		"rate-limit-api-key":     {nil, nil, {task.WaitRateLimit, "", true}, {task.WaitRateLimit, "", true}, {task.WaitRateLimit, "", true}, nil},
		"overloaded":             {nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "transcripts", name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := streamjson.Normalize(bytes.NewReader(raw), &out); err != nil {
				t.Fatal(err)
			}
			var got []*hit
			var info *events.ErrorInfo
			var limit *events.RateLimit
			var retry time.Duration
			dec := json.NewDecoder(&out)
			for dec.More() {
				var ev events.AgentEvent
				if err := dec.Decode(&ev); err != nil {
					t.Fatal(err)
				}
				switch ev.Type {
				case events.TypeError:
					info = ev.Error
				case events.TypeRateLimit:
					if ev.RateLimit.Source == events.RateLimitSourceEvent || ev.RateLimit.Source == events.RateLimitSourceAPIError {
						limit = nil
						if ev.RateLimit.Status == "rejected" {
							limit = ev.RateLimit
						}
					}
					if ev.RateLimit.RetryDelayMS > 0 {
						retry = time.Duration(ev.RateLimit.RetryDelayMS) * time.Millisecond
					}
				case events.TypeComplete:
					if ev.ParentToolCallID != "" {
						continue
					}
					if h, ok := classifyLimit(info, limit, retry, time.Minute, time.Now()); ok {
						got = append(got, &hit{h.reason, h.limitType, !h.resetsAt.IsZero()})
					} else {
						got = append(got, nil)
					}
					info, retry = nil, 0
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d turns, want %d: %v", len(got), len(want), got)
			}
			for i := range want {
				if (got[i] == nil) != (want[i] == nil) || (got[i] != nil && *got[i] != *want[i]) {
					t.Errorf("turn %d: got %+v, want %+v", i+1, got[i], want[i])
				}
			}
		})
	}
}
