package engine

import "time"

// Pausing idle processes. A CLI waiting for its task's next turn polls its config folder many
// times a second (docs/performance.md, "An idle CLI"): a host that keeps many warm processes
// burns that CPU for each of them, beside the turns that run. Once a kept process has been idle
// and quiet for Config.PauseIdle, the engine pauses it (claudecode.Process.Pause, SIGSTOP); the
// task's next turn, a call to the CLI between turns, and the process's stop resume it first. A
// paused process keeps its place: its next turn goes on from the same warm session.

// pausable is a process that can be paused while it waits (*claudecode.Process).
type pausable interface {
	Pause() error
	Resume() error
}

// schedulePauseLocked arranges for the idle process to be paused after d, unless it is busy,
// printing, or called meanwhile. ex.mu is held.
func (ex *executor) schedulePauseLocked(d time.Duration) {
	if ex.pauseIdle <= 0 {
		return
	}
	if _, ok := ex.proc.(pausable); !ok {
		return
	}
	if ex.pauseTimer != nil {
		ex.pauseTimer.Stop()
	}
	ex.pauseTimer = time.AfterFunc(d, ex.pauseIfIdle)
}

// pauseIfIdle pauses the process if it is idle, fit for a next turn, nothing calls it, and it
// has printed nothing and been woken by nothing for pauseIdle; otherwise it looks again when that
// could first be so.
func (ex *executor) pauseIfIdle() {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.pauseTimer = nil
	if ex.busy || !ex.clean || ex.paused || ex.awake > 0 || !ex.alive() {
		return
	}
	if wait := ex.pauseIdle - min(ex.quietFor(), time.Since(ex.wokeAt)); wait > 0 {
		ex.schedulePauseLocked(wait)
		return
	}
	if err := ex.proc.(pausable).Pause(); err != nil {
		ex.logger.Debug("claude could not be paused", "task_id", ex.taskID, "error", err)
		return
	}
	ex.paused = true
	ex.logger.Debug("paused an idle claude process", "task_id", ex.taskID, "pid", ex.pid())
}

// wakeLocked resumes the process if it is paused, and keeps it from being paused for
// pauseIdle. ex.mu is held.
func (ex *executor) wakeLocked() {
	ex.wokeAt = time.Now()
	if ex.pauseTimer != nil {
		ex.pauseTimer.Stop()
		ex.pauseTimer = nil
	}
	if !ex.paused {
		return
	}
	ex.paused = false
	if err := ex.proc.(pausable).Resume(); err != nil {
		ex.logger.Warn("resuming a paused claude process", "task_id", ex.taskID, "error", err)
	}
}

// stayAwake resumes the process for a call to it between turns and keeps it from being paused
// until the returned func runs.
func (ex *executor) stayAwake() (done func()) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.awake++
	ex.wakeLocked()
	return func() {
		ex.mu.Lock()
		defer ex.mu.Unlock()
		ex.awake--
		if ex.awake == 0 && !ex.busy && ex.clean {
			ex.schedulePauseLocked(ex.pauseIdle)
		}
	}
}
