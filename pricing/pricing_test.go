package pricing

import (
	"testing"

	"github.com/drover-run/drover/internal/offlinemodel"
)

// The fake API's ledger prices its answers as the pinned CLI does (checked against the CLI in
// its own tests): every model it knows costs the same here.
func TestPricesAgreeWithTheFakeAPIsLedger(t *testing.T) {
	usages := []Usage{
		{InputTokens: 100, OutputTokens: 40, CacheReadInputTokens: 10, CacheCreationInputTokens: 20},
		{InputTokens: 120_000, OutputTokens: 3_000, CacheReadInputTokens: 5, CacheCreationInputTokens: 7},
		{OutputTokens: 1},
	}
	for _, id := range offlinemodel.BuiltinModels() {
		m, _ := offlinemodel.BuiltinModel(id)
		if _, ok := Of(id); !ok {
			t.Errorf("%s: not in the table", id)
		}
		for _, u := range usages {
			want := m.Price.Cost(offlinemodel.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens),
				CacheReadInputTokens: int(u.CacheReadInputTokens), CacheCreationInputTokens: int(u.CacheCreationInputTokens)})
			if got := Cost(id, u); got != want {
				t.Errorf("%s %+v: %v, the fake bills %v", id, u, got, want)
			}
		}
	}
}

func TestUnknownModelsCostTheMost(t *testing.T) {
	p, ok := Of("claude-unheard-of-9")
	if ok || p != Unknown {
		t.Fatalf("an unknown model: %+v %v", p, ok)
	}
	u := Usage{InputTokens: 1000, OutputTokens: 1000}
	for id := range models {
		if Cost(id, u) > Unknown.Cost(u) {
			t.Errorf("%s costs more than an unknown model", id)
		}
	}
}
