package claudecode

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"syscall"
)

// TagEnv is the environment variable that marks every process of one CLI's tree. Start gives
// each CLI a tag of its own; the tools the CLI runs inherit it, including those that leave the
// CLI's process group (the Bash tool starts each command in a session of its own), so the whole
// tree can be found and killed after the CLI is gone. A command that clears its environment
// escapes the tag.
const TagEnv = "DROVER_PROCESS_TAG"

// newTag returns a fresh tag under prefix: prefix + "/" + 16 random hex digits.
func newTag(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "/" + hex.EncodeToString(b[:])
}

// KillTagged sends SIGKILL to every process whose environment carries TagEnv with exactly the
// value tag, and returns how many it signalled. Processes that cannot be read (another user's)
// are skipped.
func KillTagged(tag string) int {
	return killMatching(func(v []byte) bool { return string(v) == tag })
}

// KillTaggedUnder sends SIGKILL to every process whose TagEnv value starts with prefix + "/":
// every process tree the CLIs started under that prefix (a host) left behind. It returns how
// many it signalled. Call it only when no CLI of the prefix should be alive, for example when
// a worker host starts.
func KillTaggedUnder(prefix string) int {
	p := []byte(prefix + "/")
	return killMatching(func(v []byte) bool { return bytes.HasPrefix(v, p) })
}

// killMatching kills the processes whose tag matches, over a few rounds (a process may start a
// child between the scan and the kill), and returns how many distinct processes it signalled.
func killMatching(match func(tag []byte) bool) int {
	killed := map[int]bool{}
	self := os.Getpid()
	for range 3 {
		fresh := 0
		for _, pid := range taggedPIDs(match) {
			if pid == self {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil && !killed[pid] {
				killed[pid] = true
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	return len(killed)
}

// taggedPIDs lists the live processes whose TagEnv value matches.
func taggedPIDs(match func(tag []byte) bool) []int {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil
	}
	key := []byte(TagEnv + "=")
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil || len(env) == 0 {
			continue // gone, a zombie, or not ours to read
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, key); ok {
				if match(v) {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}
