package engine

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func TestLeftoverPrivateFoldersOfTheHostAreRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	mine, err := os.MkdirTemp("", privateDirPattern("host/a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mine, "mcp.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := os.MkdirTemp("", privateDirPattern("host/a-b")) // a host whose id extends the first's
	if err != nil {
		t.Fatal(err)
	}
	removeLeftoverDirs("host/a", slog.New(slog.DiscardHandler))
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("the host's leftover folder is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another host's folder was removed: %v", err)
	}
}
