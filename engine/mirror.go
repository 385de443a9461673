package engine

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// The session mirror lets any host continue any task: what the CLI needs to resume a session —
// its transcript (projects/<workspace slug>/<session>.jsonl), the session's folder beside it
// (subagent transcripts, tool results stored apart) and its file-history backups — is kept in
// Postgres as chunks, written with each commit (mirrorUpdate), and rebuilt into a host's config
// folder before a process resumes there (restoreSession) whenever the host's copy is not
// exactly the mirror's.

// mirrorChainLimit bounds how many chunks one version of a mirrored file spans: past it, the
// next commit stores the whole file as a new version and the old one is deleted. It bounds the
// rows a restore reads and keeps the stored size near the compressed size of the files.
const mirrorChainLimit = 64

// errMirrorCorrupt reports a mirror that does not rebuild what its manifest and hashes say.
var errMirrorCorrupt = errors.New("the session mirror is corrupt")

// update returns what the mirror needs to hold a session's files as they stand now, given
// the mirror's state: for each file, the bytes appended since the mirror's last chunk, or the
// whole file when it is new, was rewritten (its mirrored part changed) or its chain is long; and
// the manifest of them all. A transcript is taken up to its last complete line: the CLI may be
// writing the next. What this host mirrored before is neither read nor hashed again (fileMark).
func (m *mirrorMarks) update(configDir, workspace, sessionID string, state map[string]store.MirroredFile) (*store.MirrorUpdate, error) {
	files, err := m.sessionFiles(configDir, workspace, sessionID, slices.Collect(maps.Keys(state)))
	if err != nil {
		return nil, fmt.Errorf("listing the session's files: %w", err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	u := &store.MirrorUpdate{Manifest: make(map[string]int, len(files))}
	for _, rel := range files {
		c, seq, err := m.updateFile(configDir, sessionID, rel, state[rel])
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", rel, err)
		}
		if c != nil {
			u.Chunks = append(u.Chunks, *c)
		}
		u.Manifest[rel] = seq
	}
	return u, nil
}

// updateFile returns the chunk that brings the mirror of rel to the file as it stands, or nil
// when the mirror holds it already, and the file's sequence number in the manifest. prev is the
// mirror's state of the file (zero when it holds none).
func (m *mirrorMarks) updateFile(configDir, sessionID, rel string, prev store.MirroredFile) (*store.MirrorChunk, int, error) {
	path := filepath.Join(configDir, rel)
	info, err := m.files().Stat(path)
	if err != nil {
		return nil, 0, err
	}
	mk, marked := m.get(sessionID, rel)
	// The mark counts only while it describes what the mirror holds (no other host committed
	// the session since) and the file is the one it was read from.
	marked = marked && prev.Seq > 0 && mk.seq == prev.Seq && mk.size == prev.FileSize &&
		bytes.Equal(mk.sum, prev.FileSHA256) && os.SameFile(mk.info, info)
	switch transcript := strings.HasSuffix(rel, ".jsonl"); {
	case marked && !transcript && info.Size() == mk.size && info.ModTime().Equal(mk.info.ModTime()) &&
		info.ModTime().Before(mk.readAt.Add(-racyWindow)):
		return nil, prev.Seq, nil // unchanged, as its size and time prove
	case marked && transcript && prev.Chunks < mirrorChainLimit && info.Size() >= mk.size:
		c, ok, err := m.appended(path, rel, sessionID, mk, info)
		if err != nil || ok {
			if c == nil {
				return nil, prev.Seq, err
			}
			return c, c.Seq, err
		}
	}
	return m.whole(path, rel, sessionID, prev, info)
}

// appended returns the chunk of what was appended to a transcript since its mark, nil when no
// complete line was. ok is false when the transcript's mirrored part is no longer its start:
// the caller reads it whole.
func (m *mirrorMarks) appended(path, rel, sessionID string, mk fileMark, info fs.FileInfo) (c *store.MirrorChunk, ok bool, err error) {
	if same, err := m.startsAsMarked(path, mk); err != nil || !same {
		return nil, false, err
	}
	data, err := m.files().ReadAt(path, mk.size, -1)
	if err != nil {
		return nil, false, err
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	if len(data) == 0 {
		return nil, true, nil
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(mk.hash); err != nil {
		return nil, false, nil // a mark this build cannot continue: read the file whole
	}
	h.Write(data)
	chunk, err := newChunk(rel, mk.seq+1, mk.size, data, mk.size+int64(len(data)), h.Sum(nil))
	if err != nil {
		return nil, false, err
	}
	next := fileMark{seq: chunk.Seq, size: chunk.FileSize, sum: chunk.FileSHA256, info: info, readAt: time.Now(),
		head: mk.head, tail: lastBytes(append(slices.Clip(mk.tail), data...), markWindow)}
	if len(next.head) < markWindow {
		next.head = lastBytes(append(slices.Clip(mk.head), data...), -markWindow)
	}
	if next.hash, err = h.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		return nil, false, err
	}
	m.set(sessionID, rel, next)
	return &chunk, true, nil
}

// startsAsMarked reports whether the file at path still starts with what its mark describes,
// as far as the first and last bytes of the marked part show: a transcript the CLI rewrote in
// place or cut (resuming at an earlier entry) differs there.
func (m *mirrorMarks) startsAsMarked(path string, mk fileMark) (bool, error) {
	if mk.size <= 2*markWindow {
		b, err := m.files().ReadAt(path, 0, mk.size)
		return err == nil && bytes.HasPrefix(b, mk.head) && bytes.HasSuffix(b, mk.tail) && int64(len(b)) == mk.size, err
	}
	head, err := m.files().ReadAt(path, 0, int64(len(mk.head)))
	if err != nil || !bytes.Equal(head, mk.head) {
		return false, err
	}
	tail, err := m.files().ReadAt(path, mk.size-int64(len(mk.tail)), int64(len(mk.tail)))
	return err == nil && bytes.Equal(tail, mk.tail), err
}

// whole reads the file whole and returns the chunk that brings the mirror to it (the bytes past
// the mirror's end when what the mirror holds is still the file's start), or nil when the mirror
// holds it already; it marks the file.
func (m *mirrorMarks) whole(path, rel, sessionID string, prev store.MirroredFile, info fs.FileInfo) (*store.MirrorChunk, int, error) {
	readAt := time.Now()
	content, err := m.files().ReadAt(path, 0, -1)
	if err != nil {
		return nil, 0, err
	}
	if strings.HasSuffix(rel, ".jsonl") {
		content = content[:bytes.LastIndexByte(content, '\n')+1]
	}
	h := sha256.New()
	h.Write(content)
	mk := fileMark{seq: prev.Seq, size: int64(len(content)), sum: h.Sum(nil), info: info, readAt: readAt,
		head: lastBytes(content, -markWindow), tail: lastBytes(content, markWindow)}
	if mk.hash, err = h.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		return nil, 0, err
	}
	known := prev.Seq > 0
	if known && mk.size == prev.FileSize && bytes.Equal(mk.sum, prev.FileSHA256) {
		m.set(sessionID, rel, mk)
		return nil, prev.Seq, nil // unchanged
	}
	offset := int64(0)
	if known && prev.Chunks < mirrorChainLimit && mk.size > prev.FileSize &&
		bytes.Equal(digest(content[:prev.FileSize]), prev.FileSHA256) {
		offset = prev.FileSize // appended to: only the new bytes
	}
	c, err := newChunk(rel, prev.Seq+1, offset, content[offset:], mk.size, mk.sum)
	if err != nil {
		return nil, 0, err
	}
	mk.seq = c.Seq
	m.set(sessionID, rel, mk)
	return &c, c.Seq, nil
}

// lastBytes returns a copy of the last n bytes of b, or of its first -n bytes when n < 0.
func lastBytes(b []byte, n int) []byte {
	if n < 0 {
		return slices.Clone(b[:min(-n, len(b))])
	}
	return slices.Clone(b[max(len(b)-n, 0):])
}

// mirror takes what the session mirror needs of the committed turn, once the transcript holds
// the entry the commit resumes at (the CLI writes it before its result; a short wait covers a
// slow disk). workspace is the folder the CLI runs in, which names its transcript's folder.
func (e *Engine) mirror(ctx context.Context, configDir, workspace, sessionID, lastUUID string) (*store.MirrorUpdate, *Error) {
	failed := func(err error) *Error {
		if ctx.Err() != nil {
			return contextFailure(ctx)
		}
		return &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("mirroring the session: %w", err)}
	}
	m := &e.marks
	state, err := store.MirrorState(ctx, e.cfg.DB, sessionID)
	if err != nil {
		return nil, failed(err)
	}
	transcripts, err := m.transcripts(configDir, workspace, sessionID, slices.Collect(maps.Keys(state)))
	if err != nil {
		return nil, failed(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for first := true; ; first = false {
		// The transcript is searched before the update is taken: it only grows, so what this
		// read holds, the update's view of the file holds too.
		held, found, err := m.holds(configDir, sessionID, lastUUID, transcripts, first)
		if err != nil {
			return nil, failed(err)
		}
		// A session without a transcript here has nothing to wait for: the CLI keeps none in this
		// folder (or not yet at all); the mirror takes what there is.
		if held || !found || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, contextFailure(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
	u, err := m.update(configDir, workspace, sessionID, state)
	if err != nil {
		return nil, failed(err)
	}
	return u, nil
}

// holds reports whether the session's main transcripts in configDir hold uuid in their complete
// lines, the part the mirror takes. It reads what was written since the transcript's mark, and,
// when whole is set and the entry is not there, what the mark holds too: a transcript that did
// not change may not hold the entry yet, and one that did may hold it from before. found says
// whether the session has a transcript there at all.
func (m *mirrorMarks) holds(configDir, sessionID, uuid string, transcripts []string, whole bool) (held, found bool, err error) {
	for _, rel := range transcripts {
		path := filepath.Join(configDir, rel)
		info, err := m.files().Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, found, fmt.Errorf("reading the transcript: %w", err)
		}
		found = true
		off := int64(0)
		if mk, ok := m.get(sessionID, rel); ok && os.SameFile(mk.info, info) && info.Size() >= mk.size {
			off = mk.size // a line boundary
		}
		content, err := m.files().ReadAt(path, off, -1)
		if err == nil && !bytes.Contains(content[:bytes.LastIndexByte(content, '\n')+1], []byte(uuid)) && whole && off > 0 {
			content, err = m.files().ReadAt(path, 0, off)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, found, fmt.Errorf("reading the transcript: %w", err)
		}
		if bytes.Contains(content[:bytes.LastIndexByte(content, '\n')+1], []byte(uuid)) {
			return true, true, nil
		}
	}
	return false, found, nil
}

// deflaters keeps compressors between chunks: making one costs more than a small chunk's
// compression.
var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.DefaultCompression)
	return w
}}

