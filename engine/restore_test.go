package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

func TestAttemptRestoresTheSessionFromItsMirror(t *testing.T) {
	t.Parallel()
	configDir := t.TempDir()
	var workspace string // the rig's, known once it is made
	transcript := func(session string) string {
		// The CLI's folder of a workspace: its path, every character but a letter or digit a "-".
		folder := strings.Map(func(r rune) rune {
			if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
				return r
			}
			return '-'
		}, workspace)
		return filepath.Join(configDir, "projects", folder, session+".jsonl")
	}
	// The scripted CLI keeps a transcript as the real one does, writing each answer's line
	// before its result, and notes what the transcript held when each prompt arrived.
	var mu sync.Mutex
	var seen []string
	script := func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			path := transcript(c.SessionID)
			held, _ := os.ReadFile(path)
			mu.Lock()
			seen = append(seen, string(held))
			mu.Unlock()
			c.Init()
			u := c.Text("msg_"+fakecli.NewUUID()[:8], "echo: "+p.Text)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Error(err)
			}
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				_, err = f.WriteString(`{"type":"assistant","uuid":"` + u + `"}` + "\n")
				f.Close()
			}
			if err != nil {
				t.Error(err)
			}
			c.Result("echo: "+p.Text, fakecli.DefaultUsage)
		})
	}
	r := newRig(t, script, func(c *engine.Config) { c.KeepAlive = -1; c.Claude.ConfigDir = configDir })
	workspace = r.workspace

	res, err := r.run(r.req(1, 1, "one"))
	if err != nil {
		t.Fatal(err)
	}
	// The commit that moved the resume point mirrored the transcript as it stood.
	committed, rerr := os.ReadFile(transcript(res.SessionID))
	if rerr != nil {
		t.Fatal(rerr)
	}
	rel, _ := filepath.Rel(configDir, transcript(res.SessionID))
	state, serr := store.MirrorState(r.ctx, r.db, res.SessionID)
	if serr != nil {
		t.Fatal(serr)
	}
	if f, ok := state[rel]; !ok || f.FileSize != int64(len(committed)) {
		t.Fatalf("the mirror after turn 1 = %+v, want the transcript of %d bytes", state, len(committed))
	}

	// The session moves to a host that never ran it: its transcript is rebuilt before the CLI
	// resumes.
	if err := os.RemoveAll(filepath.Join(configDir, "projects")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(r.req(2, 1, "two")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(seen) != 2 || seen[1] != string(committed) {
		t.Fatalf("the resumed CLI found the transcript %q, want turn 1's %q", seen[1:], committed)
	}
	mu.Unlock()

	// A mirror that does not rebuild what it says fails the attempt before any CLI starts.
	if _, err := r.db.Exec(r.ctx, `UPDATE session_chunks SET data = '\xff' WHERE session_id = $1`, res.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(configDir, "projects")); err != nil {
		t.Fatal(err)
	}
	launches := len(r.cli.Launches())
	_, e := r.run(r.req(3, 1, "three"))
	if e == nil || e.Type != task.ErrTypeSessionMirrorCorrupt || task.Retryable(e.Type) {
		t.Fatalf("turn 3 on a corrupt mirror: %v, want %s", e, task.ErrTypeSessionMirrorCorrupt)
	}
	if n := len(r.cli.Launches()); n != launches {
		t.Fatalf("a CLI was started on a corrupt mirror (%d launches, was %d)", n, launches)
	}
	if _, err := os.Stat(filepath.Join(configDir, "projects")); !os.IsNotExist(err) {
		t.Fatalf("a corrupt mirror wrote to the config folder: %v", err)
	}
}
