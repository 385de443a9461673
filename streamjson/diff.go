package streamjson

import (
	"strconv"
	"strings"
)

// patchHunk is one hunk of the CLI's structuredPatch: the lines carry their diff prefix
// (' ', '-' or '+').
type patchHunk struct {
	OldStart int      `json:"oldStart"`
	OldLines int      `json:"oldLines"`
	NewStart int      `json:"newStart"`
	NewLines int      `json:"newLines"`
	Lines    []string `json:"lines"`
}

// unifiedDiff renders hunks as a unified diff of path with the hunks' own line numbers. It
// returns "" when there are no hunks.
func unifiedDiff(path string, hunks []patchHunk) string {
	if len(hunks) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("--- a/" + strings.TrimPrefix(path, "/") + "\n")
	b.WriteString("+++ b/" + strings.TrimPrefix(path, "/") + "\n")
	for _, h := range hunks {
		writeHunk(&b, h)
	}
	return b.String()
}

// creationDiff renders the creation of a file with content as a unified diff.
func creationDiff(path, content string) string {
	if content == "" {
		return ""
	}
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	h := patchHunk{NewStart: 1, NewLines: len(lines), Lines: make([]string, len(lines))}
	for i, l := range lines {
		h.Lines[i] = "+" + l
	}
	var b strings.Builder
	b.WriteString("--- /dev/null\n")
	b.WriteString("+++ b/" + strings.TrimPrefix(path, "/") + "\n")
	writeHunk(&b, h)
	if !strings.HasSuffix(content, "\n") {
		b.WriteString("\\ No newline at end of file\n")
	}
	return b.String()
}

func writeHunk(b *strings.Builder, h patchHunk) {
	b.WriteString("@@ -")
	writeRange(b, h.OldStart, h.OldLines)
	b.WriteString(" +")
	writeRange(b, h.NewStart, h.NewLines)
	b.WriteString(" @@\n")
	for _, l := range h.Lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
}

// writeRange writes a hunk range the way diff(1) does: the count is left out when it is 1.
func writeRange(b *strings.Builder, start, count int) {
	b.WriteString(strconv.Itoa(start))
	if count != 1 {
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(count))
	}
}