// newChunk is chunk seq of rel: data, which starts at offset of a file of fileSize bytes whose
// SHA-256 is fileSum.
func newChunk(rel string, seq int, offset int64, data []byte, fileSize int64, fileSum []byte) (store.MirrorChunk, error) {
	var buf bytes.Buffer
	w := deflaters.Get().(*flate.Writer)
	defer deflaters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(data); err != nil {
		return store.MirrorChunk{}, err
	}
	if err := w.Close(); err != nil {
		return store.MirrorChunk{}, err
	}
	return store.MirrorChunk{
		Path: rel, Seq: seq, FileOffset: offset, Data: buf.Bytes(), DataSize: len(data), DataSHA256: digest(data),
		FileSize: fileSize, FileSHA256: fileSum,
	}, nil
}

func digest(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}

// restoreSession makes the session's files in configDir exactly the mirror's: a file that is
// missing or differs (another host committed since, or this host's copy holds what a lost
// attempt wrote) is rebuilt from its chunks, verified against the manifest and the hashes, and
// replaces the local one. It reports how many files it wrote; a session never mirrored is left
// alone (0, nil). A mirror that does not rebuild what it says is an error wrapping
// errMirrorCorrupt, and nothing is written. Every file it read or wrote is marked (see
// fileMark), so that the next commit reads only what the CLI appends to it.
func (mm *mirrorMarks) restoreSession(ctx context.Context, db store.TxDB, configDir, sessionID string) (int, error) {
	m, err := store.ReadMirror(ctx, db, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	type file struct {
		rel     string
		seq     int
		content []byte
	}
	var stale []file
	for _, rel := range slices.Sorted(maps.Keys(m.Manifest)) {
		if !filepath.IsLocal(rel) {
			return 0, fmt.Errorf("%w: path %q leaves the config folder", errMirrorCorrupt, rel)
		}
		chunks := m.Files[rel]
		if len(chunks) == 0 || chunks[len(chunks)-1].Seq != m.Manifest[rel] {
			return 0, fmt.Errorf("%w: %s: chunk %d, its last, is missing", errMirrorCorrupt, rel, m.Manifest[rel])
		}
		last := chunks[len(chunks)-1]
		path := filepath.Join(configDir, rel)
		readAt := time.Now()
		if info, err := os.Stat(path); err == nil {
			if local, err := os.ReadFile(path); err == nil && int64(len(local)) == last.FileSize && bytes.Equal(digest(local), last.FileSHA256) {
				mm.mark(sessionID, rel, last.Seq, local, info, readAt)
				continue
			}
		}
		content, err := rebuild(chunks)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %v", errMirrorCorrupt, rel, err)
		}
		stale = append(stale, file{rel, last.Seq, content})
	}
	for i, f := range stale {
		path := filepath.Join(configDir, f.rel)
		readAt := time.Now()
		if err := writeAtomically(path, f.content); err != nil {
			return i, fmt.Errorf("restoring %s: %w", path, err)
		}
		if info, err := os.Stat(path); err == nil {
			mm.mark(sessionID, f.rel, f.seq, f.content, info, readAt)
		}
	}
	return len(stale), nil
}

