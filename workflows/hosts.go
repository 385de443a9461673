package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// watchHosts takes in, in the background, the hosts live hosts report lost.
func (s *taskState) watchHosts(ctx workflow.Context) {
	lost := workflow.GetSignalChannel(ctx, task.SignalHostLost)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var h task.HostLost
			if !lost.Receive(ctx, &h) {
				return
			}
			s.hostLost(ctx, h)
		}
	})
}

// hostLost forgets a lost host: a turn running (or waiting to start) on its queue is cancelled
// there, and runTurn gives it to another host; with no turn running, the next turn asks for a
// host. A report about another host than the task's is ignored.
func (s *taskState) hostLost(ctx workflow.Context, h task.HostLost) {
	if h.HostQueue == "" || h.HostQueue != s.hostQueue {
		return
	}
	log := workflow.GetLogger(ctx)
	if s.cancelTurn != nil {
		log.Warn("the turn's host is lost; moving the turn", "host_queue", h.HostQueue, "turn", s.running)
		s.lostTurn = &h
		s.cancelTurn()
		return
	}
	log.Info("the task's host is lost; the next turn goes to a live host", "host_queue", h.HostQueue)
	s.hostQueue = ""
}
