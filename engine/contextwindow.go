package engine

import (
	"context"
	"sync"
	"time"
)

// contextWindows are the context windows the host's CLIs reported, by the model a task asked for
// ("" for the CLI's default), and the models a CLI was asked about. A CLI reports its window in
// every result, so asking costs requests nobody made (the CLI counts the tokens of its whole
// context with the API to answer): the host asks only after a result that did not say, and at
// most once per model. The zero value is ready.
type contextWindows struct {
	mu    sync.Mutex
	sizes map[string]int64
	asked map[string]bool
}

// size returns the window reported for model, or 0.
func (w *contextWindows) size(model string) int64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sizes[model]
}

// learn records the window a CLI running model reported.
func (w *contextWindows) learn(model string, size int64) {
	if w == nil || size <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sizes == nil {
		w.sizes = make(map[string]int64)
	}
	w.sizes[model] = size
}

// claimAsk reports whether a CLI running model may be asked for its window: nothing reported it
// and no CLI of the host was asked about it yet. A true answer is given once per model.
func (w *contextWindows) claimAsk(model string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sizes[model] > 0 || w.asked[model] {
		return false
	}
	if w.asked == nil {
		w.asked = make(map[string]bool)
	}
	w.asked[model] = true
	return true
}

// unclaim gives back an ask that got no answer.
func (w *contextWindows) unclaim(model string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.asked, model)
}

// learnContextWindow asks the CLI for the main model's context window, after a result that did
// not report it, and hands the answer to the adapter and the host.
func (ex *executor) learnContextWindow(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	defer ex.stayAwake()()
	u, err := ex.proc.Client().GetContextUsage(ctx)
	if err != nil {
		ex.logger.Debug("the CLI did not say its context window", "task_id", ex.taskID, "error", err)
		ex.windows.unclaim(ex.model) // another process may ask
		return
	}
	ex.windows.learn(ex.model, u.MaxTokens)
	ex.adapter.SetContextWindow(u.Model, u.MaxTokens)
}
