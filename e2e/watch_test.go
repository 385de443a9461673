package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// `drover task watch` streams the log live; stopped midway and restarted with
// --after, it delivers every event exactly once.
func TestWatchResumesWithAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	release := make(chan struct{})
	e.fake.Enqueue(
		fa.Reply(fa.Text("alpha"), fa.UseBash("echo one")).WithHold(1, release),
		fa.Reply(fa.Text("beta")),
		fa.Reply(fa.Text("gamma"), fa.UseBash("echo two")),
		fa.Reply(fa.Text("delta")),
	)
	id := e.taskID("watched")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "first"}, ""); err != nil {
		t.Fatal(err)
	}

	// The first watcher sees the events of the held turn as they come, then stops.
	w1 := e.watch(id, 0)
	var seen []eventLine
	for len(seen) < 2 {
		seen = append(seen, w1.next(t))
	}
	w1.stop()
	close(release)
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "second"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	total := len(e.events(id))

	// The second starts after the last event the first printed and catches up.
	w2 := e.watch(id, seen[len(seen)-1].Seq)
	for len(seen) < total {
		seen = append(seen, w2.next(t))
	}
	w2.stop()
	for i, ev := range seen {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: gap or duplicate across the reconnect", i+1, ev.Seq)
		}
		if ev.Type == "" || len(ev.Event) == 0 {
			t.Fatalf("event %d printed without its payload: %+v", ev.Seq, ev)
		}
	}
}

type eventLine struct {
	Seq   int64           `json:"seq"`
	Turn  int             `json:"turn"`
	Type  string          `json:"type"`
	Event json.RawMessage `json:"event"`
}

type watcher struct {
	cmd    *exec.Cmd
	lines  chan eventLine
	cancel context.CancelFunc
}

func (e *env) watch(id string, after int64) *watcher {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	cmd := exec.CommandContext(ctx, suite.drover, "task", "watch", "--json", "--after", strconv.FormatInt(after, 10), id)
	cmd.Env = []string{"DROVER_DATABASE_URL=" + e.dsn, "HOME=" + e.home}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	w := &watcher{cmd: cmd, lines: make(chan eventLine, 1024), cancel: cancel}
	go func() {
		defer close(w.lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var ev eventLine
			if json.Unmarshal(line, &ev) != nil {
				ev.Type = fmt.Sprintf("unparsable: %q", line)
			}
			w.lines <- ev
		}
	}()
	e.t.Cleanup(w.stop)
	return w
}

func (w *watcher) next(t *testing.T) eventLine {
	t.Helper()
	select {
	case ev, ok := <-w.lines:
		if !ok {
			t.Fatal("the watcher ended early")
		}
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no event from the watcher for a minute")
	}
	return eventLine{}
}

func (w *watcher) stop() {
	w.cancel()
	_ = w.cmd.Wait()
}
