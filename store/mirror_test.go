package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// The store keeps a chunk's data as given: these tests stand for compression with a prefix, so
// that stored and raw sizes differ.
const packed = "z:"

func sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// piece is chunk seq of path that brings the file to content, its bytes from offset on.
func piece(path string, seq int, offset int, content string) store.MirrorChunk {
	data := content[offset:]
	return store.MirrorChunk{
		Path: path, Seq: seq, FileOffset: int64(offset),
		Data: []byte(packed + data), DataSize: len(data), DataSHA256: sum(data),
		FileSize: int64(len(content)), FileSHA256: sum(content),
	}
}

// commitMirror runs turn `turn` of taskID as one attempt and commits it in session with the
// mirror update u.
func commitMirror(t *testing.T, db store.TxDB, taskID string, turn int, session string, u *store.MirrorUpdate) (bool, error) {
	t.Helper()
	attemptID := fmt.Sprintf("a%d", turn)
	begin(t, db, attempt(taskID, attemptID, turn))
	return store.CommitTurn(t.Context(), db, store.TurnCommit{
		TaskID: taskID, Turn: turn, AttemptID: attemptID, SessionID: session,
		LastMessageUUID: fmt.Sprintf("u%d", turn), Status: task.TurnCompleted, Mirror: u,
	})
}

func mustCommitMirror(t *testing.T, db store.TxDB, taskID string, turn int, session string, u *store.MirrorUpdate) {
	t.Helper()
	applied, err := commitMirror(t, db, taskID, turn, session, u)
	must(t, err)
	if !applied {
		t.Fatalf("commit of turn %d not applied", turn)
	}
}

func readMirror(t *testing.T, db store.TxDB, session string) store.Mirror {
	t.Helper()
	m, err := store.ReadMirror(t.Context(), db, session)
	must(t, err)
	return m
}

