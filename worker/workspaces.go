package worker

import (
	"context"
	"time"

	"github.com/drover-run/drover/workspace"
)

// prunes starts the host's pruning of checkpoints past their retention: once at start, then
// every WorkspacePruneEvery, until the worker closes. A failure is logged; the next round tries
// again.
func (w *Worker) prunes(m *workspace.Manager) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.stopPrune = func() {
		stop()
		<-done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(WorkspacePruneEvery)
		defer t.Stop()
		for {
			w.pruneOnce(ctx, m)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// pruneOnce deletes the checkpoints of tasks whose newest one is older than the retention.
func (w *Worker) pruneOnce(ctx context.Context, m *workspace.Manager) {
	pruned, err := m.Prune(ctx, time.Now().Add(-w.cfg.WorkspaceRetention))
	switch {
	case err != nil && ctx.Err() == nil:
		w.log.Warn("pruning old checkpoints", "error", err)
	case len(pruned) > 0:
		w.log.Info("pruned the checkpoints of tasks past their retention", "tasks", len(pruned), "retention", w.cfg.WorkspaceRetention)
	}
}
