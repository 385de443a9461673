// Package procstat reads a process's line of /proc/PID/stat for tests and benchmarks: its
// state, parent and CPU times, as the kernel reports them.
package procstat

import (
	"fmt"
	"os"
	"strings"
)

// Fields returns the fields of pid's stat line after its command name, the state first (field 3
// of proc(5) is Fields[0]), and the command name; ok is false once pid is gone.
func Fields(pid int) (fields []string, comm string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, "", false
	}
	s := string(b)
	// The name is in parentheses and may hold spaces and parentheses of its own.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return nil, "", false
	}
	return strings.Fields(s[end+1:]), s[open+1 : end], true
}

// State is the kernel's state letter for pid ('R', 'S', 'T' stopped, 'Z' a zombie …), or ""
// once pid is gone.
func State(pid int) string {
	f, _, ok := Fields(pid)
	if !ok || len(f) == 0 {
		return ""
	}
	return f[0]
}
