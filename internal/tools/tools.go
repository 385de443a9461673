// Package tools locates drover's pinned external tools (the Claude Code CLI, the Temporal CLI, and the
// Temporal server with its SQL schema tool), axe-core and the system's Chromium, as installed by scripts/tools.sh, so that tests and the dev
// command find the same binaries. It promises that the version pins here match the script's (and, for
// the server, docker-compose.yml's image), and that a missing tool yields an error telling how to
// install it.
package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Pinned versions; scripts/tools.sh installs exactly these (a test checks that they agree).
// TemporalServerVersion is the go.temporal.io/server release of docker-compose.yml's server image,
// which the script reads from there.
const (
	ClaudeVersion         = "2.1.332"
	TemporalVersion       = "v1.5.1"
	TemporalServerVersion = "v1.29.7"
	// AxeVersion is the npm package axe-core the web console's browser tests check the page with.
	AxeVersion = "4.11.0"
)

// Environment variables that override the locations.
const (
	EnvClaudeBin         = "DROVER_CLAUDE_BIN"
	EnvTemporalBin       = "DROVER_TEMPORAL_BIN"
	EnvTemporalServerDir = "DROVER_TEMPORAL_SERVER_DIR"
	EnvToolsDir          = "DROVER_TOOLS"
	EnvChromiumBin       = "DROVER_CHROMIUM_BIN"
	EnvAxeJS             = "DROVER_AXE_JS"
)

// DefaultChromiumBin is where Debian's chromium package installs the browser, which
// scripts/tools.sh installs when it is missing.
const DefaultChromiumBin = "/usr/bin/chromium"

// ErrNotInstalled is returned (wrapped) when a tool is missing.
var ErrNotInstalled = errors.New("not installed: run scripts/tools.sh")

// Env is where the tools' locations come from: a lookup of the variables above and of HOME.
// The command line passes the environment it read; tests use the process's own (ClaudeBin,
// TemporalBin).
type Env func(key string) string

// Dir returns the tools folder: $DROVER_TOOLS, or $HOME/.cache/drover/tools.
func (env Env) Dir() (string, error) {
	if d := env(EnvToolsDir); d != "" {
		return d, nil
	}
	home := env("HOME")
	if home == "" {
		return "", errors.New("locating tools folder: neither DROVER_TOOLS nor HOME is set")
	}
	return filepath.Join(home, ".cache", "drover", "tools"), nil
}

// ClaudeBin returns the path of the pinned Claude Code CLI: $DROVER_CLAUDE_BIN if set, else
// <Dir>/claude-code-<ClaudeVersion>/node_modules/@anthropic-ai/claude-code-linux-x64/claude.
func (env Env) ClaudeBin() (string, error) {
	return env.locate("claude", EnvClaudeBin, filepath.Join("claude-code-"+ClaudeVersion,
		"node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude"))
}

// TemporalBin returns the path of the pinned Temporal CLI: $DROVER_TEMPORAL_BIN if set, else
// <Dir>/temporal-<TemporalVersion>/temporal.
func (env Env) TemporalBin() (string, error) {
	return env.locate("temporal", EnvTemporalBin, filepath.Join("temporal-"+TemporalVersion, "temporal"))
}

// TemporalServer is an installed Temporal server release: the server, its SQL schema tool and the
// release's Postgres schema, laid out as Temporal's admin-tools image lays it.
type TemporalServer struct {
	// Dir is the release's folder.
	Dir string
	// Bin is the server (temporal-server).
	Bin string
	// SQLTool is the schema tool (temporal-sql-tool).
	SQLTool string
	// SchemaDir holds postgresql/v12/{temporal,visibility}/versioned.
	SchemaDir string
}

// TemporalServer locates the pinned Temporal server: $DROVER_TEMPORAL_SERVER_DIR if set, else
// <Dir>/temporal-server-<TemporalServerVersion>.
func (env Env) TemporalServer() (TemporalServer, error) {
	dir := env(EnvTemporalServerDir)
	if dir == "" {
		root, err := env.Dir()
		if err != nil {
			return TemporalServer{}, err
		}
		dir = filepath.Join(root, "temporal-server-"+TemporalServerVersion)
	}
	s := TemporalServer{Dir: dir, SchemaDir: filepath.Join(dir, "schema")}
	var err error
	if s.Bin, err = executable("temporal-server", filepath.Join(dir, "temporal-server")); err != nil {
		return TemporalServer{}, err
	}
	if s.SQLTool, err = executable("temporal-sql-tool", filepath.Join(dir, "temporal-sql-tool")); err != nil {
		return TemporalServer{}, err
	}
	for _, kind := range []string{"temporal", "visibility"} {
		versioned := filepath.Join(s.SchemaDir, "postgresql", "v12", kind, "versioned")
		if fi, err := os.Stat(versioned); err != nil || !fi.IsDir() {
			return TemporalServer{}, fmt.Errorf("temporal-server: schema folder %s missing (%w)", versioned, ErrNotInstalled)
		}
	}
	return s, nil
}

// ChromiumBin returns the path of the Chromium browser the web console's browser tests and benchmark
// drive: $DROVER_CHROMIUM_BIN if set, else DefaultChromiumBin. Unlike the pinned tools it is the
// system's package, not a version of the project's choosing.
func (env Env) ChromiumBin() (string, error) {
	path := env(EnvChromiumBin)
	if path == "" {
		path = DefaultChromiumBin
	}
	return executable("chromium", path)
}

// AxeJS returns the path of axe-core's script (axe.min.js): $DROVER_AXE_JS if set, else
// <Dir>/axe-core-<AxeVersion>/node_modules/axe-core/axe.min.js.
func (env Env) AxeJS() (string, error) {
	path := env(EnvAxeJS)
	if path == "" {
		dir, err := env.Dir()
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, "axe-core-"+AxeVersion, "node_modules", "axe-core", "axe.min.js")
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("axe-core: %s %w", path, ErrNotInstalled)
	case err != nil:
		return "", fmt.Errorf("locating axe-core: %w", err)
	case fi.IsDir():
		return "", fmt.Errorf("axe-core: %s is a folder (%w)", path, ErrNotInstalled)
	}
	return path, nil
}

func (env Env) locate(name, key, rel string) (string, error) {
	path := env(key)
	if path == "" {
		dir, err := env.Dir()
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, rel)
	}
	return executable(name, path)
}

// executable returns path if it is an executable file, else an error wrapping ErrNotInstalled.
func executable(name, path string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s: %s %w", name, path, ErrNotInstalled)
	case err != nil:
		return "", fmt.Errorf("locating %s: %w", name, err)
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s: %s is not an executable file (%w)", name, path, ErrNotInstalled)
	}
	return path, nil
}
