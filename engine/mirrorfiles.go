package engine

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What the session mirror reads of the config folder, and what it remembers of it between
// commits, so that a commit costs what the turn wrote: never a search of the config folder
// (which keeps a folder for every workspace the host ever served), never a second read of what
// the mirror already holds.

// mirrorFS is how the mirror reaches the files of the config folder.
type mirrorFS interface {
	Stat(path string) (fs.FileInfo, error)
	ReadDir(path string) ([]fs.DirEntry, error)
	// ReadAt reads path from byte off to its end, or n bytes of it when n >= 0 (fewer at its end).
	ReadAt(path string, off, n int64) ([]byte, error)
}

// osFS is mirrorFS on the host's file system.
type osFS struct{}

func (osFS) Stat(path string) (fs.FileInfo, error)      { return os.Stat(path) }
func (osFS) ReadDir(path string) ([]fs.DirEntry, error) { return os.ReadDir(path) }

func (osFS) ReadAt(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if n < 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
		b := bytes.NewBuffer(make([]byte, 0, max(st.Size()-off, 0)+512))
		_, err = b.ReadFrom(f)
		return b.Bytes(), err
	}
	b := make([]byte, n)
	k, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return b[:k], err
}

// maxProjectFolder is the longest project folder name the CLI derives from a workspace path
// alone; a longer one is cut and given a hash of the path (see projectFolder).
const maxProjectFolder = 200

// projectFolder is the folder, under the config folder's projects/, where the CLI keeps the
// transcripts of sessions run in workspace: the path with every character other than an ASCII
// letter or digit turned into "-". ok is false when the name is too long to be derived (the CLI
// then cuts it and appends a hash of its own).
func projectFolder(workspace string) (name string, ok bool) {
	b := []byte(workspace)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b), workspace != "" && len(b) <= maxProjectFolder
}

// isTranscript reports whether rel, relative to the config folder, is a session's main
// transcript: projects/<folder>/<session>.jsonl.
func isTranscript(rel, sessionID string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	return len(parts) == 3 && parts[0] == "projects" && parts[2] == sessionID+".jsonl"
}

// racyWindow is how recent a file's modification time may be for its size and time not to
// prove it unchanged: a second write within the file system's time granularity keeps both.
const racyWindow = 2 * time.Second

// markWindow is how many bytes of a transcript's start and end a mark keeps, to notice a
// transcript rewritten in place rather than appended to.
const markWindow = 1024

// maxMarkedSessions bounds the sessions whose marks a host keeps; past it they are forgotten,
// which costs the next commit of each a whole read.
const maxMarkedSessions = 4096

// fileMark is what the mirror knows of a file it mirrored from this host: what its last chunk
// made of the file, and the file as it was read.
type fileMark struct {
	seq  int
	size int64  // the bytes the mirror holds of the file
	sum  []byte // their SHA-256
	hash []byte // the SHA-256 state after them, to hash an append without the bytes before it
	info fs.FileInfo
	// head and tail are the first and last bytes (up to markWindow) of what the mirror holds.
	head, tail []byte
	readAt     time.Time
}

// mirrorMarks holds the marks of the sessions mirrored from this host, and where their
// transcripts were found when the workspace alone did not say. The zero value is ready.
type mirrorMarks struct {
	fs    mirrorFS // nil means osFS
	mu    sync.Mutex
	marks map[string]map[string]fileMark // session → path relative to the config folder
	found map[string][]string            // session → transcripts found by a search
}

func (m *mirrorMarks) files() mirrorFS {
	if m.fs == nil {
		return osFS{}
	}
	return m.fs
}

// get returns the mark of rel in session, if any.
func (m *mirrorMarks) get(sessionID, rel string) (fileMark, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk, ok := m.marks[sessionID][rel]
	return mk, ok
}

// set records the mark of rel in session.
func (m *mirrorMarks) set(sessionID, rel string, mk fileMark) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = make(map[string]map[string]fileMark)
	}
	if _, ok := m.marks[sessionID]; !ok {
		if len(m.marks) >= maxMarkedSessions {
			clear(m.marks)
			clear(m.found)
		}
		m.marks[sessionID] = make(map[string]fileMark)
	}
	m.marks[sessionID][rel] = mk
}

// transcripts lists, relative to configDir, where the session's main transcripts may be: in the
// workspace's project folder, and wherever the mirror already holds one (a session that ran on a
// host whose workspace path differs). Only when the workspace does not name the folder and the
// mirror knows of none is the config folder searched, once per session.
func (m *mirrorMarks) transcripts(configDir, workspace, sessionID string, known []string) ([]string, error) {
	var out []string
	if folder, ok := projectFolder(workspace); ok {
		out = append(out, filepath.Join("projects", folder, sessionID+".jsonl"))
	}
	for _, rel := range known {
		if isTranscript(rel, sessionID) {
			out = append(out, rel)
		}
	}
	if len(out) == 0 {
		m.mu.Lock()
		out = slices.Clone(m.found[sessionID])
		m.mu.Unlock()
	}
	if len(out) == 0 {
		found, err := m.search(configDir, sessionID)
		if err != nil {
			return nil, err
		}
		out = found
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// search looks for the session's transcripts in every project folder, and remembers what it
// found.
func (m *mirrorMarks) search(configDir, sessionID string) ([]string, error) {
	entries, err := m.files().ReadDir(filepath.Join(configDir, "projects"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range entries {
		rel := filepath.Join("projects", d.Name(), sessionID+".jsonl")
		if st, err := m.files().Stat(filepath.Join(configDir, rel)); err == nil && st.Mode().IsRegular() {
			out = append(out, rel)
		}
	}
	if len(out) > 0 {
		m.mu.Lock()
		if m.found == nil {
			m.found = make(map[string][]string)
		}
		m.found[sessionID] = out
		m.mu.Unlock()
	}
	return out, nil
}

// sessionFiles lists, relative to configDir, the files of a session the CLI keeps there: its
// transcripts (see transcripts), the folder beside each (subagent transcripts, tool results
// stored apart) and its file-history backups.
func (m *mirrorMarks) sessionFiles(configDir, workspace, sessionID string, known []string) ([]string, error) {
	transcripts, err := m.transcripts(configDir, workspace, sessionID, known)
	if err != nil {
		return nil, err
	}
	var out []string
	dirs := []string{filepath.Join("file-history", sessionID)}
	for _, rel := range transcripts {
		st, err := m.files().Stat(filepath.Join(configDir, rel))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if st.Mode().IsRegular() {
			out = append(out, rel)
		}
		dirs = append(dirs, strings.TrimSuffix(rel, ".jsonl"))
	}
	for _, dir := range dirs {
		if out, err = m.walk(configDir, dir, out); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// walk appends the regular files under dir (relative to configDir) to out, but for a restore's
// temporary files.
func (m *mirrorMarks) walk(configDir, dir string, out []string) ([]string, error) {
	entries, err := m.files().ReadDir(filepath.Join(configDir, dir))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, d := range entries {
		rel := filepath.Join(dir, d.Name())
		switch {
		case d.IsDir():
			if out, err = m.walk(configDir, rel, out); err != nil {
				return nil, err
			}
		case d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".restore-"):
			out = append(out, rel)
		}
	}
	return out, nil
}
