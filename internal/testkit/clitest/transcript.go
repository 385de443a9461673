package clitest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// RootPlaceholder replaces Harness.Root in written transcripts, so that the work directory reads
// /work/dir, the config directory /work/config, and so on, whatever the test's temporary directory.
const RootPlaceholder = "/work"

// Normalize replaces the harness's temporary root in line by RootPlaceholder, both as a path and as
// the CLI's project slug of a path (every character other than a letter or digit turned into "-",
// as in CLAUDE_CONFIG_DIR/projects/<slug>/). Nothing else is changed.
func (h *Harness) Normalize(line []byte) []byte {
	line = bytes.ReplaceAll(line, []byte(h.Root), []byte(RootPlaceholder))
	return bytes.ReplaceAll(line, []byte(slug(h.Root)), []byte(slug(RootPlaceholder)))
}

// slug is the CLI's name for a project folder.
func slug(path string) string {
	b := []byte(path)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// WriteTranscript writes the current process's stdout, one line per line as read, to
// dir/name.jsonl and what we wrote to its stdin to dir/name.stdin.jsonl, both normalized. Stop the
// process first to have all of its output. It refuses to write a line holding the API key.
func (h *Harness) WriteTranscript(dir, name string) error {
	for _, f := range []struct {
		file  string
		lines [][]byte
	}{
		{name + ".jsonl", h.Stdout()},
		{name + ".stdin.jsonl", h.Stdin()},
	} {
		var b bytes.Buffer
		for i, l := range f.lines {
			if bytes.Contains(l, []byte(h.apiKey)) {
				return fmt.Errorf("writing %s: line %d holds the API key", f.file, i+1)
			}
			b.Write(h.Normalize(l))
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing transcript: %w", err)
		}
	}
	return nil
}

// SessionFile returns the CLI's own transcript of session sessionID
// (CLAUDE_CONFIG_DIR/projects/<slug of the work directory>/<id>.jsonl), or "" when there is none.
func (h *Harness) SessionFile(sessionID string) string {
	matches, err := filepath.Glob(filepath.Join(h.ConfigDir, "projects", "*", sessionID+".jsonl"))
	if err != nil || len(matches) != 1 {
		return ""
	}
	return matches[0]
}
