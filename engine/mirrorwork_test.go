package engine

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// countingFS is the host's file system, counting what the mirror asks of it.
type countingFS struct {
	osFS
	mu        sync.Mutex
	dirReads  []string // the folders listed, relative to root
	bytesRead int64
	root      string
}

func (c *countingFS) ReadDir(path string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	rel, _ := filepath.Rel(c.root, path)
	c.dirReads = append(c.dirReads, rel)
	c.mu.Unlock()
	return c.osFS.ReadDir(path)
}

func (c *countingFS) ReadAt(path string, off, n int64) ([]byte, error) {
	b, err := c.osFS.ReadAt(path, off, n)
	c.mu.Lock()
	c.bytesRead += int64(len(b))
	c.mu.Unlock()
	return b, err
}

// reset returns what was counted since the last reset.
func (c *countingFS) reset() (dirs []string, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dirs, bytes = c.dirReads, c.bytesRead
	c.dirReads, c.bytesRead = nil, 0
	return dirs, bytes
}

// A host that served many workspaces keeps a project folder for each; a session that ran long
// has a long transcript. Neither makes a commit's mirror cost more: it lists no project folder
// and reads what the turn appended, not the transcript's earlier megabyte.
func TestMirrorWorkPerTurnIsTheTurnsOwn(t *testing.T) {
	t.Parallel()
	m, dir := newMirrorDB(t), t.TempDir()
	for i := range 2000 {
		put(t, dir, fmt.Sprintf("projects/-old-workspace-%d/%08d-0000-4000-8000-000000000000.jsonl", i, i), "{}\n")
	}
	earlier := strings.Repeat("{\"type\":\"assistant\",\"text\":\""+strings.Repeat("x", 1000)+"\"}\n", 1024)
	put(t, dir, transcript, earlier)
	put(t, dir, backup, "v1")
	counter := &countingFS{root: dir}
	e := &Engine{cfg: Config{DB: m.db}, marks: mirrorMarks{fs: counter}}
	content := earlier
	for turn := 1; turn <= 5; turn++ {
		uuid := fmt.Sprintf("9b1d2c3e-0000-4000-8000-%012d", turn)
		line := "{\"type\":\"assistant\",\"uuid\":\"" + uuid + "\"}\n"
		appendTo(t, dir, transcript, line)
		content += line
		counter.reset()
		u, ferr := e.mirror(t.Context(), dir, mirrorWorkspace, mirrorSession, uuid)
		if ferr != nil {
			t.Fatal(ferr)
		}
		m.commit(mirrorSession, u)
		dirs, read := counter.reset()
		if turn == 1 {
			checkChunk(t, chunkOf(t, u, transcript), 1, 0, content)
			continue // the first commit on this host reads the transcript whole
		}
		checkChunk(t, chunkOf(t, u, transcript), turn, int64(len(content)-len(line)), content)
		for _, d := range dirs {
			if d == "projects" || strings.HasPrefix(d, "projects/-old-") {
				t.Fatalf("turn %d listed %s", turn, d)
			}
		}
		if len(dirs) > 2 {
			t.Errorf("turn %d listed %d folders (%v), want the session's own two at most", turn, len(dirs), dirs)
		}
		// The appended line twice (the wait for the resume point, then the update), the mark's
		// check of the mirrored part's ends, and the backup, too recent for its time to prove it.
		if limit := int64(2*len(line) + 2*markWindow + len("v1")); read > limit {
			t.Errorf("turn %d read %d bytes, want at most %d", turn, read, limit)
		}
	}
	// The CLI cuts the transcript in place at an earlier entry (resuming there) and writes on,
	// past the mirrored end: the mirrored part changed, so the transcript is stored whole.
	cut := content[:len(earlier)/2] + strings.Repeat("{\"type\":\"user\",\"text\":\"y\"}\n", 40000)
	if err := os.Truncate(filepath.Join(dir, transcript), int64(len(earlier)/2)); err != nil {
		t.Fatal(err)
	}
	appendTo(t, dir, transcript, cut[len(earlier)/2:])
	content = cut
	u, ferr := e.mirror(t.Context(), dir, mirrorWorkspace, mirrorSession, "user") // an entry of the new part
	if ferr != nil {
		t.Fatal(ferr)
	}
	m.commit(mirrorSession, u)
	checkChunk(t, chunkOf(t, u, transcript), 6, 0, content)

	// What the mirror holds rebuilds the transcript as it is, on a host that never ran the
	// session; that host's first commit after it reads only what the turn appended.
	fresh := t.TempDir()
	other := &countingFS{root: fresh}
	moved := &Engine{cfg: Config{DB: m.db}, marks: mirrorMarks{fs: other}}
	if _, err := moved.marks.restoreSession(t.Context(), m.db, fresh, mirrorSession); err != nil {
		t.Fatal(err)
	}
	if got := readFolder(t, fresh).contents()[transcript]; got != content {
		t.Fatalf("restored transcript of %d bytes, want %d", len(got), len(content))
	}
	line := "{\"type\":\"assistant\",\"uuid\":\"moved\"}\n"
	appendTo(t, fresh, transcript, line)
	u, ferr = moved.mirror(t.Context(), fresh, mirrorWorkspace, mirrorSession, "moved")
	if ferr != nil {
		t.Fatal(ferr)
	}
	m.commit(mirrorSession, u)
	checkChunk(t, chunkOf(t, u, transcript), 7, int64(len(content)), content+line)
	if _, read := other.reset(); read > int64(2*len(line)+2*markWindow+len("v1")) {
		t.Errorf("the first commit after a restore read %d bytes", read)
	}
}
