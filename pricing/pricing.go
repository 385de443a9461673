// Package pricing prices the Messages API's usage per model, as the pinned Claude Code CLI does:
// what an answer cost when the CLI never reported it (an attempt killed mid-turn), from the
// usage its stream did report.
package pricing

import (
	"regexp"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input      float64
	Output     float64
	CacheWrite float64
	CacheRead  float64
	// LongPrompt, when set, replaces the rates above for a request whose prompt (input, cache
	// read and cache write tokens) has more than LongPrompt.Above tokens.
	LongPrompt *LongPrompt
}

// LongPrompt are the rates of a request with a long prompt.
type LongPrompt struct {
	Above      int64
	Input      float64
	Output     float64
	CacheWrite float64
	CacheRead  float64
}

// Usage is what one answer of the API reported.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens int64
	CacheReadInputTokens     int64
}

// Cost returns the price of one answer that reported u. Every cache write is priced at the
// five-minute rate, as the CLI does.
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

// Price tiers, in dollars per million tokens: input, output, cache write, cache read.
var (
	opus55   = Price{Input: 4, Output: 20, CacheWrite: 5, CacheRead: 0.2}
	p5x25    = Price{Input: 5, Output: 25, CacheWrite: 6.25, CacheRead: 0.5}
	p15x75   = Price{Input: 15, Output: 75, CacheWrite: 18.75, CacheRead: 1.5}
	p3x15    = Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}
	sonnet5  = Price{Input: 2, Output: 10, CacheWrite: 2.5, CacheRead: 0.2}
	sonnet55 = Price{Input: 2, Output: 10, CacheWrite: 2.5, CacheRead: 0.1}
	p10x50   = Price{Input: 10, Output: 50, CacheWrite: 12.5, CacheRead: 1}
	p10x50r  = Price{Input: 10, Output: 50, CacheWrite: 12.5, CacheRead: 0.25}
	p8x40    = Price{Input: 8, Output: 40, CacheWrite: 10, CacheRead: 0.2}
	haiku35  = Price{Input: 0.8, Output: 4, CacheWrite: 1, CacheRead: 0.08}
	haiku45  = Price{Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1}
	haiku55  = Price{Input: 0.1, Output: 0.5, CacheWrite: 0.125, CacheRead: 0.01,
		LongPrompt: &LongPrompt{Above: 100_000, Input: 0.5, Output: 2.5, CacheWrite: 0.625, CacheRead: 0.05}}
)

// models are the prices of the models the pinned CLI knows, by id without a date suffix.
var models = map[string]Price{
	"claude-opus-5-5":          opus55,
	"claude-opus-5":            p5x25,
	"claude-opus-4-8":          p5x25,
	"claude-opus-4-7":          p5x25,
	"claude-opus-4-6":          p5x25,
	"claude-opus-4-5":          p5x25,
	"claude-opus-4-1":          p15x75,
	"claude-opus-4-0":          p15x75,
	"claude-opus-4":            p15x75,
	"claude-sonnet-5-5":        sonnet55,
	"claude-sonnet-5":          sonnet5,
	"claude-sonnet-4-6":        p3x15,
	"claude-sonnet-4-5":        p3x15,
	"claude-sonnet-4-0":        p3x15,
	"claude-sonnet-4":          p3x15,
	"claude-3-7-sonnet":        p3x15,
	"claude-3-7-sonnet-latest": p3x15,
	"claude-3-5-sonnet":        p3x15,
	"claude-3-5-sonnet-latest": p3x15,
	"claude-haiku-5-5":         haiku55,
	"claude-haiku-4-5":         haiku45,
	"claude-3-5-haiku":         haiku35,
	"claude-3-5-haiku-latest":  haiku35,
	"claude-fable-5-2":         p8x40,
	"claude-fable-5-1":         p10x50r,
	"claude-fable-5":           p10x50,
	"claude-mythos-5-2":        p8x40,
	"claude-mythos-5-1":        p10x50r,
	"claude-mythos-5":          p10x50,
}

// Unknown is the price of a model the table does not know: the highest rates of the table, so
// that a budget is not overspent for want of a price.
var Unknown = p15x75

var dated = regexp.MustCompile(`-\d{8}$`)

// Of returns the price of model; ok is false when the table does not know it (the price is then
// Unknown). A dated id (claude-sonnet-4-5-20250929) is priced as its model.
func Of(model string) (p Price, ok bool) {
	id := dated.ReplaceAllString(strings.ToLower(strings.TrimSpace(model)), "")
	if p, ok := models[id]; ok {
		return p, true
	}
	return Unknown, false
}

// Cost returns the price of one answer of model that reported u.
func Cost(model string, u Usage) float64 {
	p, _ := Of(model)
	return p.Cost(u)
}
