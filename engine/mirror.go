package engine

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// sessionFiles lists, relative to configDir, the files of a session the CLI keeps there.
func sessionFiles(configDir, sessionID string) ([]string, error) {
	transcripts, err := filepath.Glob(filepath.Join(configDir, "projects", "*", sessionID+".jsonl"))
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Join(configDir, "file-history", sessionID)}
	var out []string
	for _, t := range transcripts {
		rel, err := filepath.Rel(configDir, t)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
		dirs = append(dirs, strings.TrimSuffix(t, ".jsonl"))
	}
	for _, dir := range dirs {
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".restore-") {
				rel, err := filepath.Rel(configDir, p)
				if err != nil {
					return err
				}
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// mirrorUpdate returns what the mirror needs to hold a session's files as they stand now: for
// each file, the bytes appended since the mirror's last chunk, or the whole file when it is new,
// was rewritten (its mirrored prefix changed) or its chain is long; and the manifest of them
// all. A transcript is taken up to its last complete line: the CLI may be writing the next.
func mirrorUpdate(ctx context.Context, db store.DB, configDir, sessionID string) (*store.MirrorUpdate, error) {
	files, err := sessionFiles(configDir, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing the session's files: %w", err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	state, err := store.MirrorState(ctx, db, sessionID)
	if err != nil {
		return nil, err
	}
	u := &store.MirrorUpdate{Manifest: make(map[string]int, len(files))}
	for _, rel := range files {
		content, err := os.ReadFile(filepath.Join(configDir, rel))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", rel, err)
		}
		if strings.HasSuffix(rel, ".jsonl") {
			content = content[:bytes.LastIndexByte(content, '\n')+1]
		}
		prev, known := state[rel]
		offset := int64(0)
		switch {
		case known && int64(len(content)) == prev.FileSize && bytes.Equal(digest(content), prev.FileSHA256):
			u.Manifest[rel] = prev.Seq // unchanged
			continue
		case known && prev.Chunks < mirrorChainLimit && int64(len(content)) > prev.FileSize &&
			bytes.Equal(digest(content[:prev.FileSize]), prev.FileSHA256):
			offset = prev.FileSize // appended to: only the new bytes
		}
		c, err := newChunk(rel, prev.Seq+1, offset, content)
		if err != nil {
			return nil, err
		}
		u.Chunks = append(u.Chunks, c)
		u.Manifest[rel] = c.Seq
	}
	return u, nil
}

// mirror takes what the session mirror needs of the committed turn, once the transcript holds
// the entry the commit resumes at (the CLI writes it before its result; a short wait covers a
// slow disk).
func (e *Engine) mirror(ctx context.Context, configDir, sessionID, lastUUID string) (*store.MirrorUpdate, *Error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		// The transcript is searched before the update is taken: it only grows, so what this
		// read holds, the update's view of the file holds too.
		held, found, err := transcriptHolds(configDir, sessionID, lastUUID)
		var u *store.MirrorUpdate
		if err == nil {
			u, err = mirrorUpdate(ctx, e.cfg.DB, configDir, sessionID)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, contextFailure(ctx)
			}
			return nil, &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("mirroring the session: %w", err)}
		}
		// A session without a transcript here has nothing to wait for: the CLI keeps none in this
		// folder (or not yet at all); the mirror takes what there is.
		if held || !found || time.Now().After(deadline) {
			return u, nil
		}
		select {
		case <-ctx.Done():
			return nil, contextFailure(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// transcriptHolds reports whether the session's transcript in configDir holds uuid in its
// complete lines, the part the mirror takes. The whole file counts, not what changed since the
// last commit: a transcript that did not change may not hold the entry yet, and one that did
// may hold it from before. found says whether the session has a transcript there at all.
func transcriptHolds(configDir, sessionID, uuid string) (held, found bool, err error) {
	transcripts, err := filepath.Glob(filepath.Join(configDir, "projects", "*", sessionID+".jsonl"))
	if err != nil {
		return false, false, err
	}
	for _, t := range transcripts {
		content, err := os.ReadFile(t)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, found, fmt.Errorf("reading the transcript: %w", err)
		}
		found = true
		if bytes.Contains(content[:bytes.LastIndexByte(content, '\n')+1], []byte(uuid)) {
			return true, true, nil
		}
	}
	return false, found, nil
}

func newChunk(rel string, seq int, offset int64, content []byte) (store.MirrorChunk, error) {
	data := content[offset:]
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return store.MirrorChunk{}, err
	}
	if _, err := w.Write(data); err != nil {
		return store.MirrorChunk{}, err
	}
	if err := w.Close(); err != nil {
		return store.MirrorChunk{}, err
	}
	return store.MirrorChunk{
		Path: rel, Seq: seq, FileOffset: offset, Data: buf.Bytes(), DataSize: len(data), DataSHA256: digest(data),
		FileSize: int64(len(content)), FileSHA256: digest(content),
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
// errMirrorCorrupt, and nothing is written.
func restoreSession(ctx context.Context, db store.TxDB, configDir, sessionID string) (int, error) {
	m, err := store.ReadMirror(ctx, db, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	type file struct {
		path    string
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
		if local, err := os.ReadFile(path); err == nil && int64(len(local)) == last.FileSize && bytes.Equal(digest(local), last.FileSHA256) {
			continue
		}
		content, err := rebuild(chunks)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %v", errMirrorCorrupt, rel, err)
		}
		stale = append(stale, file{path, content})
	}
	for i, f := range stale {
		if err := writeAtomically(f.path, f.content); err != nil {
			return i, fmt.Errorf("restoring %s: %w", f.path, err)
		}
	}
	return len(stale), nil
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
