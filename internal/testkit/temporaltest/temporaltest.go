// Package temporaltest gives a test a Temporal dev server of its own, started from the pinned
// temporal CLI (scripts/tools.sh) and stopped when the test ends.
package temporaltest

import (
	"context"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/testtools"
)

// startTimeout bounds the server's start.
const startTimeout = 2 * time.Minute

// Start starts a headless dev server that keeps its state in memory, with searchAttributes
// (name → type) registered, and stops it when t ends. Without the temporal CLI the test is
// skipped, saying how to install it (a test gate that counts skips as failures makes that a
// failure wherever the tools are expected).
func Start(t testing.TB, searchAttributes map[string]string) *devserver.Server {
	t.Helper()
	bin, err := testtools.TemporalBin()
	if err != nil {
		t.Skipf("the temporal CLI is not installed (%v): run scripts/tools.sh", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Config{Bin: bin, Headless: true, SearchAttributes: searchAttributes})
	if err != nil {
		t.Fatalf("starting a Temporal dev server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}
