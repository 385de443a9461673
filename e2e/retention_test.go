package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// archivedEvents reads an archive file with gzip and JSON alone and returns its events' types and
// payloads' text in order.
func archivedEvents(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var rec struct {
			Kind string `json:"kind"`
			Row  struct {
				Seq  int64  `json:"seq"`
				Type string `json:"type"`
			} `json:"row"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind == "event" {
			out = append(out, rec.Row.Type)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A finished task whose retention passes is archived by the worker's job while `drover task
// watch` follows it: the watcher prints every event, then ends by itself (exit 0) saying where
// the archive is; the rows leave Postgres; `drover task import` brings the task back for show and
// watch, the same events, and a start of it is refused without a call to the model (the fake
// API's ledger is the witness). A task with the default retention stays.
func TestRetentionArchivesAWatchedTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	archiveDir := t.TempDir()
	e.startWorker("host-"+e.queue, "--archive-dir", archiveDir, "--archive-interval", "1s")
	e.fake.Enqueue(
		fa.Reply(fa.Text("kept for a while"), fa.UseBash("echo archived")),
		fa.Reply(fa.Text("done with it")),
		fa.Reply(fa.Text("this one stays")),
	)
	short, kept := e.taskID("short"), e.taskID("kept")
	p := e.params()
	p.Retention = 3 * time.Second
	if _, err := e.tc.Start(e.ctx, short, p, task.Prompt{Text: "run it"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(short, 1)
	if _, err := e.tc.Start(e.ctx, kept, e.params(), task.Prompt{Text: "stay"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(kept, 1)
	if err := e.tc.Close(e.ctx, kept); err != nil {
		t.Fatal(err)
	}

	// A watcher follows the task from its first event.
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Minute)
	defer cancel()
	watch := exec.CommandContext(ctx, suite.drover, "task", "watch", "--json", short)
	watch.Env = []string{"DROVER_DATABASE_URL=" + e.dsn, "HOME=" + e.home}
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	watch.Stdout, watch.Stderr = out, errOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- watch.Wait() }()
	e.waitFor("the watcher prints the task's events", func() bool { return strings.Contains(out.String(), `"seq":1,`) })
	stored := e.events(short)
	if err := e.tc.Close(e.ctx, short); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-ended:
	case <-ctx.Done():
		t.Fatalf("the watcher did not end when its task was archived; it printed:\n%s\n%s", out.String(), errOut.String())
	}
	file := filepath.Join(archiveDir, short+".jsonl.gz")
	if err != nil || !strings.Contains(errOut.String(), "was archived to its archive "+file) ||
		!strings.Contains(errOut.String(), "every event") {
		t.Fatalf("the watcher ended with %v and said %q, want exit 0 naming %s", err, errOut.String(), file)
	}
	var printed []string
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var ev eventLine
		if json.Unmarshal([]byte(line), &ev) != nil {
			t.Fatalf("the watcher printed %q", line)
		}
		printed = append(printed, ev.Type)
	}
	inArchive := archivedEvents(t, file)
	if len(printed) < len(stored) || strings.Join(printed, ",") != strings.Join(inArchive, ",") {
		t.Fatalf("the watcher printed %d events %v,\nthe archive holds %d %v", len(printed), printed, len(inArchive), inArchive)
	}
	if !strings.Contains(e.mustDrover("task", "watch", "--follow=false", "--json", kept), `"text":"stay"`) {
		t.Error("the task with the default retention lost its events")
	}

	// The rows go a minute after the archive is durable.
	e.waitFor("the archived task's rows are deleted", func() bool {
		_, err := e.droverCLI("task", "show", short)
		return err != nil
	})
	if got := e.mustDrover("task", "import", file); !strings.Contains(got, "task "+short+" imported") {
		t.Fatalf("import: %s", got)
	}
	shown := e.mustDrover("task", "show", short, "-o", "json")
	if !strings.Contains(shown, `"imported_at"`) || !strings.Contains(shown, `"status": "completed"`) {
		t.Errorf("the imported task shows %s", shown)
	}
	again := e.mustDrover("task", "watch", "--follow=false", "--json", short)
	if n := strings.Count(again, "\n"); n != len(printed) || !strings.Contains(again, "echo archived") {
		t.Errorf("the imported task's watch printed %d events, want the %d archived:\n%s", n, len(printed), again)
	}
	calls := len(e.fake.Requests())
	if got, err := e.droverCLI("task", "start", "--id", short, "--workspace", e.workspace, "once more"); err == nil ||
		!strings.Contains(got, "imported from its archive") {
		t.Errorf("starting the imported task: %v %s", err, got)
	}
	if n := len(e.fake.Requests()); n != calls {
		t.Errorf("the refused start reached the model: %d requests, was %d", n, calls)
	}
}
