package offlinemodel

import (
	"math"
	"slices"
	"testing"
)

func TestPriceCostMatchesTheCLI(t *testing.T) {
	t.Parallel()
	// Each figure is a costUSD the pinned CLI reported for that usage.
	cases := []struct {
		model string
		u     Usage
		want  float64
	}{
		// From the recorded transcripts.
		{"claude-opus-5-5", Usage{InputTokens: 100, OutputTokens: 40, CacheReadInputTokens: 10, CacheCreationInputTokens: 20}, 0.001302},
		{"claude-opus-5-5", Usage{InputTokens: 12315, OutputTokens: 2}, 0.0493},
		{"claude-opus-5-5", Usage{InputTokens: 600, OutputTokens: 240, CacheReadInputTokens: 60, CacheCreationInputTokens: 120}, 0.007812},
		// From runs with --model.
		{"claude-opus-5-5", Usage{CacheReadInputTokens: 100000}, 0.02},
		{"claude-opus-5-5", Usage{CacheCreationInputTokens: 100000}, 0.5},
		{"claude-sonnet-5-5", Usage{CacheReadInputTokens: 100000}, 0.01},
		{"claude-fable-5-1", Usage{CacheReadInputTokens: 100000}, 0.025},
		{"claude-3-5-haiku-20241022", Usage{InputTokens: 150000, OutputTokens: 10}, 0.12004},
		{"claude-opus-4-7", Usage{InputTokens: 150000, OutputTokens: 10}, 0.75025},
		// claude-haiku-5-5 switches to its long-prompt rates above 100,000
		// prompt tokens, cache tokens included.
		{"claude-haiku-5-5", Usage{InputTokens: 100000}, 0.01},
		{"claude-haiku-5-5", Usage{InputTokens: 150000, OutputTokens: 10}, 0.075025},
		{"claude-haiku-5-5", Usage{InputTokens: 1, CacheReadInputTokens: 150000}, 0.0075005},
		{"claude-haiku-5-5", Usage{InputTokens: 60000, CacheReadInputTokens: 40000, CacheCreationInputTokens: 1, OutputTokens: 1000}, 0.034500625},
	}
	for _, tc := range cases {
		m, ok := BuiltinModel(tc.model)
		if !ok {
			t.Fatalf("%s unknown", tc.model)
		}
		if got := m.Price.Cost(tc.u); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s %+v: %v, want %v", tc.model, tc.u, got, tc.want)
		}
	}
}

func TestBuiltinModels(t *testing.T) {
	t.Parallel()
	ids := BuiltinModels()
	if len(ids) < 30 || !slices.Contains(ids, DefaultModel) || !slices.IsSorted(ids) {
		t.Errorf("built-in models %v", ids)
	}
	for _, id := range ids {
		m, _ := BuiltinModel(id)
		if m.Price.Input <= 0 || m.Price.Output <= m.Price.Input || m.Price.CacheRead <= 0 || m.Price.CacheWrite <= m.Price.Input || m.MaxOutputTokens < 8192 {
			t.Errorf("%s: %+v", id, m)
		}
	}
	if _, ok := BuiltinModel("claude-nonexistent-9"); ok {
		t.Error("an unknown model is built in")
	}
}