// storedSeqs lists, per path, the sequence numbers session_chunks holds for a session.
func storedSeqs(t *testing.T, db store.DB, session string) map[string][]int {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT path, seq FROM session_chunks WHERE session_id = $1 ORDER BY path, seq`, session)
	must(t, err)
	out := map[string][]int{}
	var path string
	var seq int
	_, err = pgx.ForEachRow(rows, []any{&path, &seq}, func() error {
		out[path] = append(out[path], seq)
		return nil
	})
	must(t, err)
	return out
}

func checkMirror(t *testing.T, got store.Mirror, manifest map[string]int, files map[string][]store.MirrorChunk) {
	t.Helper()
	if !maps.Equal(got.Manifest, manifest) {
		t.Errorf("manifest = %v, want %v", got.Manifest, manifest)
	}
	if !reflect.DeepEqual(got.Files, files) {
		t.Errorf("chunks:\n got %s\nwant %s", describe(got.Files), describe(files))
	}
}

// describe names each file's chunks as seq@offset+size, with the data.
func describe(files map[string][]store.MirrorChunk) string {
	var b strings.Builder
	for _, path := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "%s:", path)
		for _, c := range files[path] {
			fmt.Fprintf(&b, " %d@%d+%d %q (file %d)", c.Seq, c.FileOffset, c.DataSize, c.Data, c.FileSize)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func TestMirrorKeepsAppendsAndNewVersions(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const tr, res = "projects/w/s.jsonl", "projects/w/s/tool-results/r.txt"

	// Turn 1: both files new.
	tr1, res1 := piece(tr, 1, 0, "a\n"), piece(res, 1, 0, "result")
	mustCommitMirror(t, db, "t", 1, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{tr1, res1}, Manifest: map[string]int{tr: 1, res: 1},
	})
	checkMirror(t, readMirror(t, db, "s"), map[string]int{tr: 1, res: 1},
		map[string][]store.MirrorChunk{tr: {tr1}, res: {res1}})

	// Turn 2: the transcript grows by an append; the tool result is unchanged and keeps its chunk.
	tr2 := piece(tr, 2, 2, "a\nbb\n")
	mustCommitMirror(t, db, "t", 2, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{tr2}, Manifest: map[string]int{tr: 2, res: 1},
	})
	checkMirror(t, readMirror(t, db, "s"), map[string]int{tr: 2, res: 1},
		map[string][]store.MirrorChunk{tr: {tr1, tr2}, res: {res1}})
	state, err := store.MirrorState(ctx, db, "s")
	must(t, err)
	want := map[string]store.MirroredFile{
		tr:  {Path: tr, Seq: 2, FileSize: 5, FileSHA256: sum("a\nbb\n"), Chunks: 2},
		res: {Path: res, Seq: 1, FileSize: 6, FileSHA256: sum("result"), Chunks: 1},
	}
	if !reflect.DeepEqual(state, want) {
		t.Errorf("MirrorState after an append:\n got %+v\nwant %+v", state, want)
	}

	// Turn 3: the transcript is stored whole as a new version and appended to in the same
	// commit; its old version goes, and nothing else of the session.
	tr3, tr4 := piece(tr, 3, 0, "a\nbb\nccc\n"), piece(tr, 4, 9, "a\nbb\nccc\nd\n")
	mustCommitMirror(t, db, "t", 3, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{tr3, tr4}, Manifest: map[string]int{tr: 4, res: 1},
	})
	checkMirror(t, readMirror(t, db, "s"), map[string]int{tr: 4, res: 1},
		map[string][]store.MirrorChunk{tr: {tr3, tr4}, res: {res1}})
	if got := storedSeqs(t, db, "s"); !reflect.DeepEqual(got, map[string][]int{tr: {3, 4}, res: {1}}) {
		t.Errorf("chunks kept after a new version: %v, want the transcript's 3 and 4 and the result's 1", got)
	}
	state, err = store.MirrorState(ctx, db, "s")
	must(t, err)
	if f := state[tr]; f.Seq != 4 || f.Chunks != 2 || f.FileSize != 11 || string(f.FileSHA256) != string(sum("a\nbb\nccc\nd\n")) {
		t.Errorf("MirrorState of the transcript after a new version = %+v", f)
	}

	// Turn 4: the tool result is rewritten; the manifest stops naming a file the session lost.
	res2 := piece(res, 2, 0, "other")
	mustCommitMirror(t, db, "t", 4, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{res2}, Manifest: map[string]int{res: 2},
	})
	checkMirror(t, readMirror(t, db, "s"), map[string]int{res: 2},
		map[string][]store.MirrorChunk{tr: {tr3, tr4}, res: {res2}})
}

func TestMirrorNewVersionDeletesOnlyItsOwnFile(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	const a, b = "file-history/s/a@v1", "file-history/s/b@v1"

	mustCommitMirror(t, pool, "t", 1, "s", &store.MirrorUpdate{
		Chunks:   []store.MirrorChunk{piece(a, 1, 0, "x"), piece(b, 1, 0, "y"), piece(b, 2, 1, "yy")},
		Manifest: map[string]int{a: 1, b: 2},
	})
	// Another session with the same path.
	mustCommitMirror(t, pool, "u", 1, "other", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{piece(a, 1, 0, "o")}, Manifest: map[string]int{a: 1},
	})
	mustCommitMirror(t, pool, "t", 2, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{piece(a, 2, 0, "xx")}, Manifest: map[string]int{a: 2, b: 2},
	})
	if got := storedSeqs(t, pool, "s"); !reflect.DeepEqual(got, map[string][]int{a: {2}, b: {1, 2}}) {
		t.Errorf("session s keeps %v, want a's new version only and b's chain whole", got)
	}
	if got := storedSeqs(t, pool, "other"); !reflect.DeepEqual(got, map[string][]int{a: {1}}) {
		t.Errorf("another session keeps %v after s stored a new version of the same path", got)
	}
	checkMirror(t, readMirror(t, pool, "other"), map[string]int{a: 1},
		map[string][]store.MirrorChunk{a: {piece(a, 1, 0, "o")}})
}

func TestReadMirrorOfUnmirroredSession(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	if _, err := store.ReadMirror(ctx, db, "never"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadMirror of a session never mirrored: %v, want ErrNotFound", err)
	}
	state, err := store.MirrorState(ctx, db, "never")
	must(t, err)
	if len(state) != 0 {
		t.Fatalf("MirrorState of a session never mirrored = %v", state)
	}
	chunks, stored, raw, err := store.MirrorSize(ctx, db, "never")
	must(t, err)
	if chunks != 0 || stored != 0 || raw != 0 {
		t.Fatalf("MirrorSize of a session never mirrored = %d, %d, %d", chunks, stored, raw)
	}
}

func TestMirrorSize(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const tr = "projects/w/s.jsonl"
	mustCommitMirror(t, db, "t", 1, "s", &store.MirrorUpdate{
		Chunks:   []store.MirrorChunk{piece(tr, 1, 0, "abc\n"), piece("projects/w/s/subagents/x.jsonl", 1, 0, "")},
		Manifest: map[string]int{tr: 1, "projects/w/s/subagents/x.jsonl": 1},
	})
	mustCommitMirror(t, db, "t", 2, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{piece(tr, 2, 4, "abc\nde\n")}, Manifest: map[string]int{tr: 2},
	})
	mustCommitMirror(t, db, "u", 1, "other", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{piece(tr, 1, 0, "not counted")}, Manifest: map[string]int{tr: 1},
	})
	chunks, stored, raw, err := store.MirrorSize(ctx, db, "s")
	must(t, err)
	// Raw: 4 + 0 + 3 bytes; stored: each with the stand-in's prefix.
	if chunks != 3 || raw != 7 || stored != 7+3*int64(len(packed)) {
		t.Fatalf("MirrorSize = %d chunks, %d stored, %d raw; want 3, %d, 7", chunks, stored, raw, 7+3*len(packed))
	}
	// A new version replaces what it stands for.
	mustCommitMirror(t, db, "t", 3, "s", &store.MirrorUpdate{
		Chunks: []store.MirrorChunk{piece(tr, 3, 0, "abc\nde\nf\n")}, Manifest: map[string]int{tr: 3},
	})
	chunks, stored, raw, err = store.MirrorSize(ctx, db, "s")
	must(t, err)
	if chunks != 2 || raw != 9 || stored != 9+2*int64(len(packed)) {
		t.Fatalf("MirrorSize after a new version = %d chunks, %d stored, %d raw; want 2, %d, 9", chunks, stored, raw, 9+2*len(packed))
	}
}

func TestMirrorIsWrittenWithTheCommitOrNotAtAll(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const tr = "projects/w/s.jsonl"
	first := &store.MirrorUpdate{Chunks: []store.MirrorChunk{piece(tr, 1, 0, "a\n")}, Manifest: map[string]int{tr: 1}}
	mustCommitMirror(t, db, "t", 1, "s", first)
	want := readMirror(t, db, "s")

	// A commit without an update leaves the mirror alone.
	mustCommitMirror(t, db, "t", 2, "s", nil)
	checkMirror(t, readMirror(t, db, "s"), want.Manifest, want.Files)

	// A chunk whose sequence number is taken (computed from a state another commit has moved
	// past) refuses the whole commit: the resume point does not move.
	begin(t, db, attempt("t", "a3", 3))
	before := snapshot(t, db, "t")
	taken := &store.MirrorUpdate{Chunks: []store.MirrorChunk{piece(tr, 1, 0, "a\nX\n")}, Manifest: map[string]int{tr: 1}}
	_, err := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 3, AttemptID: "a3", SessionID: "s", LastMessageUUID: "u3", Status: task.TurnCompleted, Mirror: taken,
	})
	if err == nil {
		t.Fatal("a commit with a taken chunk sequence number was accepted")
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a refused mirror left the commit half done:\nbefore %s\nafter  %s", before, got)
	}
	checkMirror(t, readMirror(t, db, "s"), want.Manifest, want.Files)

	// A mirror needs the session it belongs to.
	_, err = store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 3, AttemptID: "a3", Status: task.TurnCompleted,
		Mirror: &store.MirrorUpdate{Chunks: []store.MirrorChunk{piece(tr, 2, 2, "a\nb\n")}, Manifest: map[string]int{tr: 2}},
	})
	if err == nil {
		t.Fatal("a mirror without a session id was accepted")
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a mirror without a session left the commit half done:\nbefore %s\nafter  %s", before, got)
	}

	// The turn then commits with a good update; a second delivery of a commit of the finished
	// turn writes nothing, its mirror included.
	good := &store.MirrorUpdate{Chunks: []store.MirrorChunk{piece(tr, 2, 2, "a\nb\n")}, Manifest: map[string]int{tr: 2}}
	applied, err := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 3, AttemptID: "a3", SessionID: "s", LastMessageUUID: "u3", Status: task.TurnCompleted, Mirror: good,
	})
	must(t, err)
	if !applied {
		t.Fatal("the good commit of turn 3 was not applied")
	}
	after := readMirror(t, db, "s")
	late := &store.MirrorUpdate{Chunks: []store.MirrorChunk{piece(tr, 3, 0, "late\n")}, Manifest: map[string]int{tr: 3}}
	applied, err = store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 3, AttemptID: "a3", SessionID: "s", LastMessageUUID: "u3", Status: task.TurnCompleted, Mirror: late,
	})
	must(t, err)
	if applied {
		t.Fatal("a second commit of turn 3 was applied")
	}
	checkMirror(t, readMirror(t, db, "s"), after.Manifest, after.Files)
	var turn int
	must(t, db.QueryRow(ctx, `SELECT turn FROM session_mirrors WHERE session_id = 's'`).Scan(&turn))
	if turn != 3 {
		t.Fatalf("the mirror records turn %d as its last writer, want 3", turn)
	}
}

// midReadDB runs between, in ReadMirror's transaction, the read of the manifest and the read of
// the chunks, once.
type midReadDB struct {
	*pgxpool.Pool
	between func()
}

func (d midReadDB) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return midReadTx{Tx: tx, between: d.between}, nil
}

type midReadTx struct {
	pgx.Tx
	between func()
}

func (tx midReadTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx.between()
	return tx.Tx.Query(ctx, sql, args...)
}

func TestReadMirrorSeesOneCommitDuringConcurrentWrite(t *testing.T) {
	t.Parallel()
	ctx, pool := t.Context(), pgtest.NewPool(t)
	const tr, res = "projects/w/s.jsonl", "projects/w/s/tool-results/r.txt"
	mustCommitMirror(t, pool, "t", 1, "s", &store.MirrorUpdate{
		Chunks:   []store.MirrorChunk{piece(tr, 1, 0, "a\n"), piece(res, 1, 0, "r")},
		Manifest: map[string]int{tr: 1, res: 1},
	})
	before := readMirror(t, pool, "s")

	// Another host commits after the reader has read the manifest and before it reads the
	// chunks: an append to the transcript, a new version of the tool result (which deletes the
	// chunk the reader's manifest names).
	var once sync.Once
	db := midReadDB{Pool: pool, between: func() {
		once.Do(func() {
			mustCommitMirror(t, pool, "t", 2, "s", &store.MirrorUpdate{
				Chunks:   []store.MirrorChunk{piece(tr, 2, 2, "a\nb\n"), piece(res, 2, 0, "r2")},
				Manifest: map[string]int{tr: 2, res: 2},
			})
		})
	}}
	got, err := store.ReadMirror(ctx, db, "s")
	must(t, err)
	checkMirror(t, got, before.Manifest, before.Files)

	checkMirror(t, readMirror(t, pool, "s"), map[string]int{tr: 2, res: 2}, map[string][]store.MirrorChunk{
		tr: {piece(tr, 1, 0, "a\n"), piece(tr, 2, 2, "a\nb\n")}, res: {piece(res, 2, 0, "r2")},
	})
}
