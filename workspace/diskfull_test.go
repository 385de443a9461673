package workspace

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// smallDisk mounts a tmpfs of size at a new folder, or skips the test where mounting is not
// allowed.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small filesystem here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func TestDiskFullDuringACheckpoint(t *testing.T) {
	repo := origin(t)
	disk := smallDisk(t, "1m")
	m := host(t, "", func(c *Config) { c.StateDir = filepath.Join(disk, "state") })
	task := Task{ID: "t1", Repo: repo}
	prepare(t, m, task, "main")
	big := make([]byte, 2<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(m.Dir("t1"), "big.bin")
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := m.Checkpoint(context.Background(), task, 1, "turn 1")
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Checkpoint on a full disk = %v, want ErrDiskFull", err)
	}
	if refs := witness(t, m.cfg.Remote, "for-each-ref", "refs/drover/tasks/t1/turns/"); refs != "" {
		t.Errorf("a checkpoint reached the remote: %s", refs)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(m.Dir("t1"), "small.txt"), "fits\n")
	checkpoint(t, m, task, 1)
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/t1/turns/1:small.txt"); got != "fits\n" {
		t.Errorf("the retried checkpoint holds %q", got)
	}
}
