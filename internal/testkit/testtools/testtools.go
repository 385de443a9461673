// Package testtools locates the pinned tools for tests, from the test process's environment
// (DROVER_CLAUDE_BIN and the rest, as scripts/tools.sh --print sets them). Shipped code reads the
// environment only in cmd/ and hands internal/tools an Env; tests read it here.
package testtools

import (
	"os"

	"github.com/drover-run/drover/internal/tools"
)

// ChromiumBin is tools.Env(os.Getenv).ChromiumBin.
func ChromiumBin() (string, error) { return tools.Env(os.Getenv).ChromiumBin() }

// AxeJS is tools.Env(os.Getenv).AxeJS.
func AxeJS() (string, error) { return tools.Env(os.Getenv).AxeJS() }

// ClaudeBin is tools.Env(os.Getenv).ClaudeBin.
func ClaudeBin() (string, error) { return tools.Env(os.Getenv).ClaudeBin() }

// TemporalBin is tools.Env(os.Getenv).TemporalBin.
func TemporalBin() (string, error) { return tools.Env(os.Getenv).TemporalBin() }

// TemporalServerTools is tools.Env(os.Getenv).TemporalServer.
func TemporalServerTools() (tools.TemporalServer, error) {
	return tools.Env(os.Getenv).TemporalServer()
}
