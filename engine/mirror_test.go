package engine

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

const (
	// mirrorWorkspace is the workspace whose project folder is -work-repo.
	mirrorWorkspace = "/work/repo"
	mirrorSession   = "5f1c3a2e-7d41-4c55-9a1e-2b8d6f0c9e11"
	transcript      = "projects/-work-repo/" + mirrorSession + ".jsonl"
	subagent        = "projects/-work-repo/" + mirrorSession + "/subagents/agent-a1.jsonl"
	subagentMeta    = "projects/-work-repo/" + mirrorSession + "/subagents/agent-a1.meta.json"
	toolResult      = "projects/-work-repo/" + mirrorSession + "/tool-results/toolu_01.txt"
	backup          = "file-history/" + mirrorSession + "/3f2a9c@v1"
)

// put writes content to rel under dir, making its folders.
func put(t *testing.T, dir, rel, content string) {
	t.Helper()
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// appendTo appends content to rel under dir.
func appendTo(t *testing.T, dir, rel, content string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// folder is what a folder holds: each regular file's content and modification time, by path.
type folder map[string]fileState

type fileState struct {
	content string
	mtime   time.Time
}

func readFolder(t *testing.T, dir string) folder {
	t.Helper()
	out := folder{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out[rel] = fileState{string(b), info.ModTime()}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f folder) contents() map[string]string {
	out := make(map[string]string, len(f))
	for p, s := range f {
		out[p] = s.content
	}
	return out
}

// age sets every file under dir to an old modification time, so that a rewrite shows.
func age(t *testing.T, dir string) {
	t.Helper()
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for rel := range readFolder(t, dir) {
		if err := os.Chtimes(filepath.Join(dir, rel), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// mirrorDB commits turns of one task, each with a mirror update, on a fresh database.
type mirrorDB struct {
	t     *testing.T
	db    *pgxpool.Pool
	task  string
	turn  int
	marks mirrorMarks
}

func newMirrorDB(t *testing.T) *mirrorDB {
	return &mirrorDB{t: t, db: pgtest.NewPool(t), task: "task-mirror"}
}

// commit begins the task's next turn and commits it in session with u as its mirror.
func (m *mirrorDB) commit(session string, u *store.MirrorUpdate) {
	m.t.Helper()
	ctx := m.t.Context()
	m.turn++
	id := fmt.Sprintf("attempt-%d", m.turn)
	_, err := store.BeginAttempt(ctx, m.db, store.AttemptStart{
		TaskID: m.task, AttemptID: id, Turn: m.turn, Prompt: "p", PromptUUID: fmt.Sprintf("prompt-%d", m.turn),
		LostTurnError: "lost",
	})
	if err != nil {
		m.t.Fatal(err)
	}
	applied, err := store.CommitTurn(ctx, m.db, store.TurnCommit{
		TaskID: m.task, Turn: m.turn, AttemptID: id, SessionID: session,
		LastMessageUUID: fmt.Sprintf("u%d", m.turn), Status: task.TurnCompleted, Mirror: u,
	})
	if err != nil {
		m.t.Fatal(err)
	}
	if !applied {
		m.t.Fatalf("commit of turn %d not applied", m.turn)
	}
}

// update returns the mirror's update of the session's files in dir.
func (m *mirrorDB) update(dir string) *store.MirrorUpdate {
	m.t.Helper()
	state, err := store.MirrorState(m.t.Context(), m.db, mirrorSession)
	if err != nil {
		m.t.Fatal(err)
	}
	u, err := m.marks.update(dir, mirrorWorkspace, mirrorSession, state)
	if err != nil {
		m.t.Fatal(err)
	}
	return u
}

// sync mirrors the session's files in dir with a commit, and returns the update committed.
func (m *mirrorDB) sync(dir string) *store.MirrorUpdate {
	m.t.Helper()
	u := m.update(dir)
	m.commit(mirrorSession, u)
	return u
}

// chunkOf returns u's chunk of path, failing the test unless there is exactly one.
func chunkOf(t *testing.T, u *store.MirrorUpdate, path string) store.MirrorChunk {
	t.Helper()
	var found []store.MirrorChunk
	for _, c := range u.Chunks {
		if c.Path == path {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the update has %d chunks of %s, want 1", len(found), path)
	}
	return found[0]
}

// checkChunk checks that c is seq of its file, holds the file's bytes from offset on, and
// describes file (the whole of it once c is applied).
func checkChunk(t *testing.T, c store.MirrorChunk, seq int, offset int64, file string) {
	t.Helper()
	data, err := inflate(c.Data, c.DataSize)
	if err != nil {
		t.Fatalf("chunk %d of %s: %v", c.Seq, c.Path, err)
	}
	if c.Seq != seq || c.FileOffset != offset {
		t.Errorf("chunk of %s is %d at offset %d, want %d at %d", c.Path, c.Seq, c.FileOffset, seq, offset)
	}
	if want := file[min(offset, int64(len(file))):]; string(data) != want {
		t.Errorf("chunk %d of %s holds %q, want %q", c.Seq, c.Path, data, want)
	}
	if c.DataSize != len(data) || !bytes.Equal(c.DataSHA256, digest(data)) {
		t.Errorf("chunk %d of %s: size %d and hash do not describe its %d bytes", c.Seq, c.Path, c.DataSize, len(data))
	}
	if c.FileSize != int64(len(file)) || !bytes.Equal(c.FileSHA256, digest([]byte(file))) {
		t.Errorf("chunk %d of %s: file size %d and hash do not describe the file of %d bytes", c.Seq, c.Path, c.FileSize, len(file))
	}
}

func TestMirrorSessionFilesAreTheSessionsOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mine := []string{
		transcript, subagent, subagentMeta, toolResult, backup,
		"projects/-other-workspace/" + mirrorSession + ".jsonl", // the session under a second workspace slug
		"projects/-work-repo/" + mirrorSession + "/tool-results/nested/deeper.txt",
	}
	for _, rel := range mine {
		put(t, dir, rel, "x\n")
	}
	const other = "0d9a7c1b-0000-4000-8000-000000000002"
	for _, rel := range []string{
		"projects/-work-repo/" + other + ".jsonl",
		"projects/-work-repo/" + other + "/subagents/agent-b.jsonl",
		"file-history/" + other + "/aa@v1",
		"projects/-work-repo/" + mirrorSession + ".jsonl.bak",
		"projects/-work-repo/" + mirrorSession + "/.restore-123", // a restore's temporary file
		"projects/" + mirrorSession + ".jsonl",                   // not in a workspace's folder
		"todos/" + mirrorSession + "-agent-" + mirrorSession + ".json",
		"shell-snapshots/snapshot-bash-1.sh",
		"settings.json",
		".claude.json",
	} {
		put(t, dir, rel, "not mine\n")
	}
	if err := os.Symlink(filepath.Join(dir, "settings.json"), filepath.Join(dir, "file-history", mirrorSession, "link")); err != nil {
		t.Fatal(err)
	}

	// The workspace names the transcript's folder, the mirror's state the other one; a
	// workspace that names no folder (its path too long to derive one) leads to a search.
	long := "/" + strings.Repeat("w", maxProjectFolder)
	for _, c := range []struct {
		workspace string
		known     []string
	}{
		{mirrorWorkspace, []string{"projects/-other-workspace/" + mirrorSession + ".jsonl", backup}},
		{long, nil},
	} {
		var marks mirrorMarks
		got, err := marks.sessionFiles(dir, c.workspace, mirrorSession, c.known)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Sorted(slices.Values(mine))
		if !slices.Equal(got, want) {
			t.Fatalf("sessionFiles =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	// A session with no files at all has nothing to mirror.
	var marks mirrorMarks
	got, err := marks.sessionFiles(t.TempDir(), mirrorWorkspace, mirrorSession, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("sessionFiles of an empty folder = %v, %v", got, err)
	}
	m := newMirrorDB(t)
	if u := m.update(t.TempDir()); u != nil {
		t.Fatalf("mirrorUpdate of an empty folder = %+v, want nil", u)
	}
}

func TestMirrorUpdateStoresAppendsAndRewrites(t *testing.T) {
	t.Parallel()
	m, dir := newMirrorDB(t), t.TempDir()
	put(t, dir, transcript, "{\"n\":1}\n{\"n\":2}\n{\"n\":")       // the CLI is writing line 3
	put(t, dir, subagent, "{\"s\":1}\n{\"s\"")                     // likewise
	put(t, dir, toolResult, "output without a final newline\nend") // not a transcript: taken whole
	put(t, dir, backup, "v1")

	u := m.sync(dir)
	if len(u.Chunks) != 4 {
		t.Fatalf("first update has %d chunks, want one per file", len(u.Chunks))
	}
	checkChunk(t, chunkOf(t, u, transcript), 1, 0, "{\"n\":1}\n{\"n\":2}\n")
	checkChunk(t, chunkOf(t, u, subagent), 1, 0, "{\"s\":1}\n")
	checkChunk(t, chunkOf(t, u, toolResult), 1, 0, "output without a final newline\nend")
	checkChunk(t, chunkOf(t, u, backup), 1, 0, "v1")
	want := map[string]int{transcript: 1, subagent: 1, toolResult: 1, backup: 1}
	if !maps.Equal(u.Manifest, want) {
		t.Fatalf("manifest = %v, want %v", u.Manifest, want)
	}

	// Nothing changed but the partial line: no chunk, the same manifest.
	appendTo(t, dir, transcript, "3")
	if u := m.update(dir); len(u.Chunks) != 0 || !maps.Equal(u.Manifest, want) {
		t.Fatalf("update of unchanged files = %d chunks, manifest %v; want none and %v", len(u.Chunks), u.Manifest, want)
	}

	// The transcript's line completes and another follows: an append from the mirrored end. The
	// tool result is rewritten in place (same size), a backup is added, the subagent stands.
	appendTo(t, dir, transcript, "}\n{\"n\":4}\n")
	put(t, dir, toolResult, "OUTPUT without a final newline\nend")
	const backup2 = "file-history/" + mirrorSession + "/3f2a9c@v2"
	put(t, dir, backup2, "v2")
	u = m.sync(dir)
	if len(u.Chunks) != 3 {
		t.Fatalf("second update has %d chunks, want 3 (transcript, tool result, new backup)", len(u.Chunks))
	}
	full := "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"
	checkChunk(t, chunkOf(t, u, transcript), 2, int64(len("{\"n\":1}\n{\"n\":2}\n")), full)
	checkChunk(t, chunkOf(t, u, toolResult), 2, 0, "OUTPUT without a final newline\nend")
	checkChunk(t, chunkOf(t, u, backup2), 1, 0, "v2")
	want = map[string]int{transcript: 2, subagent: 1, toolResult: 2, backup: 1, backup2: 1}
	if !maps.Equal(u.Manifest, want) {
		t.Fatalf("manifest = %v, want %v", u.Manifest, want)
	}

	// A file that grew but whose mirrored part changed is stored whole; so is one that shrank.
	rewritten := "{\"n\":0}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n"
	put(t, dir, transcript, rewritten)
	put(t, dir, subagent, "")
	u = m.sync(dir)
	checkChunk(t, chunkOf(t, u, transcript), 3, 0, rewritten)
	checkChunk(t, chunkOf(t, u, subagent), 2, 0, "")

	// What the mirror keeps is one version per file: the transcript's appends went with its
	// new version.
	state, err := store.MirrorState(t.Context(), m.db, mirrorSession)
	if err != nil {
		t.Fatal(err)
	}
	if f := state[transcript]; f.Seq != 3 || f.Chunks != 1 {
		t.Fatalf("the transcript's mirror after a rewrite = %+v, want chunk 3 alone", f)
	}
}

func TestMirrorChainLimitStartsNewVersion(t *testing.T) {
	t.Parallel()
	m, dir := newMirrorDB(t), t.TempDir()
	content := "{\"line\":0}\n"
	put(t, dir, transcript, content)
	m.sync(dir)
	for i := 1; i < mirrorChainLimit; i++ {
		line := fmt.Sprintf("{\"line\":%d}\n", i)
		appendTo(t, dir, transcript, line)
		c := chunkOf(t, m.sync(dir), transcript)
		checkChunk(t, c, i+1, int64(len(content)), content+line)
		content += line
	}
	state, err := store.MirrorState(t.Context(), m.db, mirrorSession)
	if err != nil {
		t.Fatal(err)
	}
	if f := state[transcript]; f.Chunks != mirrorChainLimit || f.Seq != mirrorChainLimit {
		t.Fatalf("after %d appends the chain is %+v, want %d chunks", mirrorChainLimit-1, f, mirrorChainLimit)
	}

	// The chain is full: the next append stores the whole file as a new version.
	appendTo(t, dir, transcript, "{\"line\":\"last\"}\n")
	content += "{\"line\":\"last\"}\n"
	checkChunk(t, chunkOf(t, m.sync(dir), transcript), mirrorChainLimit+1, 0, content)
	chunks, _, raw, err := store.MirrorSize(t.Context(), m.db, mirrorSession)
	if err != nil {
		t.Fatal(err)
	}
	if chunks != 1 || raw != int64(len(content)) {
		t.Fatalf("after the new version the mirror keeps %d chunks of %d bytes, want 1 of %d", chunks, raw, len(content))
	}

	// And the next append chains onto it again.
	appendTo(t, dir, transcript, "{\"line\":\"after\"}\n")
	checkChunk(t, chunkOf(t, m.sync(dir), transcript), mirrorChainLimit+2, int64(len(content)), content+"{\"line\":\"after\"}\n")
	content += "{\"line\":\"after\"}\n"

	// A restore rebuilds the file from the new version and its append.
	fresh := t.TempDir()
	if n, err := restoreSession(t.Context(), m.db, fresh, mirrorSession); err != nil || n != 1 {
		t.Fatalf("restoreSession = %d, %v; want 1 file", n, err)
	}
	if got := readFolder(t, fresh).contents(); !maps.Equal(got, map[string]string{transcript: content}) {
		t.Fatalf("restored %v", got)
	}
}

// mirrorHistory mirrors, in dir, a session over three commits (appends, a rewrite and a file
// added late) and returns the files as the mirror holds them: the transcripts up to their last
// complete line.
func mirrorHistory(t *testing.T, m *mirrorDB, dir string) map[string]string {
	t.Helper()
	put(t, dir, transcript, "{\"n\":1}\n")
	put(t, dir, subagentMeta, "{\"agentType\":\"explore\"}")
	put(t, dir, backup, "package main\n")
	m.sync(dir)
	appendTo(t, dir, transcript, "{\"n\":2}\n")
	put(t, dir, subagent, "{\"s\":1}\n")
	m.sync(dir)
	appendTo(t, dir, transcript, "{\"n\":3}\n{\"n\":4, \"partial")
	put(t, dir, backup, "package main\n\nfunc main() {}\n")
	put(t, dir, toolResult, strings.Repeat("a large tool output ", 5000))
	m.sync(dir)
	want := readFolder(t, dir).contents()
	want[transcript] = "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"
	return want
}

func TestMirrorRestoreOntoEmptyFolder(t *testing.T) {
	t.Parallel()
	m := newMirrorDB(t)
	want := mirrorHistory(t, m, t.TempDir())

	fresh := t.TempDir()
	n, err := restoreSession(t.Context(), m.db, fresh, mirrorSession)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("restoreSession wrote %d files, want %d", n, len(want))
	}
	restored := readFolder(t, fresh)
	if got := restored.contents(); !maps.Equal(got, want) {
		t.Fatalf("restored files differ from the mirrored ones:\n got %v\nwant %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}

	// A second restore finds every file as the mirror has it and writes nothing.
	age(t, fresh)
	aged := readFolder(t, fresh)
	if n, err := restoreSession(t.Context(), m.db, fresh, mirrorSession); err != nil || n != 0 {
		t.Fatalf("a restore onto an exact copy = %d, %v; want 0", n, err)
	}
	if got := readFolder(t, fresh); !maps.Equal(got, aged) {
		t.Fatal("a restore onto an exact copy touched files")
	}
}

func TestMirrorRestoreOfUnmirroredSessionLeavesFolderAlone(t *testing.T) {
	t.Parallel()
	m, dir := newMirrorDB(t), t.TempDir()
	put(t, dir, transcript, "{\"local\":1}\n")
	before := readFolder(t, dir)
	if n, err := restoreSession(t.Context(), m.db, dir, mirrorSession); err != nil || n != 0 {
		t.Fatalf("restoreSession of a session never mirrored = %d, %v; want 0, nil", n, err)
	}
	if got := readFolder(t, dir); !maps.Equal(got, before) {
		t.Fatal("restoreSession of a session never mirrored touched the folder")
	}
}

func TestMirrorRestoreReplacesOnlyFilesThatDiffer(t *testing.T) {
	t.Parallel()
	m := newMirrorDB(t)
	hostA, hostB := t.TempDir(), t.TempDir()

	// Host B ran the first turn, then lost an attempt that wrote past the committed point.
	put(t, hostB, transcript, "{\"n\":1}\n")
	put(t, hostB, subagentMeta, "{\"agentType\":\"explore\"}")
	put(t, hostB, backup, "package main\n")
	m.sync(hostB)
	appendTo(t, hostB, transcript, "{\"lost\":true}\n")
	put(t, hostB, toolResult, "what the lost attempt's tool wrote")

	// Host A took the session from there and committed two turns.
	if n, err := restoreSession(t.Context(), m.db, hostA, mirrorSession); err != nil || n != 3 {
		t.Fatalf("restore onto host A = %d, %v; want 3 files", n, err)
	}
	appendTo(t, hostA, transcript, "{\"n\":2}\n")
	put(t, hostA, subagent, "{\"s\":1}\n")
	m.sync(hostA)
	appendTo(t, hostA, transcript, "{\"n\":3}\n")
	put(t, hostA, toolResult, "the committed tool output")
	m.sync(hostA)
	want := readFolder(t, hostA).contents()

	// Back on host B: the transcript and the tool result differ, the subagent transcript is
	// missing, the metadata and the backup are the mirror's and stay as they are.
	age(t, hostB)
	before := readFolder(t, hostB)
	n, err := restoreSession(t.Context(), m.db, hostB, mirrorSession)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("restoreSession wrote %d files, want 3", n)
	}
	after := readFolder(t, hostB)
	if got := after.contents(); !maps.Equal(got, want) {
		t.Fatalf("host B after the restore holds\n%q\nwant\n%q", got, want)
	}
	for _, rel := range []string{subagentMeta, backup} {
		if after[rel].mtime != before[rel].mtime {
			t.Errorf("%s matched the mirror and was rewritten", rel)
		}
	}
	for _, rel := range []string{transcript, toolResult} {
		if after[rel].mtime.Equal(before[rel].mtime) {
			t.Errorf("%s differed from the mirror and was not rewritten", rel)
		}
	}
	for rel := range after {
		if strings.Contains(rel, ".restore-") {
			t.Errorf("a restore left its temporary file %s", rel)
		}
	}
}

func deflate(t *testing.T, data string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMirrorRestoreRefusesCorruptMirror(t *testing.T) {
	t.Parallel()
	const line1, line2, line3 = "{\"n\":1}\n", "{\"n\":2}\n", "{\"n\":3}\n"
	corruptions := []struct {
		name string
		sql  string
		args func(t *testing.T) []any
	}{
		{"a chunk's bytes altered",
			`UPDATE session_chunks SET data = $2 WHERE path = $1 AND seq = 2`,
			func(t *testing.T) []any { return []any{transcript, deflate(t, "{\"n\":9}\n")} }},
		{"the last chunk's bytes altered with the file hash to match",
			`UPDATE session_chunks SET data = $2, file_sha256 = $3 WHERE path = $1 AND seq = 3`,
			func(t *testing.T) []any {
				return []any{transcript, deflate(t, "{\"n\":9}\n"), digest([]byte(line1 + line2 + "{\"n\":9}\n"))}
			}},
		{"a chunk longer than it says",
			`UPDATE session_chunks SET data = $2 WHERE path = $1 AND seq = 2`,
			func(t *testing.T) []any { return []any{transcript, deflate(t, line2+"more")} }},
		{"a chunk that does not inflate",
			`UPDATE session_chunks SET data = '\xffffffff' WHERE path = $1 AND seq = 2`,
			func(*testing.T) []any { return []any{transcript} }},
		{"a chunk missing in the chain",
			`DELETE FROM session_chunks WHERE path = $1 AND seq = 2`,
			func(*testing.T) []any { return []any{transcript} }},
		{"the first chunk missing",
			`DELETE FROM session_chunks WHERE path = $1 AND seq = 1`,
			func(*testing.T) []any { return []any{transcript} }},
		{"the last chunk missing",
			`DELETE FROM session_chunks WHERE path = $1 AND seq = 3`,
			func(*testing.T) []any { return []any{transcript} }},
		{"the manifest names a chunk never stored",
			`UPDATE session_mirrors SET manifest = jsonb_set(manifest, ARRAY[$1], '4')`,
			func(*testing.T) []any { return []any{transcript} }},
		{"the file's hash does not match",
			`UPDATE session_chunks SET file_sha256 = $2 WHERE path = $1 AND seq = 3`,
			func(*testing.T) []any { return []any{transcript, digest([]byte("other"))} }},
		{"a path that leaves the config folder",
			`WITH m AS (UPDATE session_mirrors SET manifest = manifest - $1 || jsonb_build_object('../outside', 3))
			UPDATE session_chunks SET path = '../outside' WHERE path = $1`,
			func(*testing.T) []any { return []any{transcript} }},
	}
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The transcript is three chunks: its first version and two appends. The backup
			// sorts before it, so a restore that wrote as it went would have written it.
			m, src := newMirrorDB(t), t.TempDir()
			put(t, src, backup, "backed up")
			put(t, src, transcript, line1)
			m.sync(src)
			appendTo(t, src, transcript, line2)
			m.sync(src)
			appendTo(t, src, transcript, line3)
			m.sync(src)
			if _, err := m.db.Exec(t.Context(), c.sql, c.args(t)...); err != nil {
				t.Fatal(err)
			}

			// The host's copy: a stale backup, no transcript.
			parent := t.TempDir()
			dir := filepath.Join(parent, "config")
			put(t, dir, backup, "stale")
			age(t, dir)
			before := readFolder(t, parent)
			n, err := restoreSession(t.Context(), m.db, dir, mirrorSession)
			if !errors.Is(err, errMirrorCorrupt) {
				t.Fatalf("restoreSession = %d, %v; want a corrupt mirror", n, err)
			}
			if f := mirrorFailure(err); f.Type != task.ErrTypeSessionMirrorCorrupt {
				t.Errorf("the attempt fails as %s, want %s", f.Type, task.ErrTypeSessionMirrorCorrupt)
			}
			if n != 0 {
				t.Errorf("restoreSession reports %d files written", n)
			}
			if got := readFolder(t, parent); !maps.Equal(got, before) {
				t.Errorf("a corrupt mirror changed the folder:\n got %v\nwant %v", got, before)
			}
		})
	}
}

func TestMirrorFailureKinds(t *testing.T) {
	t.Parallel()
	corrupt := fmt.Errorf("%w: %s: chunk 2 does not match its hash", errMirrorCorrupt, transcript)
	if f := mirrorFailure(corrupt); f.Type != task.ErrTypeSessionMirrorCorrupt || task.Retryable(f.Type) {
		t.Errorf("a corrupt mirror fails the attempt as %s (retryable %v), want %s, not retried",
			f.Type, task.Retryable(f.Type), task.ErrTypeSessionMirrorCorrupt)
	}
	db := pgtest.NewPool(t)
	db.Close()
	_, err := restoreSession(t.Context(), db, t.TempDir(), mirrorSession)
	if err == nil || errors.Is(err, errMirrorCorrupt) {
		t.Fatalf("restoreSession on a closed pool = %v, want an error that is not a corrupt mirror", err)
	}
	if f := mirrorFailure(err); f.Type != task.ErrTypeStoreUnavailable {
		t.Errorf("a mirror that cannot be read fails the attempt as %s, want %s", f.Type, task.ErrTypeStoreUnavailable)
	}
}

func TestMirrorWaitsForTheTranscriptToHoldTheResumePoint(t *testing.T) {
	t.Parallel()
	const resumeAt = "9b1d2c3e-0000-4000-8000-00000000000a"
	line := "{\"uuid\":\"" + resumeAt + "\"}\n"
	for _, c := range []struct {
		name          string
		before, later string // what the CLI has written of the line when the commit starts, and the rest
	}{
		{"nothing of the line written yet", "", line},
		{"the line written in part", line[:20], line[20:]},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m, dir := newMirrorDB(t), t.TempDir()
			put(t, dir, transcript, "{\"uuid\":\"earlier\"}\n")
			m.sync(dir)
			appendTo(t, dir, transcript, c.before)
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(300 * time.Millisecond)
				appendTo(t, dir, transcript, c.later)
			}()
			defer func() { <-done }()

			e := &Engine{cfg: Config{DB: m.db}}
			u, ferr := e.mirror(t.Context(), dir, mirrorWorkspace, mirrorSession, resumeAt)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if u == nil || len(u.Chunks) != 1 {
				t.Fatalf("the commit's update = %+v, want the transcript's new line", u)
			}
			checkChunk(t, u.Chunks[0], 2, int64(len("{\"uuid\":\"earlier\"}\n")), "{\"uuid\":\"earlier\"}\n"+line)
		})
	}
}

func TestMirrorWaitLooksAtCompleteLinesOfTheTranscript(t *testing.T) {
	t.Parallel()
	const uuid = "9b1d2c3e-0000-4000-8000-00000000000b"
	line := "{\"uuid\":\"" + uuid + "\"}\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"no transcript", map[string]string{backup: line}, false},
		{"a complete line", map[string]string{transcript: "{}\n" + line}, true},
		{"an earlier line", map[string]string{transcript: line + "{}\n{}\n"}, true},
		{"a partial last line", map[string]string{transcript: "{}\n" + line[:len(line)-1]}, false},
		{"another session's transcript", map[string]string{"projects/-work-repo/other.jsonl": line}, false},
		{"a subagent's transcript only", map[string]string{transcript: "{}\n", subagent: line}, false},
		{"the session under another workspace", map[string]string{
			transcript: "{}\n", "projects/-other/" + mirrorSession + ".jsonl": line}, true},
	} {
		dir := t.TempDir()
		for rel, content := range c.files {
			put(t, dir, rel, content)
		}
		var marks mirrorMarks
		transcripts, err := marks.transcripts(dir, mirrorWorkspace, mirrorSession, []string{"projects/-other/" + mirrorSession + ".jsonl"})
		if err != nil {
			t.Fatal(err)
		}
		got, found, err := marks.holds(dir, mirrorSession, uuid, transcripts, true)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want || found != (c.name != "no transcript" && c.name != "another session's transcript") {
			t.Errorf("%s: holds = %v, found %v; want %v", c.name, got, found, c.want)
		}
	}
}
