package tools

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPinsMatchScript keeps the Go constants and scripts/tools.sh in step.
func TestPinsMatchScript(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	for name, want := range map[string]string{"CLAUDE_VERSION": ClaudeVersion, "TEMPORAL_VERSION": TemporalVersion} {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindStringSubmatch(script)
		if m == nil {
			t.Errorf("scripts/tools.sh does not set %s", name)
			continue
		}
		if m[1] != want {
			t.Errorf("scripts/tools.sh pins %s=%s, Go constant says %s", name, m[1], want)
		}
	}
	// The layout under the version folder must match too.
	for _, frag := range []string{
		`claude_bin="$claude_dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"`,
		`claude_dir="$root/claude-code-$CLAUDE_VERSION"`,
		`temporal_dir="$root/temporal-$TEMPORAL_VERSION"`,
		`temporal_bin="$temporal_dir/temporal"`,
		`root="${DROVER_TOOLS:-$HOME/.cache/drover/tools}"`,
	} {
		if !strings.Contains(script, frag) {
			t.Errorf("scripts/tools.sh no longer contains %s", frag)
		}
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude-code-"+ClaudeVersion, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")
	if err := os.MkdirAll(filepath.Dir(claude), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(claude, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvToolsDir, dir)
	t.Setenv(EnvClaudeBin, "")
	t.Setenv(EnvTemporalBin, "")

	got, err := ClaudeBin()
	if err != nil || got != claude {
		t.Fatalf("ClaudeBin() = %q, %v; want %q", got, err, claude)
	}
	_, err = TemporalBin()
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "scripts/tools.sh") {
		t.Fatalf("TemporalBin() error = %v; want ErrNotInstalled mentioning scripts/tools.sh", err)
	}

	// The explicit variable wins over the folder.
	other := filepath.Join(dir, "temporal")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTemporalBin, other)
	if got, err := TemporalBin(); err != nil || got != other {
		t.Fatalf("TemporalBin() = %q, %v; want %q", got, err, other)
	}

	// A file that cannot be executed is not a tool.
	if err := os.Chmod(other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := TemporalBin(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("TemporalBin() on a non-executable file: %v", err)
	}

	// Without DROVER_TOOLS the folder is under HOME.
	t.Setenv(EnvToolsDir, "")
	t.Setenv("HOME", dir)
	if d, err := Env(os.Getenv).Dir(); err != nil || d != filepath.Join(dir, ".cache", "drover", "tools") {
		t.Fatalf("Dir() = %q, %v", d, err)
	}
}
