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
	for name, want := range map[string]string{"CLAUDE_VERSION": ClaudeVersion, "TEMPORAL_VERSION": TemporalVersion, "AXE_VERSION": AxeVersion} {
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
		`server_dir="$root/temporal-server-$TEMPORAL_SERVER_VERSION"`,
		`server_bin="$server_dir/temporal-server"`,
		`axe_dir="$root/axe-core-$AXE_VERSION"`,
		`axe_js="$axe_dir/node_modules/axe-core/axe.min.js"`,
		`echo "DROVER_AXE_JS=$axe_js"`,
		`"$tmp/temporal-sql-tool"`,
		`cp -R "$src/schema/postgresql/v12" "$tmp/schema/postgresql/"`,
		// The server's version is the compose image's.
		`TEMPORAL_SERVER_VERSION=v$(sed -n 's|^ *image: temporalio/server:\([0-9][0-9.]*\)$|\1|p' "$compose_file")`,
	} {
		if !strings.Contains(script, frag) {
			t.Errorf("scripts/tools.sh no longer contains %s", frag)
		}
	}
}

// TestServerPinMatchesCompose keeps the server the tests build at the release of the image
// docker-compose.yml deploys.
func TestServerPinMatchesCompose(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ *image: temporalio/server:([0-9][0-9.]*)$`).FindAllStringSubmatch(string(b), -1)
	if len(m) != 1 {
		t.Fatalf("docker-compose.yml names the temporalio/server image %d times, want once: %v", len(m), m)
	}
	if "v"+m[0][1] != TemporalServerVersion {
		t.Errorf("docker-compose.yml runs temporalio/server:%s, TemporalServerVersion is %s", m[0][1], TemporalServerVersion)
	}
}

func TestLocateTemporalServer(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvToolsDir, dir)
	t.Setenv(EnvTemporalServerDir, "")
	release := filepath.Join(dir, "temporal-server-"+TemporalServerVersion)
	if _, err := Env(os.Getenv).TemporalServer(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Env(os.Getenv).TemporalServer() on an empty folder: %v", err)
	}
	for _, bin := range []string{"temporal-server", "temporal-sql-tool"} {
		if err := os.MkdirAll(release, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(release, bin), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Binaries without the schema are not an installation.
	if _, err := Env(os.Getenv).TemporalServer(); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("Env(os.Getenv).TemporalServer() without the schema: %v", err)
	}
	for _, kind := range []string{"temporal", "visibility"} {
		if err := os.MkdirAll(filepath.Join(release, "schema", "postgresql", "v12", kind, "versioned"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Env(os.Getenv).TemporalServer()
	if err != nil {
		t.Fatal(err)
	}
	want := TemporalServer{Dir: release, Bin: filepath.Join(release, "temporal-server"),
		SQLTool: filepath.Join(release, "temporal-sql-tool"), SchemaDir: filepath.Join(release, "schema")}
	if got != want {
		t.Fatalf("Env(os.Getenv).TemporalServer() = %+v, want %+v", got, want)
	}
	// The variable names another release folder.
	t.Setenv(EnvTemporalServerDir, filepath.Join(dir, "elsewhere"))
	if _, err := Env(os.Getenv).TemporalServer(); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("Env(os.Getenv).TemporalServer() with %s set: %v", EnvTemporalServerDir, err)
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

	got, err := Env(os.Getenv).ClaudeBin()
	if err != nil || got != claude {
		t.Fatalf("ClaudeBin() = %q, %v; want %q", got, err, claude)
	}
	_, err = Env(os.Getenv).TemporalBin()
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "scripts/tools.sh") {
		t.Fatalf("TemporalBin() error = %v; want ErrNotInstalled mentioning scripts/tools.sh", err)
	}

	// The explicit variable wins over the folder.
	other := filepath.Join(dir, "temporal")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTemporalBin, other)
	if got, err := Env(os.Getenv).TemporalBin(); err != nil || got != other {
		t.Fatalf("TemporalBin() = %q, %v; want %q", got, err, other)
	}

	// A file that cannot be executed is not a tool.
	if err := os.Chmod(other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Env(os.Getenv).TemporalBin(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("TemporalBin() on a non-executable file: %v", err)
	}

	// Without DROVER_TOOLS the folder is under HOME.
	t.Setenv(EnvToolsDir, "")
	t.Setenv("HOME", dir)
	if d, err := Env(os.Getenv).Dir(); err != nil || d != filepath.Join(dir, ".cache", "drover", "tools") {
		t.Fatalf("Dir() = %q, %v", d, err)
	}
}

// TestChromiumBin: the variable names the browser; without it, Debian's path; a missing one says
// how to install it.
func TestChromiumBin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "chromium")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := func(vars map[string]string) Env { return func(k string) string { return vars[k] } }
	if got, err := env(map[string]string{EnvChromiumBin: bin}).ChromiumBin(); err != nil || got != bin {
		t.Fatalf("ChromiumBin() = %q, %v; want %q", got, err, bin)
	}
	_, err := env(map[string]string{EnvChromiumBin: filepath.Join(dir, "missing")}).ChromiumBin()
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "scripts/tools.sh") {
		t.Fatalf("ChromiumBin() of a missing file: %v", err)
	}
	if _, statErr := os.Stat(DefaultChromiumBin); statErr == nil {
		if got, err := env(nil).ChromiumBin(); err != nil || got != DefaultChromiumBin {
			t.Fatalf("ChromiumBin() = %q, %v; want %q", got, err, DefaultChromiumBin)
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `echo "DROVER_CHROMIUM_BIN=$chromium_bin"`) || !strings.Contains(string(b), "apt-get install -y -q --no-install-recommends chromium") {
		t.Error("scripts/tools.sh no longer installs and prints Chromium")
	}
}