// restoreSession is mirrorMarks.restoreSession on a host that remembers nothing.
func restoreSession(ctx context.Context, db store.TxDB, configDir, sessionID string) (int, error) {
	var mm mirrorMarks
	return mm.restoreSession(ctx, db, configDir, sessionID)
}

// mark records that chunk seq of the mirror ends rel, whose content (all of it) was read or
// written at readAt and is now info.
func (mm *mirrorMarks) mark(sessionID, rel string, seq int, content []byte, info fs.FileInfo, readAt time.Time) {
	h := sha256.New()
	h.Write(content)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return
	}
	mm.set(sessionID, rel, fileMark{seq: seq, size: int64(len(content)), sum: h.Sum(nil), hash: state, info: info,
		readAt: readAt, head: lastBytes(content, -markWindow), tail: lastBytes(content, markWindow)})
}

// rebuild concatenates a file's chunks, checking each and the whole.
func rebuild(chunks []store.MirrorChunk) ([]byte, error) {
	var content []byte
	for _, c := range chunks {
		if c.FileOffset != int64(len(content)) {
			return nil, fmt.Errorf("chunk %d starts at byte %d, after %d bytes: a chunk is missing", c.Seq, c.FileOffset, len(content))
		}
		data, err := inflate(c.Data, c.DataSize)
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", c.Seq, err)
		}
		if len(data) != c.DataSize || !bytes.Equal(digest(data), c.DataSHA256) {
			return nil, fmt.Errorf("chunk %d does not match its hash", c.Seq)
		}
		content = append(content, data...)
	}
	last := chunks[len(chunks)-1]
	if int64(len(content)) != last.FileSize || !bytes.Equal(digest(content), last.FileSHA256) {
		return nil, errors.New("the rebuilt file does not match its hash")
	}
	return content, nil
}

// writeAtomically replaces path with content: a reader sees the old file or the new one.
func writeAtomically(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(content); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// mirrorFailure is the attempt's error for a mirror that cannot be trusted.
func mirrorFailure(err error) *Error {
	if errors.Is(err, errMirrorCorrupt) {
		return &Error{Type: task.ErrTypeSessionMirrorCorrupt, Err: err}
	}
	return &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("restoring the session: %w", err)}
}

// inflate uncompresses a chunk's data.
func inflate(data []byte, size int) ([]byte, error) {
	return io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(data)), int64(size)+1))
}
