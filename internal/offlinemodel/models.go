package offlinemodel

import (
	"maps"
	"slices"
)

// Price is what a model costs, in US dollars per million tokens.
//
// Cost reproduces the pinned CLI's own arithmetic, so a ledger sum equals the
// CLI's costUSD for the same usage: each token kind is divided by a million
// and multiplied by its rate, and when the prompt (input plus cache read plus
// cache write tokens) is larger than LongPrompt.Above, LongPrompt's rates
// apply to the whole request. Every cache write is priced at the five-minute
// rate (the server never reports one-hour cache writes), and there is no
// regional surcharge (it never reports an inference_geo).
type Price struct {
	Input      float64
	Output     float64
	CacheWrite float64
	CacheRead  float64
	// LongPrompt, when set, replaces the rates above for a request whose
	// prompt has more than LongPrompt.Above tokens.
	LongPrompt *LongPromptPrice
}

// LongPromptPrice are the rates of a request with a long prompt.
type LongPromptPrice struct {
	Above      int
	Input      float64
	Output     float64
	CacheWrite float64
	CacheRead  float64
}

// Cost returns the price of one response that reported u.
func (p Price) Cost(u Usage) float64 {
	in, out, write, read := p.Input, p.Output, p.CacheWrite, p.CacheRead
	if lp := p.LongPrompt; lp != nil && u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens > lp.Above {
		in, out, write, read = lp.Input, lp.Output, lp.CacheWrite, lp.CacheRead
	}
	return float64(u.InputTokens)/1e6*in +
		float64(u.OutputTokens)/1e6*out +
		float64(u.CacheReadInputTokens)/1e6*read +
		float64(u.CacheCreationInputTokens)/1e6*write
}

// Model is a model the server accepts.
type Model struct {
	// Price prices its responses in the ledger.
	Price Price
	// MaxOutputTokens is the largest max_tokens a request for it may ask
	// for; 0 means no limit.
	MaxOutputTokens int
}

// DefaultModel is the model the pinned CLI uses when it is given none.
const DefaultModel = "claude-opus-5-5"

// Price tiers, in dollars per million tokens: input, output, cache write,
// cache read. Each was checked against the pinned CLI: a response reporting
// 100,000 tokens of one kind, with --model set to each id of the tier, and
// the costUSD of the result's model_usage_since_last_result. The recorded
// transcripts (claude-opus-5-5 only) agree: for example 100 input, 40
// output, 10 cache read and 20 cache write tokens cost $0.001302.
var (
	tierOpus55   = Price{Input: 4, Output: 20, CacheWrite: 5, CacheRead: 0.2}
	tier5x25     = Price{Input: 5, Output: 25, CacheWrite: 6.25, CacheRead: 0.5}
	tier15x75    = Price{Input: 15, Output: 75, CacheWrite: 18.75, CacheRead: 1.5}
	tier3x15     = Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}
	tierSonnet5  = Price{Input: 2, Output: 10, CacheWrite: 2.5, CacheRead: 0.2}
	tierSonnet55 = Price{Input: 2, Output: 10, CacheWrite: 2.5, CacheRead: 0.1}
	tier10x50    = Price{Input: 10, Output: 50, CacheWrite: 12.5, CacheRead: 1}
	tier10x50r   = Price{Input: 10, Output: 50, CacheWrite: 12.5, CacheRead: 0.25}
	tier8x40     = Price{Input: 8, Output: 40, CacheWrite: 10, CacheRead: 0.2}
	tierHaiku35  = Price{Input: 0.8, Output: 4, CacheWrite: 1, CacheRead: 0.08}
	tierHaiku45  = Price{Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1}
	tierHaiku55  = Price{Input: 0.1, Output: 0.5, CacheWrite: 0.125, CacheRead: 0.01,
		LongPrompt: &LongPromptPrice{Above: 100_000, Input: 0.5, Output: 2.5, CacheWrite: 0.625, CacheRead: 0.05}}
)

// builtinModels are the model ids the server accepts by default: the ids the
// pinned CLI sends (its default, its aliases opus, sonnet and haiku, and
// every id its --model accepts) and the dated ids of the same models.
// MaxOutputTokens is each model's upper output limit.
//
// The CLI replaces claude-opus-4-0 and claude-opus-4-1 (dated or not) by
// claude-opus-5-5 before it sends a request, so their prices could not be
// checked against it; they are the list prices of those models.
var builtinModels = map[string]Model{
	"claude-opus-5-5":            {tierOpus55, 128_000},
	"claude-opus-5":              {tier5x25, 128_000},
	"claude-opus-4-8":            {tier5x25, 128_000},
	"claude-opus-4-7":            {tier5x25, 128_000},
	"claude-opus-4-6":            {tier5x25, 128_000},
	"claude-opus-4-5":            {tier5x25, 64_000},
	"claude-opus-4-5-20251101":   {tier5x25, 64_000},
	"claude-opus-4-1":            {tier15x75, 32_000},
	"claude-opus-4-1-20250805":   {tier15x75, 32_000},
	"claude-opus-4-0":            {tier15x75, 32_000},
	"claude-opus-4-20250514":     {tier15x75, 32_000},
	"claude-sonnet-5-5":          {tierSonnet55, 128_000},
	"claude-sonnet-5":            {tierSonnet5, 128_000},
	"claude-sonnet-4-6":          {tier3x15, 128_000},
	"claude-sonnet-4-5":          {tier3x15, 64_000},
	"claude-sonnet-4-5-20250929": {tier3x15, 64_000},
	"claude-sonnet-4-0":          {tier3x15, 64_000},
	"claude-sonnet-4-20250514":   {tier3x15, 64_000},
	"claude-3-7-sonnet":          {tier3x15, 64_000},
	"claude-3-7-sonnet-20250219": {tier3x15, 64_000},
	"claude-3-7-sonnet-latest":   {tier3x15, 64_000},
	"claude-3-5-sonnet":          {tier3x15, 8_192},
	"claude-3-5-sonnet-20241022": {tier3x15, 8_192},
	"claude-3-5-sonnet-latest":   {tier3x15, 8_192},
	"claude-haiku-5-5":           {tierHaiku55, 128_000},
	"claude-haiku-4-5":           {tierHaiku45, 64_000},
	"claude-haiku-4-5-20251001":  {tierHaiku45, 64_000},
	"claude-3-5-haiku":           {tierHaiku35, 8_192},
	"claude-3-5-haiku-20241022":  {tierHaiku35, 8_192},
	"claude-3-5-haiku-latest":    {tierHaiku35, 8_192},
	"claude-fable-5-2":           {tier8x40, 128_000},
	"claude-fable-5-1":           {tier10x50r, 128_000},
	"claude-fable-5":             {tier10x50, 128_000},
	"claude-mythos-5-2":          {tier8x40, 128_000},
	"claude-mythos-5-1":          {tier10x50r, 128_000},
	"claude-mythos-5":            {tier10x50, 128_000},
}

// BuiltinModels returns the ids of the models the server accepts without
// Config.Models, sorted.
func BuiltinModels() []string {
	return slices.Sorted(maps.Keys(builtinModels))
}

// BuiltinModel returns a built-in model by id.
func BuiltinModel(id string) (Model, bool) {
	m, ok := builtinModels[id]
	return m, ok
}
