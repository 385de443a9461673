package claudecode

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// prSetChildSubreaper is prctl(2)'s PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// becomeSubreaper makes the calling process the parent of its orphaned descendants: a tool that
// leaves the CLI's session, or whose parent exits, stays below it, where killDescendants finds
// it without reading every process of the host.
func becomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// childrenOf lists pid's children as the kernel keeps them (/proc/PID/task/TID/children); ok is
// false when it does not offer the list.
func childrenOf(pid int) (out []int, ok bool) {
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(base)
	if err != nil {
		return nil, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(base + "/" + t.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(base + "/" + t.Name()); serr == nil {
				return nil, false // the task is there, its list is not: the kernel has none
			}
			continue // the thread ended
		}
		if err != nil {
			return nil, false
		}
		for f := range bytes.FieldsSeq(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, true
}

// killDescendants kills every process below the calling process and reaps them, over a few
// rounds (a process may start a child between the listing and the kill). Called by a subreaper
// once its own child is reaped, it ends that child's whole tree. It reports false when the
// kernel does not list children or some process outlived the rounds; the caller then falls back
// to the tags.
func killDescendants() bool {
	self := os.Getpid()
	for range 5 {
		reapAll()
		var below []int
		for queue := []int{self}; len(queue) > 0; queue = queue[1:] {
			kids, ok := childrenOf(queue[0])
			if !ok {
				return false
			}
			below = append(below, kids...)
			queue = append(queue, kids...)
		}
		if len(below) == 0 {
			return true
		}
		for _, pid := range below {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	reapAll()
	return false
}

// reapAll reaps the calling process's children that have ended, without waiting.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// reapOrphans reaps the ended children of the calling process other than keep, whose end its
// own Wait collects: a subreaper's adopted orphans would otherwise stay zombies.
func reapOrphans(keep int) {
	kids, _ := childrenOf(os.Getpid())
	for _, pid := range kids {
		if pid != keep {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}
