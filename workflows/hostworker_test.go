package workflows

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/task"
)

// hostWorker polls a host's queue and its warm queue (task.WarmQueue), as a drover host does:
// what is registered on it runs on both.
type hostWorker struct {
	worker.Worker
	warm worker.Worker
}

func newHostWorker(c client.Client, queue string) worker.Worker {
	return &hostWorker{Worker: worker.New(c, queue, worker.Options{}), warm: worker.New(c, task.WarmQueue(queue), worker.Options{})}
}

func (w *hostWorker) RegisterActivity(a any) {
	w.Worker.RegisterActivity(a)
	w.warm.RegisterActivity(a)
}

func (w *hostWorker) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	w.Worker.RegisterActivityWithOptions(a, o)
	w.warm.RegisterActivityWithOptions(a, o)
}

func (w *hostWorker) Start() error {
	if err := w.Worker.Start(); err != nil {
		return err
	}
	return w.warm.Start()
}

func (w *hostWorker) Stop() {
	w.warm.Stop()
	w.Worker.Stop()
}
